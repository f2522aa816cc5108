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
from collections import Counter
from pathlib import Path
from typing import Any

import jax
import numpy as np

from loader.errors import CheckpointError
from loader.format import dtype_name, numpy_dtype
from loader.format.source import CheckpointSource
from loader.phases import ASSEMBLE, CAST, READ, Probe
from loader.placement.leaves import LeafKind
from loader.placement.materialize import apply_transform, assign, host_cast, to_device
from loader.planning.plan import LoadPlan, Step
from loader.sequence import Recipe
from loader.sharded.layout import Layout, LayoutSource, TensorLayout
from loader.sharded.rule import rule_mesh, rule_sharding
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


def _whole(step: Step) -> bool:
    """Restored as a host array (then transformed/placed by the core) rather than onto devices."""
    return step.leaf.kind is LeafKind.SCALAR or step.transform is not None


def _restore(item: Path, plan: LoadPlan, layout: Layout) -> dict[str, Any]:
    """One Orbax restore of every planned key, each with its shape, file dtype and sharding."""
    import orbax.checkpoint as ocp

    abstract = {}
    for step in plan.steps:
        t = layout.tensors[step.file_key]
        if not t.numel:
            continue
        sharding = None if _whole(step) else step.sharding
        abstract[step.file_key] = jax.ShapeDtypeStruct(
            t.shape, numpy_dtype(t.dtype), sharding=sharding
        )
    if not abstract:
        return {}
    args = ocp.args.PyTreeRestore(
        item=abstract,
        restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
        partial_restore=True,
    )
    restored: dict[str, Any] = ocp.PyTreeCheckpointer().restore(item, args=args)
    return restored


def _value(step: Step, restored: Any, plan: LoadPlan, layout: Layout) -> Any:
    """The leaf's value from its restored array (None: a transform's shape was wrong)."""
    leaf = step.leaf
    if restored is None:  # a zero-size tensor, not in the Orbax tree
        t = layout.tensors[step.file_key]
        restored = np.empty(t.shape, numpy_dtype(t.dtype))
    if _whole(step) or isinstance(restored, np.ndarray):
        host = apply_transform(step, restored, plan)
        return None if host is None else to_device(step, host_cast(leaf, host))
    if leaf.kind is LeafKind.PRNG:
        return jax.random.wrap_key_data(restored, impl=leaf.dtype._impl)
    return restored if restored.dtype == leaf.dtype else restored.astype(leaf.dtype)


def open_orbax(path: Path) -> LayoutSource:
    """The Orbax checkpoint at `path` (what `prepare` returned), as a layout to plan from."""
    return LayoutSource(_layout(path, _item_dir(path)))


class Restore:
    """An `Executor` (see `loader.sequence`): one Orbax restore of every planned key (`read`),
    then casts on the device (`cast`), then the arrays put into the model (`assemble`)."""

    def start(self, source: LayoutSource, probe: Probe) -> None:
        return None

    def fill(self, plan: LoadPlan, source: LayoutSource, probe: Probe) -> None:
        layout = source.layout
        with probe.phase(READ):
            restored = _restore(layout.path, plan, layout)
        with probe.phase(CAST):
            uses = Counter(step.file_key for step in plan.steps)  # a Slice shares a tensor
            values = []
            for step in plan.steps:
                uses[step.file_key] -= 1
                last = not uses[step.file_key]
                array = restored.pop(step.file_key, None) if last else restored.get(step.file_key)
                values.append((step, _value(step, array, plan, layout)))
        del restored
        with probe.phase(ASSEMBLE):
            for step, value in values:
                if value is not None:
                    assign(step.leaf, value)
                    plan.report.loaded.append(step.leaf.key)
            del values

    def close(self) -> None:
        return None


RECIPE = Recipe(Restore, open_source=open_orbax)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
