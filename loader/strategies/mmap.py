"""Memory-mapped file: random init, then tensors are views of the mapping until transferred.

The read phase costs no anonymous memory, but touched pages count in RSS as file-backed memory
(which the kernel may drop under pressure); the transfer copies each view into a device buffer.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from loader.format.source import CheckpointSource
from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.plan import LoadPlan
from loader.report import LoadReport
from loader.sequence import Build, Recipe, run_load
from loader.strategies._phased import Phased


def _map_views(source: CheckpointSource, plan: LoadPlan) -> dict[str, np.ndarray]:
    maps = {f: np.memmap(f, dtype=np.uint8, mode="r") for f in source.files}
    views = {}
    for step in plan.steps:
        info = source.info(step.file_key)
        start = source.file_offset(step.file_key)
        raw = maps[source.file_of(step.file_key)][start : start + info.nbytes]
        views[step.file_key] = raw.view(info.np_dtype).reshape(info.shape)
    return views


RECIPE = Recipe(lambda: Phased(_map_views), build=Build.INSTANCE)


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Load `path` into `target` through a read-only memory map (see the module docstring)."""
    return run_load(RECIPE, target, path, probe, strict=strict, key_map=key_map)
