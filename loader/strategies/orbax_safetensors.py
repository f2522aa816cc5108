"""Peer: orbax-checkpoint v1 loading the `.safetensors` file itself (its safetensors layout), into
the model's abstract state with the model's shardings; no conversion.

This is the NNX + Orbax stack's own loader for a Hugging Face file: `ocp.load(path, abstract)`
under an `ocp.Context` whose `checkpoint_layout` is `"safetensors"` (orbax-checkpoint >= 0.12.2).
The abstract state is a flat dict of the planned file keys, each a `jax.ShapeDtypeStruct` with the
leaf's sharding and, for a floating tensor, the model's dtype, so orbax reads each process's own
byte ranges, casts on the host and places them (phase `read`, one call); a file of several shards
is handed over as its folder. Planning, the report and anything orbax cannot produce as stored (a
Python scalar, a host `key_map` transform, a 64-bit tensor jax would narrow, which orbax's assembly
truncates in silence) are the core's (`loader.strategies._restore`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

from loader.format.source import CheckpointSource
from loader.sequence import Recipe
from loader.strategies._restore import Restore
from loader.vocabulary import PEER

KIND = PEER  # orbax-checkpoint is one of loadbench's own dependencies: nothing to install
# It loads as several processes too (each reads its own ranges; tests/integration), but the bench
# runs it in one, beside the default, as it runs every peer.


def _orbax_path(source: CheckpointSource) -> Path:
    """What orbax's safetensors layout loads: the file, or the folder of a sharded checkpoint."""
    files = {Path(f).resolve() for f in source.files}
    return next(iter(files)) if len(files) == 1 else Path(source.path).resolve()


def _load_safetensors(
    source: CheckpointSource, abstract: dict[str, jax.ShapeDtypeStruct]
) -> dict[str, Any]:
    """`ocp.load(path, abstract)` in the safetensors layout."""
    from orbax.checkpoint.experimental import v1 as ocp

    context = ocp.Context()
    context.checkpoint_layout = "safetensors"
    with context:
        loaded: dict[str, Any] = ocp.load(_orbax_path(source), abstract)
    return loaded


def _read_host(source: CheckpointSource, key: str) -> np.ndarray:
    return source.read(key)


RECIPE = Recipe(lambda: Restore(_load_safetensors, ask_model_dtype=True, read_host=_read_host))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
