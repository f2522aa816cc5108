"""`bench run --compile`'s lines in the summary: when each strategy's model was loaded and ready.

Split from `bench.analysis.summary` (which stays within 300 lines); never imports jax.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def ready_lines(group: pd.DataFrame) -> list[str]:
    """`--compile`: per strategy, when the model was loaded and its forward compiled."""
    out = []
    for _, r in group.iterrows():
        ready, load, comp = (_num(r.get(k)) for k in ("ready_s", "load_s", "compile_wall_s"))
        if ready is not None and load is not None and comp is not None:
            out.append(
                f"  {r['strategy']}: ready in {ready:.2f} s (load {load:.2f} s, compile "
                f"{comp:.2f} s: {ready / max(load, comp):.2f}x their max, sum {load + comp:.2f} s)"
            )
    return out
