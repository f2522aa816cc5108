"""What a run and a row were configured with, said once: the limits the children ran under and
the options a strategy was given, in words, and whether two rows can be judged against each other.

A run is **unconstrained** when its children ran under no limit: no `--cpus`, no `--host-ram`, no
`--disk-read-speed`, no `--budget` (the run record says which; older records, which stored a
`--cpus` run's `cpu_limit` as null, are read from their rows' `cpus`). A constrained run answers
another question (how a load does on 1 CPU, in 4 GiB), so the Overview's and `report`'s default
run is an unconstrained one, and `compare` and `history` judge a row only against rows of its own
configuration (`ROW_CONFIGURATION`: the limits and the strategy options a row records). No jax.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from loader.options import SIZE, TABLE
from shapes.sizes import format_bytes, format_rate

UNCONSTRAINED = "unconstrained"
#: A row's configuration beyond what names its strategy and layout: column -> what it is called.
#: The load options' (`loader.options.TABLE`: each row with a `label`) come from the table.
ROW_CONFIGURATION = {
    "cpus": "CPU limit",
    "host_ram_bytes": "host RAM limit",
    "disk_read_bytes_per_s": "disk read cap",
    **{str(o.column): o.label for o in TABLE if o.column and o.label},
    "staging_memory": "staging",
    "model_dtype": "model dtype",
}
SIZES = {"host_ram_bytes", "ram_bytes", *(str(o.column) for o in TABLE if o.cli == SIZE)}
RATES = {"disk_read_bytes_per_s"}


def known(value: Any) -> bool:
    """Set: neither None nor NaN."""
    return value is not None and not (isinstance(value, float) and value != value)


def value_text(name: str, value: Any) -> str:
    """One part of a configuration in words: sizes in MiB/GiB, rates per second, `-` unset.

    Example:
        >>> value_text("budget_bytes", 32 << 20), value_text("cpus", 1.0), value_text("cpus", None)
        ('32.0 MiB', '1', '-')
    """
    if not known(value):
        return "-"
    if name in SIZES:
        return format_bytes(float(value))
    if name in RATES:
        return format_rate(float(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def row_key(row: Mapping[Any, Any]) -> tuple[str, ...]:
    """What two rows must share to be judged against each other (each part in words)."""
    return tuple(value_text(k, row.get(k)) for k in ROW_CONFIGURATION)


def key_text(key: tuple[str, ...]) -> str:
    """`CPU limit 1, budget 32.0 MiB`, or `unconstrained` where nothing is set."""
    said = [f"{name} {v}" for name, v in zip(ROW_CONFIGURATION.values(), key) if v != "-"]
    return ", ".join(said) or UNCONSTRAINED


def key_change(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """`CPU limit 1 -> -; budget 256.0 MiB -> 32.0 MiB`: the parts that differ."""
    return "; ".join(
        f"{name} {a} -> {b}"
        for name, a, b in zip(ROW_CONFIGURATION.values(), before, after)
        if a != b
    )


def _row_value(rows: pd.DataFrame | None, column: str) -> float | None:
    """The largest value of `column` the rows recorded (older run records lack it)."""
    if rows is None or column not in rows.columns:
        return None
    found = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(found.max()) if len(found) else None


def _run_value(run: Mapping[Any, Any], rows: pd.DataFrame | None, column: str) -> float | None:
    value: Any = run.get(column)
    return float(value) if known(value) else _row_value(rows, column)


def run_limits(run: Mapping[Any, Any], rows: pd.DataFrame | None = None) -> list[str]:
    """The limits a run's children ran under, in words (empty: unconstrained): from its run
    record, else (older files) from its rows.

    Example:
        >>> run_limits({"cpu_limit": 1.0, "host_ram_bytes": 4 << 30})
        ['memory limit 4.00 GiB', '1 CPU']
    """
    out = []
    ram = _run_value(run, rows, "host_ram_bytes")
    if ram is not None:
        out.append(f"memory limit {format_bytes(ram)}")
    disk = _run_value(run, rows, "disk_read_bytes_per_s")
    if disk is not None:
        out.append(f"disk reads {format_rate(disk)}")
    asked: Any = run.get("cpu_limit")
    cpus = float(asked) if known(asked) else _row_value(rows, "cpus")
    if cpus is not None:
        out.append(f"{cpus:g} CPU" if cpus == 1 else f"{cpus:g} CPUs")
    for option in (o for o in TABLE if o.column and o.label):  # those the run record holds
        value = run.get(option.column)  # (`--budget`: its rows carry a strategy's default too)
        if known(value):
            out.append(f"{option.label} {value_text(str(option.column), value)}")
    if known(run.get("check")) and bool(run.get("check")):
        out.append("recommend --check")
    return out


def limits_text(run: Mapping[Any, Any], rows: pd.DataFrame | None = None) -> str:
    """`1 CPU, budget 32.0 MiB`, or `unconstrained`."""
    return ", ".join(run_limits(run, rows)) or UNCONSTRAINED
