"""The Target host page's words for `loadbench recommend`'s flags.

`bench.analysis.advice` (and `accelerator`, `target`, `intervals`) word their sentences for the
CLI: "add --accelerator", "give --device-ram". On the page those are widgets, so the page says
"turn on \"The target has an accelerator\"" instead (`page_words`). Each pattern is a phrase of
`bench.analysis`; a test fails where a flag is left on the page (`tests/dashboard/
test_target_words.py`), so a new or reworded phrase is caught. Commands to type in a terminal
(in backticks) keep their flags. No Streamlit, no jax.
"""

from __future__ import annotations

import re

# The widgets' labels, which the page's sentences name in place of `recommend`'s flags.
LOAD_FROM = "Load on the target from"
ACCELERATOR = "The target has an accelerator (the weights land in device memory)"
DEVICE_RAM = "Device RAM (GiB, 0: not given)"

# (a phrase of `bench.analysis`, as a regular expression; what the page says instead)
PAGE_WORDS = (
    (
        r"add --cache cold or --disk-read-speed for a cold disk",
        f'upload the target\'s probe and pick "cold" under "{LOAD_FROM}" for a cold disk',
    ),
    (r"or predict --cache warm", f'or pick "warm" under "{LOAD_FROM}"'),
    (r"add --accelerator", 'turn on "The target has an accelerator"'),
    (r"([Gg])ive --device-ram \(e\.g\. 24GiB\)", r'\1ive "Device RAM (GiB)"'),
    (r"give --device-ram", 'give "Device RAM"'),
    (r"give --devices N to fit on N alone", 'set "Devices" to fit on one count alone'),
    (r"or with --probe\b", "or with `loadbench bench run --probe`"),
    (
        r"add repeats \(--max-repeats, --repeat-budget\)",
        "add repeats (`loadbench bench run --max-repeats`, `--repeat-budget`)",
    ),
)


def page_words(text: str) -> str:
    """`text` (a sentence of `bench.analysis`) naming the page's widgets, not the CLI's flags.

    Example:
        >>> page_words("With a GPU/TPU the weights land in device memory: add --accelerator.")
        'With a GPU/TPU the weights land in device memory: turn on "The target has an accelerator".'
    """
    for pattern, words in PAGE_WORDS:
        text = re.sub(pattern, words, text)
    return text
