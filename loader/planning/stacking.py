"""A stacked leaf (`loader.Stack`): checked from the headers, then filled one layer per file key.

Planning (`loader.planning.match.plan_load`) turns a leaf whose key_map entry is a `Stack` into a
`Stacked` group and one ordinary `Step` per file key: its file key, its per-layer transform, and
a layer leaf (`StackLayer`) of one layer's shape. Every executor reads those steps as it reads any
other, so every strategy loads a stacked leaf; they differ in where a layer's value goes:

- `pipelined` reads each file tensor straight into its slice of the leaf's own buffers (one per
  device region; `loader.pipeline.stacked`) and places the leaf once its last layer is in: no
  per-layer model, no `np.stack`, no copy of the whole leaf.
- any other executor assigns each layer's value to its layer leaf, whose variable copies it into
  one host buffer of the whole leaf (`assemble`); `finish_stacked` then places that buffer with
  the leaf's sharding. The host holds the leaf plus one layer at a time.

Before any read, `check_stack` refuses (`StackError`, naming the keys) a Stack whose file tensors
differ in shape or dtype, whose count is not the leaf's size along the axis, or some of whose keys
are absent; a per-layer shape the leaf does not take is a shape mismatch like any other.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from loader.format import TensorMeta, dtype_name
from loader.format.buffers import aligned
from loader.placement.leaves import Leaf, LeafKind
from loader.placement.place import place
from loader.planning.plan import LoadPlan, Source, Stacked, StackLayer
from loader.report import DtypeCast, LoadReport, ShapeMismatch
from loader.transforms import Stack, StackError, TransformError


class _LayerVariable:
    """The variable of a layer leaf: a value assigned to it is copied into the group's buffer."""

    def __init__(self, layer: StackLayer) -> None:
        self.layer = layer

    def set_value(self, value: object) -> None:
        assemble(self.layer, np.asarray(value))


def assemble(layer: StackLayer, value: np.ndarray) -> None:
    """Copy one layer's value into the host buffer of its whole leaf (a staging executor's way)."""
    group = layer.group
    if group.host is None:
        group.host = aligned(group.leaf.shape, group.leaf.dtype)
    np.copyto(group.host[group.layer_index(layer.index)], value, casting="unsafe")
    group.written.add(layer.index)


def _differ(stack: Stack, infos: list[TensorMeta]) -> str:
    first = infos[0]
    odd = [
        (k, i)
        for k, i in zip(stack.keys, infos)
        if (i.shape, i.dtype) != (first.shape, first.dtype)
    ]
    if not odd:
        return ""
    k, i = odd[0]
    more = f" (and {len(odd) - 1} more)" if len(odd) > 1 else ""
    return (
        f"file key {stack.keys[0]!r} is {first.dtype} {first.shape} but {k!r} is "
        f"{i.dtype} {i.shape}{more}; a Stack's tensors must share one shape and dtype"
    )


def _refuse(leaf: Leaf, stack: Stack, why: str) -> StackError:
    return StackError(f"{leaf.where}: {stack} cannot fill it: {why}")


def check_stack(leaf: Leaf, stack: Stack, source: Source, report: LoadReport) -> bool:
    """Whether the Stack fills `leaf` (from the headers); a mismatch is reported (False).

    All keys absent: the leaf is missing (reported).

    Raises:
        StackError: some keys absent, tensors of different shapes or dtypes, a count that is not
            the leaf's size along the axis, or a leaf that is not an array.
    """
    absent = [k for k in stack.keys if k not in source]
    if len(absent) == len(stack.keys):
        report.missing.append(leaf.key)
        return False
    if absent:
        raise _refuse(leaf, stack, f"file key(s) {absent[:3]} ({len(absent)} of them) not found")
    if leaf.kind is not LeafKind.ARRAY:
        raise _refuse(leaf, stack, f"a Stack fills an array leaf, not a {leaf.kind.value}")
    infos = [source.info(k) for k in stack.keys]
    differ = _differ(stack, infos)
    if differ:
        raise _refuse(leaf, stack, differ)
    first = infos[0]
    try:
        layer = stack.layer_shape(first.shape)
        out = stack.out_shape(first.shape)
    except TransformError as exc:
        report.shape_mismatches.append(
            ShapeMismatch(
                leaf.key, stack.keys[0], leaf.shape, first.shape, str(stack), f"an error ({exc})"
            )
        )
        return False
    axis = stack.leaf_axis(len(layer)) if len(leaf.shape) == len(layer) + 1 else None
    if axis is not None and leaf.shape[axis] != len(stack.keys):  # the right rank, not the count
        raise _refuse(
            leaf,
            stack,
            f"{len(stack.keys)} file keys ({stack.keys[0]!r} .. {stack.keys[-1]!r}) for a leaf "
            f"of shape {leaf.shape}, whose axis {axis} holds {leaf.shape[axis]}",
        )
    if out != leaf.shape:
        report.shape_mismatches.append(
            ShapeMismatch(leaf.key, stack.keys[0], leaf.shape, first.shape, str(stack), str(out))
        )
        return False
    if first.np_dtype != np.dtype(leaf.dtype):
        report.casts.append(DtypeCast(leaf.key, first.dtype, dtype_name(leaf.dtype)))
    return True


def layer_leaves(group: Stacked) -> list[tuple[Leaf, StackLayer]]:
    """One layer leaf per file key, of one layer's shape, whose value goes into the group."""
    leaf = group.leaf
    shape = tuple(n for a, n in enumerate(leaf.shape) if a != group.axis)
    out = []
    for i in range(len(group.stack.keys)):
        layer = StackLayer(group, i)
        variable = cast(Any, _LayerVariable(layer))
        part = Leaf(
            (*leaf.path, f"[{i}]"),
            f"{leaf.key}[{i}]",
            variable,
            LeafKind.ARRAY,
            shape,
            leaf.dtype,
            None,
        )
        out.append((part, layer))
    return out


def finish_stacked(plan: LoadPlan) -> None:
    """Place each stacked leaf a staging executor assembled; report it loaded, or skipped.

    Layer leaves leave the report's `loaded` and the plan's `skipped`: the stacked leaf stands
    for them (loaded once every layer is in; skipped, so zeros on an abstract target, if not).
    """
    if not plan.stacked:
        return
    layer_keys = {s.leaf.key for s in plan.steps if s.layer is not None}
    plan.report.loaded = [k for k in plan.report.loaded if k not in layer_keys]
    plan.skipped = [leaf for leaf in plan.skipped if leaf.key not in layer_keys]
    for group in plan.stacked:
        complete = len(group.written) == len(group.stack.keys)
        if not group.placed and group.host is not None and complete:
            group.leaf.variable.set_value(place(group.host, group.sharding))
            group.host, group.placed = None, True
        if group.placed:
            plan.report.loaded.append(group.leaf.key)
        else:
            plan.skipped.append(group.leaf)
