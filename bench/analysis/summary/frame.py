"""The bench summary's rows (`summary_frame`: `bench.records.results.summarize` with the budget,
CPU memory and device columns), grouped by configuration (`blocks`: shapes, file and model
dtype, devices, cache, a remote load's source, link and concurrency), each with the judge's
decision on the host the runs were on; and the small readers of a row's cells every role uses.
No words of a table: `words` says them, `records` writes them as JSON.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, cast

import numpy as np
import pandas as pd

from bench.analysis.device_summary import (
    device_columns,
)
from bench.analysis.judge import Decision, TargetHost, host_ram, judge
from bench.analysis.shares import process_label
from bench.records.results import GROUP_KEYS, Results, headline, summarize, with_floor_ratio
from bench.vocabulary import NATIVE, OK
from loader.format.dtypes import DTYPES
from loader.vocabulary import TOTAL

#: Row fields that split a configuration beyond `bench.records.results.GROUP_KEYS`, where present.
EXTRA_KEYS = (
    "model",
    "model_dtype",
    "cache",
    "disk_read_bytes_per_s",
    "source",
    "link",
    "concurrency",
    "compile_cache",  # a cold and a warm compile cache: two conditions, never one median
)


def as_float(value: Any) -> float | None:
    """A row's cell as a float; None where it is None or NaN.

    Example:
        >>> as_float("1.5"), as_float(float("nan"))
        (1.5, None)
    """
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def as_int(value: Any) -> int | None:
    """A row's cell as an int (`as_float`'s, truncated); None where it has none."""
    value = as_float(value)
    return None if value is None else int(value)


def as_str(value: Any) -> str | None:
    """A row's cell where it is text; None else (a NaN of a column of text)."""
    return value if isinstance(value, str) else None


@cache
def file_dtype(shapes: str, dtype: str) -> str:
    """The checkpoint's dtype: `dtype` as converted (`--dtype`), else the preset's own by bytes."""
    if dtype != NATIVE:
        return dtype
    try:
        import shapes as shapes_pkg

        by_bytes = shapes_pkg.load_spec(shapes).bytes_by_dtype
    except Exception:  # noqa: BLE001 - a label only: an unknown spec stays "native"
        return dtype
    return "+".join(sorted(by_bytes, key=lambda d: by_bytes[d], reverse=True)) or dtype


