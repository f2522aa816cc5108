"""The summary's device columns: the device allocator's peak beside the host's, the flag of a
device that received more than its shards (`bench.child.traffic`: a transient full copy), the
headroom the peak left on the device (its `bytes_limit` minus the peak), the flag of a peak
above the model by more than the load's budget (`bench.run.rows.device_memory_fields`), and the
part of a host peak that is the compiler's first use in the process, where the load compiled
device programs (`first_compile_lines`)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from bench.records.results import headline
from bench.units import format_bytes
from bench.vocabulary import OK
from loader.vocabulary import TOTAL
from shapes.sizes import MISSING


def device_columns(phases: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per configuration: the median device peak, whether any repeat sent a device more than its
    shards (`device_overreceived`: a transient copy), and the staging memory."""
    ok = headline(phases)
    ok = ok[(ok["phase"] == TOTAL) & (ok["status"] == OK)]
    over = ok["device_overreceived"].map(_any_device)
    frame = ok[keys].assign(
        device_peak_bytes=pd.to_numeric(ok["device_peak_bytes"]),
        device_overreceived=over,
        staging_memory=ok["staging_memory"] if "staging_memory" in ok else None,
        **{k: _numbers(ok, k) for k in MEMORY_FIGURES + COMPILE_FIGURES},
        device_over_budget=_flags(ok, "device_over_budget"),
    )
    return frame.groupby(keys, sort=False, dropna=False).agg(
        device_peak_bytes=("device_peak_bytes", "median"),
        device_overreceived=("device_overreceived", "any"),
        staging_memory=("staging_memory", "first"),
        **{k: (k, "median") for k in MEMORY_FIGURES + COMPILE_FIGURES},
        device_over_budget=("device_over_budget", "any"),
    )


#: the device memory figures of a row whose medians the summary shows (None / NaN on CPU)
MEMORY_FIGURES = (
    "device_bytes_limit",
    "device_headroom_bytes",
    "device_model_bytes",
    "device_over_model_bytes",
)

#: what a row compiled on its device (`device_programs`) and the probe's host bytes of the
#: compiler's first use in a process (`first_compile_host_bytes`), for `first_compile_lines`
COMPILE_FIGURES = ("device_programs", "first_compile_host_bytes")


def _numbers(rows: pd.DataFrame, key: str) -> pd.Series:
    if key not in rows:
        return pd.Series(float("nan"), index=rows.index)
    return pd.to_numeric(rows[key])


def _flags(rows: pd.DataFrame, key: str) -> pd.Series:
    """A bool per row (a row of an older file, or without the figure: False)."""
    if key not in rows:
        return pd.Series(False, index=rows.index)
    return rows[key].map(lambda v: False if v is None or pd.isna(v) else bool(v))


def _any_device(flagged: object) -> bool:
    """True when a row names a device that got more than its shards (a list or dict of them);
    False for an empty one, and for a row written before the field existed (NaN, None)."""
    if isinstance(flagged, str) or not hasattr(flagged, "__len__"):
        return False
    return len(flagged) > 0


def device_peak(row: pd.Series, size: Callable[[float], str] = format_bytes) -> str:
    """The device allocator's peak (GPU/TPU; '-' on CPU) written by `size`, '+copy' if a device
    got more than its shards, '+over' if it went above the model by more than the budget."""
    peak, copied = _value(row, "device_peak_bytes"), _value(row, "device_overreceived")
    flag = (" +copy" if copied else "") + (" +over" if _value(row, "device_over_budget") else "")
    return (size(float(peak)) if isinstance(peak, int | float) else MISSING) + flag


def device_headroom(row: pd.Series, size: Callable[[float], str] = format_bytes) -> str:
    """The device memory the peak left free (bytes_limit - peak; '-' where unknown)."""
    free = _value(row, "device_headroom_bytes")
    return size(float(free)) if isinstance(free, int | float) else MISSING


def over_budget_lines(rows: pd.DataFrame, size: Callable[[float], str] = format_bytes) -> list[str]:
    """One line per strategy whose device peak went above the model by more than its budget."""
    if "device_over_budget" not in rows:
        return []
    lines = []
    for _, row in rows.iterrows():
        if not _value(row, "device_over_budget"):
            continue
        peak, model = _number(row, "device_peak_bytes"), _number(row, "device_model_bytes")
        over, budget = _number(row, "device_over_model_bytes"), _number(row, "budget_bytes")
        if peak is None or model is None or over is None:
            continue
        bound = f"its budget {size(budget)}" if budget else "no budget (0)"
        lines.append(
            f"{row['strategy']}: device peak {size(peak)} is {size(over)} above "
            f"the model's {size(model)} on the device, beyond {bound}"
        )
    return lines


def first_compile_lines(
    rows: pd.DataFrame, size: Callable[[float], str] = format_bytes
) -> list[str]:
    """One line per strategy whose load compiled device programs on a machine whose probe
    measured the compiler's first use: that much of its host peak is the compiler's, not the
    load's bytes (paid once a process; a process that compiled before the load has paid it)."""
    if "first_compile_host_bytes" not in rows or "device_programs" not in rows:
        return []
    lines = []
    for _, row in rows.iterrows():
        grew, programs = _number(row, "first_compile_host_bytes"), _number(row, "device_programs")
        if grew is None or not programs:
            continue
        lines.append(
            f"{row['strategy']}: compiled {int(programs)} device programs; its host peak holds "
            f"the compiler's first use in the process, {size(grew)} on this machine (the probe's "
            "first program)"
        )
    return lines


def _value(row: pd.Series, key: str) -> object:
    value = row.get(key)
    return None if value is None or pd.isna(value) else value


def _number(row: pd.Series, key: str) -> float | None:
    value = _value(row, key)
    return float(value) if isinstance(value, int | float) else None
