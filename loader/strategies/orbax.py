"""Orbax, the established JAX checkpointer: the checkpoint converted once to Orbax, restored into
the abstract model.

`prepare(src, dst, builder)` streams the `.safetensors` checkpoint into an Orbax checkpoint at
`dst/orbax`: tensors are read one at a time with `pread` (real host arrays, never lazy or mmap
views, on 1 device as on many), placed with the sharding rule and written in bounded batches with
Orbax's partial save, so at most `BATCH_BYTES` of tensors is in memory at once. The tree is a flat
dict keyed by file key; the file's `__metadata__` travels in the checkpoint's custom metadata.

`load` plans from the Orbax metadata tree exactly as the other strategies plan from headers (same
report: missing, unexpected, shape mismatches, casts), restores the planned keys in one Orbax call
into `jax.ShapeDtypeStruct`s carrying the model's shardings (phase `read`), casts on the device
where the model's dtype differs (`cast`), and puts the arrays into the model (`assemble`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np

from loader.errors import CheckpointError
from loader.format import dtype_name
from loader.format.source import CheckpointSource
from loader.sequence import Recipe
from loader.sharded.layout import Layout, LayoutSource, TensorLayout
from loader.sharded.rule import rule_mesh, rule_sharding
from loader.strategies._restore import Restore
from loader.vocabulary import ORBAX

CHECKPOINT = ORBAX
BATCH_BYTES = 256 << 20
SUBDIR = "orbax"
META_KEY = "loadbench.safetensors_metadata"
EMPTY_KEY = "loadbench.empty_tensors"  # Orbax cannot save zero-size arrays: their dtype and shape


def prepare(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    builder: Any = None,
    *,
    batch_bytes: int = BATCH_BYTES,
) -> Path:
    """Convert the checkpoint at `src` to an Orbax checkpoint in `dst/orbax`; returns that path."""
    from orbax.checkpoint.experimental.v1 import partial

    out = Path(dst).resolve() / SUBDIR
    for stale in (out, out.with_name(out.name + ".partial_save")):
        shutil.rmtree(stale, ignore_errors=True)  # a previous, unfinished conversion
    mesh = rule_mesh()
    with CheckpointSource(src) as source:
        keys = sorted(source.keys(), key=lambda k: (str(source.file_of(k)), source.file_offset(k)))
        empty = {
            k: [source.info(k).dtype, list(source.info(k).shape)]
            for k in keys
            if not source.info(k).numel
        }
        meta = {META_KEY: dict(source.metadata), EMPTY_KEY: empty}
        batch, size = {}, 0
        for key in (k for k in keys if k not in empty):
            host = source.read(key)  # a fresh host array, materialised whatever the device count
            batch[key] = _placed(host, mesh)
            size += host.nbytes
            del host
            if size >= batch_bytes:
                partial.save(out, batch, custom_metadata=meta)
                batch, size = {}, 0
        if batch or len(empty) == len(keys):
            partial.save(out, batch, custom_metadata=meta)
        del batch
    partial.finalize(out)
    return out


def _placed(host: np.ndarray, mesh: Any) -> Any:
    """A jax array sharded by the rule; a 64-bit tensor stays a host array when jax would narrow
    it (x64 disabled), so the checkpoint keeps the file's exact dtype and bits."""
    if jax.dtypes.canonicalize_dtype(host.dtype) != host.dtype:
        return host
    return jax.device_put(host, rule_sharding(host.shape, mesh))


def _item_dir(path: Path) -> Path:
    """The pytree folder: `path/state` for a checkpoint written by the v1 API, else `path`."""
    return path / "state" if (path / "state" / "_METADATA").is_file() else path


def _layout(root: Path, item: Path) -> Layout:
    """Keys, dtypes and shapes from the Orbax tree metadata; `__metadata__` from the custom one."""
    import orbax.checkpoint as ocp

    error = ""
    try:
        meta = ocp.StandardCheckpointer().metadata(item).item_metadata
        custom = ocp.StandardCheckpointer().metadata(root).custom_metadata or {}
    except Exception as e:  # orbax raises assorted types for a folder that is not its own
        meta, error = None, f" ({type(e).__name__}: {e})"
    if meta is None or not isinstance(getattr(meta, "tree", None), dict):
        raise CheckpointError(
            f"{item}: not a readable Orbax checkpoint{error if meta is None else ''}; expected "
            "what this strategy's prepare() writes (a flat dict of arrays)"
        )
    tensors = {}
    for key, leaf in meta.tree.items():
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            raise CheckpointError(
                f"{item}: entry {key!r} is not an array; expected a flat dict of arrays"
            )
        tensors[key] = TensorLayout(key, dtype_name(leaf.dtype), tuple(leaf.shape))
    for key, (dtype, shape) in custom.get(EMPTY_KEY, {}).items():
        tensors[key] = TensorLayout(key, dtype, tuple(shape))
    return Layout(item, tensors, {str(k): str(v) for k, v in custom.get(META_KEY, {}).items()})


def _restore(source: LayoutSource, abstract: dict[str, jax.ShapeDtypeStruct]) -> dict[str, Any]:
    """One Orbax restore of every abstract key (a partial restore of the converted tree)."""
    import orbax.checkpoint as ocp

    args = ocp.args.PyTreeRestore(
        item=abstract,
        restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
        partial_restore=True,
    )
    restored: dict[str, Any] = ocp.PyTreeCheckpointer().restore(source.layout.path, args=args)
    return restored


def open_orbax(path: Path) -> LayoutSource:
    """The Orbax checkpoint at `path` (what `prepare` returned), as a layout to plan from."""
    return LayoutSource(_layout(path, _item_dir(path)))


RECIPE = Recipe(lambda: Restore(_restore), open_source=open_orbax)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
