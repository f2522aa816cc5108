"""The summary's device columns: the device allocator's peak beside the host's, and the flag of a
device that received more than its shards (`bench.child.traffic`: a transient full copy)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from bench.records.results import headline
from bench.units import format_bytes
from bench.vocabulary import OK
from loader.vocabulary import TOTAL


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
    )
    return frame.groupby(keys, sort=False, dropna=False).agg(
        device_peak_bytes=("device_peak_bytes", "median"),
        device_overreceived=("device_overreceived", "any"),
        staging_memory=("staging_memory", "first"),
    )


def _any_device(flagged: object) -> bool:
    """True when a row names a device that got more than its shards (a list or dict of them);
    False for an empty one, and for a row written before the field existed (NaN, None)."""
    if isinstance(flagged, str) or not hasattr(flagged, "__len__"):
        return False
    return len(flagged) > 0


def device_peak(row: pd.Series, size: Callable[[float], str] = format_bytes) -> str:
    """The device allocator's peak (GPU/TPU; '-' on CPU) written by `size`, '+copy' if a device
    got more than its shards."""
    peak, copied = _value(row, "device_peak_bytes"), _value(row, "device_overreceived")
    flag = " +copy" if copied else ""
    return (size(float(peak)) if isinstance(peak, int | float) else "-") + flag


def _value(row: pd.Series, key: str) -> object:
    value = row.get(key)
    return None if value is None or pd.isna(value) else value
