"""Naive baseline: random init, whole-file `safetensors.numpy.load_file`, cast, replace the state.

Every phase runs over every tensor before the next starts, so the random model, the whole file in
host memory and the device copies are alive together: about 3x the checkpoint at the peak.
"""

from __future__ import annotations

import numpy as np
from safetensors.numpy import load_file

from loader.phases import NULL_PROBE
from loader.plan import LoadPlan
from loader.source import CheckpointSource
from loader.strategies._phased import phased_load


def _read_whole_files(source: CheckpointSource, plan: LoadPlan) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for f in source.files:
        tensors.update(load_file(str(f), backend="pread"))
    return tensors


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Load `path` into `target` the naive way (see the module docstring)."""
    return phased_load(target, path, probe, _read_whole_files, strict=strict, key_map=key_map)
