"""`--compile`'s time to ready, as the summary states it per strategy."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _line(name: str, ready: float | None, load: float | None, comp: float | None) -> str | None:
    if ready is None or load is None or comp is None:
        return None
    return (
        f"  {name}: ready in {ready:.2f} s (load {load:.2f} s, compile {comp:.2f} s: "
        f"{ready / max(load, comp):.2f}x their max, sum {load + comp:.2f} s)"
    )


def ready_lines(group: pd.DataFrame) -> list[str]:
    """`--compile`: per strategy, when the model was loaded and its forward compiled."""
    lines = (
        _line(
            str(r["strategy"]), *(_num(r.get(k)) for k in ("ready_s", "load_s", "compile_wall_s"))
        )
        for _, r in group.iterrows()
    )
    return [line for line in lines if line]
