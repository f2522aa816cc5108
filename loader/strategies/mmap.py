"""Memory-mapped file: random init, then tensors are views of the mapping until transferred.

The read phase costs no anonymous memory, but touched pages count in RSS as file-backed memory
(which the kernel may drop under pressure); the transfer copies each view into a device buffer.
"""

from __future__ import annotations

import numpy as np

from loader.format.source import CheckpointSource
from loader.planning.plan import LoadPlan
from loader.sequence import Build, Recipe
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


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
