"""Which jax backend a set of runs was on, as the answers (`recommend`, the bench summary) say it.

On JAX's CPU backend a model's weights live in host RAM, so a load's peak RSS holds the whole model
and every verdict is about host RAM; on a GPU or TPU they land in device memory. The words are
`bench.vocabulary.backend_note`'s, said once for the dashboard, the report and the CLI. Rows record
their `backend`; an older row has none and is read as the CPU backend when it reported no device
memory (the CPU backend reports none), else as an accelerator the file does not name. No jax.
"""

from __future__ import annotations

import pandas as pd

from bench.vocabulary import CPU, backend_note

#: A row without `backend` that reported device memory: some accelerator, not named in the file.
ACCELERATOR = "accelerator"
UNNAMED = "an accelerator the results do not name: the weights land in device memory"


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


def backend_sentence(names: list[str]) -> str:
    """What the backends mean for the answer, as one sentence ("" for none).

    Example:
        >>> backend_sentence(["cpu"])
        'CPU backend: the weights live in host RAM.'
    """
    said = [UNNAMED if n == ACCELERATOR else backend_note(n) for n in names]
    if len(said) > 1:
        return "Runs from several backends, fitted together: " + "; ".join(said) + "."
    return said[0] + "." if said else ""
