"""Real architectures in NNX, each with a key map from its Hugging Face checkpoints.

One module per architecture (`gpt2`, `llama`, `vit`), each defining `Config` (`Config.from_hf`
reads a `config.json` dict), the model (`MODEL`), `PRESET_CONFIGS` (the config.json values of
the presets it ports), `config_for(hf, file_keys)`, `key_map(config)` (model state path -> HF
key, or (HF key, `loader.Transpose` / `Reshape` / `Slice` or a tuple of them)),
`example_input(config)` (the forward's declared input), and `IGNORE_UNEXPECTED` /
`IGNORE_MISSING` (glob patterns over the file keys / model paths its checkpoints may hold or lack
and the port does not need: `load_model(ignore_unexpected=, ignore_missing=)`). `port_for(preset)`
(in `shapes.architectures.port`, which imports jax) bundles them for one preset; this module
imports nothing heavy, so listing the presets that have a port stays light.

An architecture may also have a scanned variant (`SCANNED`: its layers stacked into one leaf per
parameter with `nnx.vmap` / `nnx.scan`, filled through `loader.Stack`), the same module interface
in `shapes.architectures.<module>`: `port_for(preset, scanned=True)`, `bench run --model
port-scanned`.

A preset in a quantized layout (`QUANTIZED`) has its architecture's port in the file's unquantized
float dtype: its key map (`key_map(config, quant=...)`) dequantizes each weight on load.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

#: preset -> architecture module (`shapes.architectures.<module>`)
ARCHITECTURES = {
    "gpt2": "gpt2",
    "tiny-gpt2": "gpt2",
    "llama3-8b": "llama",
    "llama3-8b-fp8": "llama",
    "llama3-8b-int4": "llama",
    "tiny-llama-fp8": "llama",
    "tiny-llama-int4": "llama",
    "tinyllama-1.1b": "llama",
    "vit-base": "vit",
}
#: architecture module -> its scanned-layer variant's module
SCANNED = {"llama": "llama_scanned"}
#: presets stored in a quantized layout: their port dequantizes on load (`key_map(config,
#: quant=)`, the layout read from the file's tensors); a scanned variant reads none of them
QUANTIZED = frozenset({"llama3-8b-fp8", "llama3-8b-int4", "tiny-llama-fp8", "tiny-llama-int4"})


def port_names() -> list[str]:
    """The presets that have a real architecture (`bench run --model port` accepts these)."""
    return sorted(ARCHITECTURES)


def scanned_port_names() -> list[str]:
    """The presets whose architecture has a scanned variant (`bench run --model port-scanned`)."""
    return sorted(p for p, arch in ARCHITECTURES.items() if arch in SCANNED and p not in QUANTIZED)


def declared_for(patterns: Iterable[str], file_keys: Iterable[str]) -> tuple[str, ...]:
    """The declared ignore patterns that concern one checkpoint: those matching one of its keys.

    An architecture declares what any of its checkpoints may hold (an old save's buffers, a head);
    a strict load refuses a pattern that matches nothing, so a load passes only these.

    Example:
        >>> declared_for(bert.IGNORE_UNEXPECTED, ["embeddings.position_ids", "pooler.dense.bias"])
        ('*embeddings.position_ids',)
    """
    keys = list(file_keys)
    return tuple(p for p in patterns if any(fnmatch.fnmatchcase(k, p) for k in keys))
