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

from loader.errors import CheckpointError
from loader.format.source import CheckpointSource
from loader.placement.leaves import LeafKind
from loader.placement.materialize import to_device
from loader.planning.plan import LoadPlan, Step
from loader.sequence import Build, Recipe
from loader.strategies._phased import Phased


def _read_whole_files(source: CheckpointSource, plan: LoadPlan) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for f in source.files:
        try:
            tensors.update(load_file(str(f), backend="pread"))
        except AttributeError as exc:  # its numpy backend names a dtype this numpy lacks (fp8)
            dtypes = sorted({source.info(k).dtype for k in source.keys() if source.file_of(k) == f})
            raise CheckpointError(
                f"{f}: eager reads whole files with safetensors.numpy.load_file, and "
                f"safetensors.numpy cannot read it: this file's dtypes ({', '.join(dtypes)}) "
                f"with numpy {np.__version__} ({exc}); load it with a strategy that reads its "
                "bytes through loader.format (pipelined, pread)"
            ) from None
    return tensors


def _copy_to_device(step: Step, host: np.ndarray) -> object:
    if step.leaf.kind is not LeafKind.ARRAY:
        return to_device(step, host)
    return jax.device_put(jnp.array(host), step.sharding)


RECIPE = Recipe(lambda: Phased(_read_whole_files, transfer=_copy_to_device), build=Build.INSTANCE)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
