"""Match a model's leaves to a checkpoint's keys, from headers alone, and report every mismatch.

The walk is driven by the model: each expected leaf is looked up by its own key (integer list
indices as strings; the `/`-joined form of older tools accepted; `key_map` renames and transforms).
File keys that no leaf asked for are reported as unexpected. Every strategy plans through here, so
mismatches are reported identically whichever strategy runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import jax
import numpy as np
from jax.sharding import Sharding

from loader.errors import CheckpointError
from loader.format import TensorMeta, dtype_name
from loader.keys import KeyMap, Transform, resolve_file_key, resolve_stack
from loader.leaves import META_PRNG, META_SHARDINGS, Leaf, model_leaves
from loader.place import concrete_sharding, describe_sharding
from loader.report import DtypeCast, LoadReport, ShapeMismatch, ShardingChange
from loader.stacking import Stacked, StackLayer, check_stack, layer_leaves
from loader.transforms import Chain, Stack, TransformError


class Source(Protocol):
    """What planning reads of a checkpoint: keys, each tensor's `TensorMeta`, the metadata."""

    path: Path

    def keys(self) -> list[str]: ...

    def __contains__(self, key: str) -> bool: ...

    def info(self, key: str) -> TensorMeta: ...

    def file_of(self, key: str) -> Path: ...

    def file_offset(self, key: str) -> int: ...

    @property
    def metadata(self) -> dict[str, str]: ...


@dataclass
class Step:
    """One leaf to fill from one file key (with an optional host transform).

    A layer of a stacked leaf (`loader.Stack`) is a step like any other: its leaf is one layer's
    (`loader.stacking`), its transform the per-layer one, and `layer` says which layer of which
    stacked leaf it fills.
    """

    leaf: Leaf
    file_key: str
    transform: Transform | None
    sharding: Sharding | None  # concrete sharding to place with; None for a Python scalar
    layer: StackLayer | None = None

    def placement(self) -> Sharding:
        """The concrete sharding of an array or PRNG leaf (only a Python scalar has none)."""
        assert self.sharding is not None, f"{self.leaf.where}: a scalar leaf has no placement"
        return self.sharding


@dataclass
class LoadPlan:
    """What to read, in file order, and what to leave alone (reported).

    `stacked` holds the stacked leaves; each has one step per layer in `steps`.
    """

    steps: list[Step] = field(default_factory=list)
    stacked: list[Stacked] = field(default_factory=list)
    skipped: list[Leaf] = field(default_factory=list)
    report: LoadReport = field(default_factory=LoadReport)


def _stored_shape(
    step_shape: tuple[int, ...], dtype: np.dtype, transform: Transform | None
) -> tuple[int, ...] | None:
    """The shape after `transform`, found without data; None if it cannot be traced."""
    if transform is None:
        return step_shape
    if isinstance(transform, Chain):
        return transform.out_shape(step_shape)  # TransformError: cannot apply (the caller's)
    try:
        # a lambda, not `transform` itself: jax.eval_shape(np.transpose, ...) crashed the process
        # when repeated (jax 0.10.2)
        return tuple(
            jax.eval_shape(lambda x: transform(x), jax.ShapeDtypeStruct(step_shape, dtype)).shape
        )
    except Exception:  # a numpy-only transform: checked after the read instead
        return None


def _check_leaf(
    leaf: Leaf,
    file_key: str,
    transform: Transform | None,
    source: Source,
    report: LoadReport,
    saved_impls: dict[str, str],
) -> bool:
    info = source.info(file_key)
    want_shape, want_dtype = leaf.stored_shape_dtype()
    try:
        got_shape = _stored_shape(info.shape, info.np_dtype, transform)
    except TransformError as exc:
        got_shape, result = (), f"an error ({exc})"
    else:
        result = str(got_shape)
    if got_shape is not None and got_shape != want_shape:
        named = str(transform) if isinstance(transform, Chain) else ""
        result = result if named else ""
        report.shape_mismatches.append(
            ShapeMismatch(leaf.key, file_key, want_shape, info.shape, named, result)
        )
        return False
    if leaf.kind == "array" and info.np_dtype != want_dtype:
        report.casts.append(DtypeCast(leaf.key, info.dtype, dtype_name(want_dtype)))
    if leaf.kind == "prng":
        saved_impl = saved_impls.get(file_key)
        model_impl = str(leaf.dtype._impl.name)
        if info.np_dtype != want_dtype or (saved_impl and saved_impl != model_impl):
            report.casts.append(
                DtypeCast(leaf.key, f"key<{saved_impl}> data {info.dtype}", f"key<{model_impl}>")
            )
    return True


