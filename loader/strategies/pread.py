"""Random init, then `safe_open(..., backend="pread")` one tensor at a time into the model.

Streaming bounds the read to one tensor, but the random initialisation still costs a whole model.
"""

from __future__ import annotations

import os
from typing import Any

from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.report import LoadReport
from loader.sequence import Build, Recipe, run_load
from loader.stream import Stream

RECIPE = Recipe(Stream, build=Build.INSTANCE)


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Randomly initialise `target`, then stream tensors into it with pread."""
    return run_load(RECIPE, target, path, probe, strict=strict, key_map=key_map)
