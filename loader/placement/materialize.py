"""Turn one host array read from a file into the value a leaf holds, and put it in the model.

Each step is separate so strategies can time them as phases: `host_cast` (dtype conversion on the
host), `to_device` (placement with the leaf's sharding, or the PRNG key / Python scalar rebuild),
`assign` (set the variable in place). `fill_skipped` gives an abstract model's unloaded leaves
zeros. The executors (`loader.stream`, `loader.sharded.load`, the phased and orbax strategies) run
them.

They take a plan's step and the plan as what they ask of them (`PlacedStep`, `TransformedStep`,
`Skips`; `loader.planning.plan.Step` and `LoadPlan` are such), so placement sits below planning:
the planner places nothing, and nothing here imports the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import jax
import numpy as np
from jax.sharding import Sharding

from loader.placement.casts import check_fits
from loader.placement.leaves import Leaf, LeafKind
from loader.placement.place import place
from loader.report import LoadReport, ShapeMismatch


class PlacedStep(Protocol):
    """What placing a host array asks of a plan's step: its leaf and where the leaf lives."""

    @property
    def leaf(self) -> Leaf: ...

    def placement(self) -> Sharding: ...


class TransformedStep(PlacedStep, Protocol):
    """What applying a `key_map` transform asks of a plan's step: also its file key and
    transform."""

    @property
    def file_key(self) -> str: ...

    @property
    def transform(self) -> Callable[[np.ndarray], np.ndarray] | None: ...


class Skips(Protocol):
    """What a transform's wrong shape is recorded in: the plan's report and its skipped leaves."""

    report: LoadReport
    skipped: list[Leaf]


def apply_transform(step: TransformedStep, host: np.ndarray, plan: Skips) -> np.ndarray | None:
    """Apply a key_map transform; a shape it gets wrong is reported, and the leaf skipped (None)."""
    if step.transform is None:
        return host
    out = np.asarray(step.transform(host))
    want, _ = step.leaf.stored_shape_dtype()
    if out.shape != want:
        plan.report.shape_mismatches.append(
            ShapeMismatch(step.leaf.key, step.file_key, want, out.shape)
        )
        plan.skipped.append(step.leaf)
        return None
    return out


Caster = Callable[[np.ndarray, np.dtype], np.ndarray]


def astype(host: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """numpy's cast: a fresh array (the default `Caster`)."""
    return host.astype(dtype)


def host_cast(leaf: Leaf, host: np.ndarray, caster: Caster = astype) -> np.ndarray:
    """Cast to the dtype the leaf is stored as (the model's dtype for arrays), on the host; an
    integer narrowing is checked value by value first (`loader.placement.casts.CastValueError`)."""
    _, dtype = leaf.stored_shape_dtype()
    if host.dtype == dtype:
        return host
    check_fits(host, dtype, leaf.where)
    return caster(host, dtype)


def to_device(step: PlacedStep, host: np.ndarray, *, cast_on_device: bool = False) -> object:
    """The leaf's value from its host array: placed array, rebuilt PRNG key, or Python scalar."""
    leaf = step.leaf
    sharding = None if leaf.kind is LeafKind.SCALAR else step.placement()
    return _value(leaf, host, sharding, cast_on_device=cast_on_device)


def _value(
    leaf: Leaf, host: np.ndarray, sharding: Sharding | None, *, cast_on_device: bool
) -> object:
    """`to_device` for `leaf`, an array or PRNG key placed with `sharding` (None: a scalar)."""
    if leaf.kind is LeafKind.SCALAR or sharding is None:
        assert leaf.pytype is not None, f"{leaf.where}: a scalar leaf without its Python type"
        return leaf.pytype(host.reshape(()).item())
    if leaf.kind is LeafKind.PRNG:
        data = place(host.astype(np.uint32, copy=False), sharding)
        return jax.random.wrap_key_data(data, impl=leaf.dtype._impl)
    if cast_on_device:  # jax's 32-bit mode narrows an int64 host array on transfer: check first
        check_fits(host, leaf.dtype, leaf.where)
    arr = place(host, sharding)
    if cast_on_device and arr.dtype != leaf.dtype:
        arr = arr.astype(leaf.dtype)
    return arr


def assign(leaf: Leaf, value: object) -> None:
    leaf.variable.set_value(value)


def fill_skipped(plan: Skips, *, abstract: bool) -> None:
    """An abstract model has no value for what was not loaded: give it zeros (reported already)."""
    if not abstract:
        return
    for leaf in plan.skipped:
        shape, dtype = leaf.stored_shape_dtype()
        zeros = np.zeros(shape, dtype)
        assign(leaf, _value(leaf, zeros, leaf.concrete_sharding(), cast_on_device=False))