def _sharding_change(
    leaf: Leaf, placed: Sharding, saved: dict[str, str], report: LoadReport
) -> None:
    before = saved.get(leaf.key)
    after = describe_sharding(placed)
    if before is not None and before != after:
        report.sharding_changes.append(ShardingChange(leaf.key, before, after))


def _claim(users: dict[str, tuple[str, bool]], leaf: Leaf, file_key: str, t: object) -> None:
    """Record that `leaf` reads `file_key`; two leaves may share a tensor only through Slices."""
    sliced = isinstance(t, Chain) and t.slices
    other = users.setdefault(file_key, (leaf.key, sliced))
    if other[0] != leaf.key and not (sliced and other[1]):
        raise CheckpointError(
            f"key_map sends both {other[0]!r} and {leaf.key!r} to file key {file_key!r}; leaves "
            "can share one tensor only through loader.Slice (each taking its own part)"
        )


def _note_transform(report: LoadReport, leaf: Leaf, transform: object) -> None:
    if isinstance(transform, Chain):
        report.transformed.append(leaf.key)
    elif transform is not None:
        report.staged.append(leaf.key)


def _plan_stack(
    plan: LoadPlan,
    leaf: Leaf,
    stack: Stack,
    source: Source,
    used: dict[str, tuple[str, bool]],
    saved_shardings: dict[str, str],
) -> None:
    """A stacked leaf: checked from the headers, then one step per layer (`loader.stacking`)."""
    for key in stack.keys:
        if key in source:
            _claim(used, leaf, key, stack.transform)
    if not check_stack(leaf, stack, source, plan.report):
        plan.skipped.append(leaf)
        return
    sharding = concrete_sharding(leaf.sharding, leaf.where)
    _sharding_change(leaf, sharding, saved_shardings, plan.report)
    group = Stacked(leaf, stack, sharding)
    host = jax.sharding.SingleDeviceSharding(jax.local_devices(backend="cpu")[0])
    for (part, layer), key in zip(layer_leaves(group), stack.keys):
        plan.steps.append(Step(part, key, stack.transform, host, layer))
    plan.stacked.append(group)
    plan.report.stacked.append(leaf.key)


def plan_load(model: object, source: Source, *, key_map: KeyMap | None = None) -> LoadPlan:
    """Plan a load of `source` into `model` (a module, possibly abstract) from headers only."""
    metadata = source.metadata
    saved_shardings = json.loads(metadata.get(META_SHARDINGS, "{}"))
    saved_impls = json.loads(metadata.get(META_PRNG, "{}"))
    plan = LoadPlan(report=LoadReport(path=str(source.path)))
    file_keys = set(source.keys())
    used: dict[str, tuple[str, bool]] = {}
    for leaf in model_leaves(model, metadata):
        stack = resolve_stack(leaf.key, key_map)
        if stack is not None:
            _plan_stack(plan, leaf, stack, source, used, saved_shardings)
            continue
        file_key, transform = resolve_file_key(leaf.key, file_keys, key_map)
        if file_key not in file_keys:
            plan.report.missing.append(leaf.key)
            plan.skipped.append(leaf)
            continue
        _claim(used, leaf, file_key, transform)
        if not _check_leaf(leaf, file_key, transform, source, plan.report, saved_impls):
            plan.skipped.append(leaf)
            continue
        sharding = None if leaf.kind == "scalar" else concrete_sharding(leaf.sharding, leaf.where)
        if sharding is not None:
            _sharding_change(leaf, sharding, saved_shardings, plan.report)
        plan.steps.append(Step(leaf, file_key, transform, sharding))
        _note_transform(plan.report, leaf, transform)
    plan.report.unexpected = sorted(file_keys - set(used))
    plan.steps.sort(key=lambda s: (str(source.file_of(s.file_key)), source.file_offset(s.file_key)))
    return plan
