"""A leaf made from a quantized layout: checked from the headers, read as parts, dequantized.

Planning (`loader.planning.match.plan_load`) turns a leaf whose key_map entry is a quantized layout
(`loader.transforms.quant`: `Dequantize`, `Unpack`, `DequantizeMXFP4`) into a `QuantGroup` and one
ordinary `Step` per file tensor it reads (its weight, scale, zero point, ...): a part leaf of the
tensor's own shape and dtype, so every executor reads it as it reads any leaf, without a cast.
When a group's last part is in, the leaf is made at once (its parts dropped):

- on the host (numpy, `Quantized.host`), then placed with the leaf's sharding, where the parts
  were placed on the host (every strategy but `pipelined`);
- on the device (`loader.transforms.device_quant`: one compiled program per layout and shape),
  where `pipelined` sent the parts there as stored (`on_device`): the file's bytes travel, and the
  host never holds the dequantized leaf.

Before any read, `check_quantized` proves from the headers that the parts fit together: a scale
of the wrong shape or block, a packed length that does not unpack to the declared shape, a dtype
the layout does not take is a shape mismatch naming the tensor (refused by a strict load); so is
a dequantized shape the leaf does not have.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from loader.errors import CheckpointError
from loader.format import TensorMeta
from loader.format.dtypes import ML_FLOATS
from loader.phases import DEQUANTIZE, Probe
from loader.placement.leaves import Leaf, LeafKind
from loader.placement.place import place
from loader.planning.plan import LoadPlan, QuantGroup, Source
from loader.report import LoadReport, ShapeMismatch
from loader.transforms.quant import QuantError, Quantized


class _PartVariable:
    """The variable of a part leaf: a value assigned to it is kept until the group is whole."""

    def __init__(self, group: QuantGroup, role: str) -> None:
        self.group, self.role = group, role

    def set_value(self, value: object) -> None:
        group = self.group
        group.values[self.role] = value
        if len(group.values) == len(group.infos):
            make_leaf(group)


def make_leaf(group: QuantGroup) -> None:
    """Dequantize a whole group into its leaf (host or device) and drop its parts, inside the
    probe's `dequantize` phase: the host's arithmetic and placement, or the device program's
    launch (its first call per shape compiles it; its run is asynchronous, behind the
    transfers)."""
    leaf, values = group.leaf, group.values
    dtype = np.dtype(leaf.dtype)
    with group.probe.phase(DEQUANTIZE), _named(group):
        if group.on_device:
            from loader.transforms.device_quant import dequantize

            # what the values must say is checked at the end of the load, not here: reading a
            # device array back waits for it, and would stall the transfers behind it
            if group.layout.CHECKED_VALUES:
                group.unchecked = {role: _unchecked(role, v, group) for role, v in values.items()}
            value: Any = dequantize(group.layout, cast(Any, values), dtype, group.sharding)
        else:
            arrays = {role: np.asarray(v) for role, v in values.items()}
            value = place(group.layout.host(arrays, dtype), group.sharding)
    group.values = {}
    leaf.variable.set_value(value)
    group.placed = True


@contextlib.contextmanager
def _named(group: QuantGroup) -> Iterator[None]:
    """A `QuantError` (from the values) as a `CheckpointError` naming the parameter."""
    try:
        yield
    except QuantError as exc:
        raise CheckpointError(f"{group.leaf.where}: {group.layout}: {exc}") from None


def _unchecked(role: str, value: Any, group: QuantGroup) -> Any:
    """What the end-of-load check keeps of a part: a small one whole, a large one its shape."""
    if role in group.layout.CHECKED_VALUES:
        return value
    return jax.ShapeDtypeStruct(value.shape, value.dtype)


def check_device_values(group: QuantGroup) -> None:
    """The values a group dequantized on the device must hold (`Quantized.check_values`), read
    back now that every transfer is done."""
    if not group.unchecked:
        return
    roles = group.layout.CHECKED_VALUES
    arrays = {role: np.asarray(v) if role in roles else v for role, v in group.unchecked.items()}
    group.unchecked = {}
    with _named(group):
        group.layout.check_values(cast(Any, arrays))


def _mismatch(leaf: Leaf, q: Quantized, info: TensorMeta, result: str) -> ShapeMismatch:
    return ShapeMismatch(leaf.key, info.name, leaf.shape, info.shape, str(q), result)


def check_quantized(leaf: Leaf, q: Quantized, source: Source, report: LoadReport) -> bool:
    """Whether the layout fills `leaf` (from the headers); a mismatch is reported (False).

    All of its file tensors absent: the leaf is missing (reported). Some absent, or a leaf that is
    not a float array: `CheckpointError` naming them.
    """
    absent = [k for k in q.file_keys if k not in source]
    if len(absent) == len(q.file_keys):
        report.missing.append(leaf.key)
        return False
    if absent:
        raise CheckpointError(f"{leaf.where}: {q} cannot fill it: file key(s) {absent} not found")
    if leaf.kind is not LeafKind.ARRAY or not _is_float(np.dtype(leaf.dtype)):
        raise CheckpointError(
            f"{leaf.where}: {q} makes a float leaf, not a {np.dtype(leaf.dtype)} "
            f"{leaf.kind.value}; keep the layer quantized by loading its tensors into leaves of "
            "their own dtypes instead"
        )
    infos = {role: source.info(key) for role, key in q.keys.items()}
    weight = next(iter(infos.values()))
    try:
        out = q.out_shape(infos)
    except QuantError as exc:
        report.shape_mismatches.append(_mismatch(leaf, q, weight, f"an error ({exc})"))
        return False
    if out != leaf.shape:
        report.shape_mismatches.append(_mismatch(leaf, q, weight, str(out)))
        return False
    return True


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in ML_FLOATS


def part_leaves(group: QuantGroup, host: Sharding) -> list[tuple[str, Leaf]]:
    """One part leaf per file tensor (its shape and dtype as stored), by file key."""
    out = []
    for role, info in group.infos.items():
        variable = cast(Any, _PartVariable(group, role))
        leaf = group.leaf
        part = Leaf(
            (*leaf.path, f"<{role}>"),
            f"{leaf.key}<{role}>",
            variable,
            LeafKind.ARRAY,
            info.storage_shape,
            info.np_dtype,
            host,
        )
        out.append((info.name, part))
    return out


def part_sharding(group: QuantGroup) -> Sharding:
    """Where `pipelined` sends a group's parts: the leaf's device, or every device of its mesh
    (each holds the whole stored tensor; the program cuts the leaf's shards from it)."""
    sharding = group.sharding
    if isinstance(sharding, SingleDeviceSharding):
        return sharding
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, PartitionSpec())
    devices: list[Any] = sorted(sharding.device_set, key=lambda d: d.id)
    return SingleDeviceSharding(devices[0])