def _budget_columns(phases: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per configuration: the budget asked for and the median in-flight high-water mark."""
    ok = headline(phases)
    ok = ok[(ok["phase"] == TOTAL) & (ok["status"] == OK)]
    cols = {c: pd.to_numeric(ok[c]) for c in ("budget_bytes", "inflight_peak_bytes")}
    frame = ok[keys].assign(**cols)
    return frame.groupby(keys, sort=False, dropna=False).agg(
        budget_bytes=("budget_bytes", "first"),
        inflight_peak_bytes=("inflight_peak_bytes", "median"),
    )


#: total-row fields whose median over the ok repeats the summary adds (row field -> its column)
CPU_MEMORY_FIELDS = {
    "cpu_s": "cpu_s",
    "ceiling_cpu_s": "ceiling_cpu_s",
    "phase_peak_anon_rss_bytes": "peak_anon_rss_bytes",
    "phase_peak_file_rss_bytes": "peak_file_rss_bytes",
}


def _cpu_memory_columns(phases: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per configuration: the medians of the load's CPU-seconds, the C ceiling's for the same
    bytes, and the highest anonymous and file-backed RSS (`CPU_MEMORY_FIELDS`)."""
    ok = headline(phases)
    ok = ok[(ok["phase"] == TOTAL) & (ok["status"] == OK)]
    present = {f: c for f, c in CPU_MEMORY_FIELDS.items() if f in ok.columns}
    frame = ok[keys].assign(**{c: pd.to_numeric(ok[f]) for f, c in present.items()})
    return frame.groupby(keys, sort=False, dropna=False).agg(
        **{c: (c, "median") for c in present.values()}
    )


def summary_frame(results: Results) -> pd.DataFrame:
    """`summarize` per configuration (see the module doc), with its extra keys and budget
    columns."""
    phases = results.phases
    extra = [k for k in EXTRA_KEYS if k in phases.columns]
    if phases.empty or not extra:
        return summarize(phases)
    parts = []
    for values, group in phases.groupby(extra, sort=False, dropna=False):
        labels = cast("tuple[Any, ...]", values)  # grouped by a list of keys: a tuple each
        part = summarize(group, floor_ratio=False)  # held against the floor once, below
        part = part.assign(**dict(zip(extra, labels, strict=True)))
        if "budget_bytes" in group.columns:
            part = part.join(_budget_columns(group, GROUP_KEYS), on=GROUP_KEYS)
        if "cpu_s" in group.columns:
            part = part.join(_cpu_memory_columns(group, GROUP_KEYS), on=GROUP_KEYS)
        if "device_peak_bytes" in group.columns:
            part = part.join(device_columns(group, GROUP_KEYS), on=GROUP_KEYS)
        parts.append(part)
    return with_floor_ratio(pd.concat(parts, ignore_index=True))


def model_dtype(row: pd.Series) -> str | None:
    """The model's dtype where it was asked (`--model-dtype`); None: the file's."""
    return as_str(row.get("model_dtype"))


def _same_dtype(stored: str, model: str) -> bool:
    try:
        return DTYPES[stored] == np.dtype(DTYPES.get(model.upper(), model))
    except (KeyError, TypeError):
        return stored == model


def dtype_label(row: pd.Series) -> str:
    """`dtype F32`, or `F32 file → bfloat16 model` for a run whose model dtype differs."""
    stored = file_dtype(row["shapes"], row["dtype"])
    model = model_dtype(row)
    if model is None or _same_dtype(stored, model):
        return f"dtype {stored}"
    return f"{stored} file → {model} model"


def configuration_keys(phases: pd.DataFrame) -> list[str]:
    """What one summary row is of: `GROUP_KEYS` and the `EXTRA_KEYS` the rows carry."""
    return [*GROUP_KEYS, *(k for k in EXTRA_KEYS if k in phases.columns and k not in GROUP_KEYS)]


def same_configuration(shares: pd.DataFrame, row: pd.Series) -> pd.DataFrame:
    """The `process_shares` rows of the summary row's configuration."""
    for key in [k for k in shares.columns if k in configuration_keys(shares)]:
        value = row.get(key)
        shares = shares[shares[key].isna() if pd.isna(value) else shares[key] == value]
    return shares


def blocks(results: Results) -> list[tuple[pd.DataFrame, pd.DataFrame, Decision]]:
    """Each configuration's rows (shapes, file dtype, model dtype, devices, cache, a remote
    load's source, link and concurrency; a multi-process row named `sharded (2 processes)`) and
    the judge's decision over them on the host the runs were on (`judge.host_ram`); each with
    its rows as summarized (their registered names)."""
    summary = summary_frame(results)
    keys = [k for k in ("shapes", "dtype", *EXTRA_KEYS, "devices") if k in summary.columns]
    out = []
    for _, group in summary.groupby(keys, sort=False, dropna=False):
        runs = [str(r) for r in group["run_id"].unique()]
        labels = [
            process_label(str(s), int(p)) for s, p in zip(group["strategy"], group["processes"])
        ]
        named = group.assign(strategy=labels)  # `sharded (2 processes)` beside `sharded (4 ...)`
        host = TargetHost(host_ram(results, runs))
        out.append((group, named, judge(named, host, results)))
    return out


def first_of(group: pd.DataFrame, key: str) -> str | None:
    """The configuration's `key` as text; None where its rows lack it."""
    if key not in group.columns or pd.isna(value := group[key].iloc[0]):
        return None
    return str(value)


def flag(row: pd.Series, key: str) -> bool | None:
    """A row's flag as True or False; None where the row does not say."""
    value = row.get(key)
    return None if value is None or pd.isna(value) else bool(value)
