"""Which jax backend the runs were on, and what that means for the answer, said once.

On JAX's CPU backend a model's weights live in host RAM, so a load's peak RSS holds the whole model
and every verdict is about host RAM. On a GPU or TPU they land in device memory, and the host holds
only what a strategy reads and stages. Rows record their `backend` since schema v3; an older row
has none, and is read as the CPU backend unless it reported device memory (the CPU backend reports
none). The CLI (`recommend`, the bench summary) and the dashboard print these same sentences. No
jax.
"""

from __future__ import annotations

import pandas as pd

from bench.vocabulary import CPU

#: A row without `backend` that reported device memory: some accelerator, not named in the file.
ACCELERATOR = "an accelerator"

MEANING = {
    CPU: "CPU backend: the weights live in host RAM, so each peak holds the whole model.",
}
ELSEWHERE = (
    "{} backend: the weights land in device memory; host RAM holds what a strategy reads and "
    "stages."
)


def row_backends(rows: pd.DataFrame) -> pd.Series:
    """Each row's backend: its `backend`, else CPU (or `ACCELERATOR` where it reported device
    memory)."""
    named = rows["backend"] if "backend" in rows else pd.Series(None, index=rows.index)
    device = rows.get("phase_device_peak_bytes", pd.Series(None, index=rows.index))
    guess = device.notna().map({True: ACCELERATOR, False: CPU})
    return named.where(named.notna(), guess).astype(str)


def backends(rows: pd.DataFrame) -> list[str]:
    """The backends `rows` ran on, sorted (empty for no rows)."""
    return sorted(set(row_backends(rows))) if len(rows) else []


def _title(name: str) -> str:
    return "An accelerator" if name == ACCELERATOR else name.upper()


def backend_sentence(names: list[str]) -> str:
    """One sentence per backend, joined: "CPU backend: the weights live in host RAM, ...".

    Example:
        >>> backend_sentence(["cpu"])
        'CPU backend: the weights live in host RAM, so each peak holds the whole model.'
    """
    if not names:
        return ""
    said = [MEANING.get(n) or ELSEWHERE.format(_title(n)) for n in names]
    if len(said) > 1:
        return "Runs from several backends, fitted together: " + " ".join(said)
    return said[0]
