"""Refuse plausible-but-wrong `bench run` / `recommend` input before anything is written.

Each check raises one `BenchError` whose message names the flag, what was given and an example of
what works: a zero or negative count, time or size, `--devices 0`, a `--processes` count that no
selected strategy can use, a shape set that does not resolve (checked before the run record is
written, so a typo leaves no stray results file).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bench.errors import BenchError


def positive(value: float | None, flag: str, example: str) -> None:
    """`value` must be a finite number above zero (None: the flag was not given)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise BenchError(f"{flag} {value:g}: must be a positive number, e.g. {flag} {example}")


def check_counts(repeats: int, devices: int | None, timeout_s: float) -> None:
    positive(repeats, "--repeats", "3")
    positive(devices, "--devices", "8")
    positive(timeout_s, "--timeout", "900 (seconds)")


def parse_processes(text: str | None) -> list[int] | None:
    """`--processes 2` or `2,4` (each count its own configuration); None where not given.

    Example:
        >>> parse_processes("2,4")
        [2, 4]
    """
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise BenchError(
            f"--processes {text}: give whole numbers >= 1, e.g. --processes 2 or --processes 2,4"
        )
    return list(dict.fromkeys(values))


def check_processes(processes: list[int] | None, entries: Iterable) -> None:
    """A multi-process count needs at least one selected multi-process strategy."""
    entries = list(entries)
    if not processes or max(processes) <= 1 or any(e.multiprocess for e in entries):
        return
    raise BenchError(
        f"--processes {','.join(map(str, processes))}: none of the selected strategies "
        f"({', '.join(e.name for e in entries)}) runs on several processes; drop --processes or "
        "select a multi-process strategy (`loadbench bench list` tags them)"
    )


def check_shapes(names: Iterable[str]) -> None:
    """Every shape set resolves (preset, fetched name or spec path) before the run starts."""
    from shapes.catalog import load_spec

    for name in names:
        load_spec(name)  # raises ShapesError (a CheckpointError) naming the known presets


def check_dtype(dtype: str | None, flag: str = "--dtype") -> None:
    """A dtype option names a dtype (`bfloat16`, `bf16`, `BF16`) before anything is written."""
    if dtype is None:
        return
    from shapes.content import DTYPES, normalize_dtype
    from shapes.errors import ShapesError

    try:
        normalize_dtype(dtype)
    except ShapesError:
        raise BenchError(
            f"{flag} {dtype}: unknown dtype; give a numpy name such as bfloat16 or float32, "
            f"or a safetensors one: {', '.join(sorted(DTYPES))}"
        ) from None