def dequantize_on_device(plan: LoadPlan, source: Source) -> None:
    """A `Recipe.adjust_plan` for `pipelined`: send each group's parts to the device as stored
    and dequantize there."""
    parts = {key: group for group in plan.quantized for key in group.part_keys}
    for step in plan.steps:
        group = parts.get(step.leaf.key)
        if group is not None:
            group.on_device = True
            step.sharding = part_sharding(group)


def watch_quantized(plan: LoadPlan, probe: Probe) -> None:
    """Time each quantized leaf made in `plan` as the `dequantize` phase of `probe`."""
    for group in plan.quantized:
        group.probe = probe


def finish_quantized(plan: LoadPlan) -> None:
    """The report after the executor: each group's leaf loaded (made from its parts) or skipped;
    the part leaves leave the report's `loaded` and the plan's `skipped`."""
    if not plan.quantized:
        return
    part_keys = {k for group in plan.quantized for k in group.part_keys}
    plan.report.loaded = [k for k in plan.report.loaded if k not in part_keys]
    plan.skipped = [leaf for leaf in plan.skipped if leaf.key not in part_keys]
    for group in plan.quantized:
        group.values = {}
        check_device_values(group)
        if group.placed:
            plan.report.loaded.append(group.leaf.key)
        else:
            plan.skipped.append(group.leaf)


def host_sharding(group: QuantGroup) -> Sharding:
    """Where a non-staged executor places a part: the host's CPU device; where this process has
    no CPU backend (`JAX_PLATFORMS=tpu`), the part's own device (`part_sharding`)."""
    try:
        cpu = jax.local_devices(backend="cpu")[0]
    except RuntimeError:  # "Unknown backend cpu": only the accelerator's is initialized
        return part_sharding(group)
    return jax.sharding.SingleDeviceSharding(cpu)
