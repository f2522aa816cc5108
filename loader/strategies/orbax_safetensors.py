"""Peer: orbax-checkpoint v1 loading the `.safetensors` file itself (its safetensors layout), into
the model's abstract state with the model's shardings; no conversion.

This is the NNX + Orbax stack's own loader for a Hugging Face file: `ocp.load(path, abstract)`
under an `ocp.Context` whose `checkpoint_layout` is `"safetensors"` (orbax-checkpoint >= 0.12.2).
The abstract state is a flat dict of the planned file keys, each a `jax.ShapeDtypeStruct` with the
leaf's sharding and, for a floating tensor, the model's dtype, so orbax reads each process's own
byte ranges (its read planner merges them into few large reads), casts on the host and places them
(phase `read`, one call); a file of several shards is handed over as its folder. A leaf the model
gives no sharding gets `sharded`'s rule (`loader.sharded.rule.apply_rule`), so both are asked for
the same arrays, on one process or as several cooperating `jax.distributed` processes (the bench's
`--processes`), each holding only its own shards. Planning, the report and anything orbax cannot
produce as stored (a Python scalar, a host `key_map` transform, a 64-bit tensor jax would narrow,
which orbax's assembly truncates in silence) are the core's (`loader.strategies._restore`).

Local files only: the layout opens every path with etils epath (`async_path.open_file` ->
`epath.Path.open`), which knows local paths and `gs://`, `s3://`, `az://`, `hf://` through fsspec,
and no `http(s)://`. Its `s3://` needs s3fs, which is not among loadbench's dependencies (its
aiobotocore pins a botocore older than the one the boto3 the bench uploads with needs), and its
`hf://` lists files through the Hub's tree API (`/api/models/<repo>/tree/<rev>`), which the
bench's Hub server does not answer; a remote bench run gives it a skipped row saying so
(`WHY_NOT_REMOTE`). orbax reports its own reads through `jax.monitoring`
(`/jax/orbax/read/safetensors/bytes_read`, `num_reads`, `storage_reads`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

from loader.format.source import CheckpointSource
from loader.planning.plan import LoadPlan
from loader.sequence import Recipe
from loader.sharded.rule import apply_rule
from loader.strategies._restore import Restore
from loader.vocabulary import PEER

KIND = PEER  # orbax-checkpoint is one of loadbench's own dependencies: nothing to install
MULTIPROCESS = True  # each process reads its own ranges (tests/integration), beside `sharded`
WHY_NOT_REMOTE = (
    "orbax's safetensors layout opens paths with etils epath: no http(s)://; s3:// only through "
    "s3fs, which loadbench does not install (its aiobotocore pins an older botocore than boto3's); "
    "hf:// lists files with the Hub's tree API, which the bench's Hub lacks"
)


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


def _sharding_rule(plan: LoadPlan, source: CheckpointSource) -> None:
    """`sharded`'s placement: the model's sharding, or the rule where it declares none
    (`loader.sharded.rule.apply_rule`), so both are asked for the same arrays."""
    apply_rule(plan, source)


RECIPE = Recipe(
    lambda: Restore(_load_safetensors, ask_model_dtype=True, read_host=_read_host),
    adjust_plan=_sharding_rule,
)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
