"""Naive baseline: random init, whole-file `safetensors.numpy.load_file`, cast, replace the state.

Every phase runs over every tensor before the next starts, so the random model, the whole file in
host memory and the device copies are alive together: about 3x the checkpoint at the peak. The
transfer is `jnp.array(host)`, as `safetensors.flax.load_file` does it: always a new device buffer
(on the CPU backend, `jax.device_put` of an aligned array could adopt it; naive code does not).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file

from loader.format.source import CheckpointSource
from loader.materialize import to_device
from loader.phases import NULL_PROBE
from loader.plan import LoadPlan, Step
from loader.strategies._phased import phased_load


def _read_whole_files(source: CheckpointSource, plan: LoadPlan) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for f in source.files:
        tensors.update(load_file(str(f), backend="pread"))
    return tensors


def _copy_to_device(step: Step, host: np.ndarray) -> object:
    if step.leaf.kind != "array":
        return to_device(step, host)
    return jax.device_put(jnp.array(host), step.sharding)


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Load `path` into `target` the naive way (see the module docstring)."""
    return phased_load(
        target,
        path,
        probe,
        _read_whole_files,
        strict=strict,
        key_map=key_map,
        transfer=_copy_to_device,
    )
