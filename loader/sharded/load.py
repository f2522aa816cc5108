"""The sharded executor: fill a model from a `Layout` reading only this process's index ranges.

`DIRECTORY_RECIPE` (a sharded directory) and `file_recipe` (a plain checkpoint, local or remote,
seen as a layout of whole-tensor slices) are the recipes of `loader.sequence.run_load` that use
it. Planning and reporting are the sequence's (`plan_load` over a `LayoutSource`), so mismatches
read exactly as `loader.load_model` reports them. Leaves that declare no sharding (a plain
builder's abstract model: no sharding, or one that partitions nothing under `jax.set_mesh`) are
placed with the sharding rule (`rule_mesh`), and their `sharding_changes` are judged against it; a
model's own partitioning, and any instance's sharding, is kept. For each leaf, each distinct index
range of its addressable devices is read once (`loader.sharded.slices.SliceReader`; ranges that
tile one box, as a process's devices along a split axis do, as that box: one read or range request
per contiguous run of it), cast on the host, put on each device holding it, and the global array
assembled with `jax.make_array_from_single_device_arrays`. Every range a process will read is
told to the slice reader first (`planned_reads`), so that a remote file plans its requests over
all of them (`loader.sharded.read_plan`), and read ahead of the tensor being placed, within a
budget (`loader.sharded.ahead.ReadAhead`). The report gives this process's share
(`LoadReport.share_bytes`, the bytes of the ranges it read) and a URL's requests, bytes and read
plan.

A plain checkpoint can be shared by bytes instead (`share=`, `loader.sharded.share`): each
tensor that allows it is read as this process's leading-axis block and resharded over the
interconnect (`loader.sharded.blocks`); `way_of` says how each tensor is read, the same in every
process, and `LoadReport.share` what was chosen, why, and the bytes exchanged.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding

from loader.errors import CheckpointError
from loader.phases import CAST, READ, STREAM, TRANSFER, Probe, substep
from loader.placement.leaves import META_SHARDINGS, LeafKind
from loader.placement.materialize import apply_transform, assign, host_cast, to_device
from loader.placement.place import describe_sharding
from loader.planning.plan import LoadPlan, Step
from loader.remote.options import RemoteOptions
from loader.report import ShardingChange
from loader.sequence import Recipe
from loader.sharded.ahead import ReadAhead
from loader.sharded.blocks import Block, assembled_from_block, plan_block
from loader.sharded.layout import (
    LayoutSource,
    Region,
    extents,
    file_layout_source,
    full_region,
    index_region,
    open_manifest,
    within,
)
from loader.sharded.rule import rule_mesh, rule_sharding
from loader.sharded.share import (
    BYTES_MAX_OVER_READ,
    DEFAULT_SHARE,
    ProcessFigures,
    Share,
    ShareStats,
    Way,
    choose,
)
from loader.sharded.slices import SliceReader


def local_regions(sharding: Any, shape: tuple[int, ...]) -> dict[Region, list[Any]]:
    """This process's distinct index ranges of `shape` under `sharding`, and the devices of each."""
    found: dict[Region, list[Any]] = {}
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        found.setdefault(index_region(index, shape), []).append(device)
    return found


def declares_none(sharding: Any) -> bool:
    """No sharding, or an abstract model's (built under `jax.set_mesh`) that partitions nothing."""
    if sharding is None:
        return True
    abstract = isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, Mesh)
    return abstract and all(axis is None for axis in sharding.spec)


class WithMetadata(Protocol):
    """What `apply_rule` reads of a source: the checkpoint's `__metadata__` (the shardings a save
    recorded). A `LayoutSource` and a `loader.format.source.CheckpointSource` both have it."""

    @property
    def metadata(self) -> dict[str, str]: ...


def apply_rule(plan: LoadPlan, source: WithMetadata) -> None:
    """Place with the rule what declares no sharding, and judge sharding changes against it.

    A leaf without any sharding always gets the rule. If no leaf of the model partitions anything
    (a plain builder, even under `jax.set_mesh`), every array leaf gets it; a model that partitions
    some leaves keeps its own layout, replicated leaves included.
    """
    mesh = rule_mesh()
    leaves = [s.leaf for s in plan.steps] + plan.skipped
    plain = all(declares_none(leaf.sharding) for leaf in leaves if leaf.kind is not LeafKind.SCALAR)
    ruled = set()
    for leaf in leaves:
        if leaf.kind is not LeafKind.SCALAR and (
            leaf.sharding is None or (plain and declares_none(leaf.sharding))
        ):
            leaf.sharding = rule_sharding(leaf.stored_shape_dtype()[0], mesh)
            ruled.add(leaf.key)
    saved = json.loads(source.metadata.get(META_SHARDINGS, "{}"))
    changes = [c for c in plan.report.sharding_changes if c.path not in ruled]
    for step in plan.steps:
        if step.leaf.key in ruled:
            step.sharding = step.leaf.sharding
            before, after = saved.get(step.leaf.key), describe_sharding(step.sharding)
            if before is not None and before != after:
                changes.append(ShardingChange(step.leaf.key, before, after))
    plan.report.sharding_changes = changes


def refuse_unaddressable(sharding: Any, where: str) -> None:
    """`CheckpointError` if this process can address no device of `sharding` (it could hold no
    part of the array); multi-process strategies call it rather than load a local slice."""
    if not sharding.addressable_devices:
        ids = sorted(d.id for d in sharding.device_set)
        raise CheckpointError(
            f"{where}: its sharding ({describe_sharding(sharding)}) puts it only on "
            f"device(s) {ids}, none of which process {jax.process_index()} can address, so this "
            "process cannot hold its part; build the model under a mesh that includes this "
            "process's devices (jax.local_devices()). Refusing to load a local slice instead."
        )


def _whole(
    step: Step,
    plan: LoadPlan,
    reader: SliceReader | ReadAhead,
    probe: Probe,
    shape: tuple[int, ...],
) -> Any:
    """A scalar, or a leaf whose key_map transform needs the whole tensor: read all of it."""
    with substep(probe, READ):
        host = reader.read_region(step.file_key, full_region(shape))
    transformed = apply_transform(step, host, plan)
    if transformed is None:
        return None
    with substep(probe, CAST):
        host = host_cast(step.leaf, transformed)
    with substep(probe, TRANSFER):
        return to_device(step, host)


def tiled_box(regions: list[Region]) -> Region | None:
    """The box several distinct index ranges of one sharding tile exactly (their bounding box,
    when it holds no more elements than they do), else None.

    Example:
        >>> tiled_box([((0, 4), (0, 2)), ((0, 4), (2, 4))])
        ((0, 4), (0, 4))
        >>> tiled_box([((0, 4), (0, 2)), ((0, 4), (4, 6))]) is None
        True
    """
    if len(regions) < 2:
        return None
    box = tuple((min(a for a, _ in axis), max(b for _, b in axis)) for axis in zip(*regions))
    count = sum(math.prod(extents(r)) for r in regions)
    return box if math.prod(extents(box)) == count else None


def _assembled(
    step: Step, reader: SliceReader | ReadAhead, probe: Probe, shape: tuple[int, ...]
) -> jax.Array:
    """Read this process's index ranges only, and assemble the global array from them. Where
    they tile one box (a process with several devices along a split axis) the box is read in one
    piece, so neighbouring ranges cost one read (one range request) per contiguous run of the
    box, not one each; the bytes are the same."""
    refuse_unaddressable(step.sharding, step.leaf.where)
    regions = local_regions(step.sharding, shape)
    box, whole = tiled_box(list(regions)), None
    if box is not None:
        with substep(probe, READ):
            whole = reader.read_region(step.file_key, box)
    arrays = []
    for region, devices in regions.items():
        if whole is None or box is None:
            with substep(probe, READ):
                host = reader.read_region(step.file_key, region)
        else:
            host = whole[within(region, box)]
        with substep(probe, CAST):
            host = host_cast(step.leaf, host)
        with substep(probe, TRANSFER):
            arrays += [jax.device_put(host, d) for d in devices]
        del host
    del whole
    with substep(probe, TRANSFER):
        arr = jax.make_array_from_single_device_arrays(shape, step.placement(), arrays)
    if step.leaf.kind is LeafKind.PRNG:
        arr = jax.random.wrap_key_data(arr, impl=step.leaf.dtype._impl)
    return arr


@dataclass(frozen=True)
class Reading:
    """How one step is read (`way_of`): its way, and in bytes mode how its block goes."""

    way: Way
    block: Block | None = None


def planned_reads(step: Step, shape: tuple[int, ...], reading: Reading) -> list[Region]:
    """The index ranges of the file's tensor that `step` reads as `reading` says, told to the
    slice reader ahead, so that a remote file plans its requests over all of them."""
    if reading.way is Way.WHOLE:
        return [full_region(shape)]
    if reading.block is not None:
        return [reading.block.region(shape, jax.process_index())]
    sharding = step.sharding
    if sharding is None or not sharding.addressable_devices:
        return []  # refused when it is read (`refuse_unaddressable`)
    regions = list(local_regions(sharding, shape))
    box = tiled_box(regions)
    return regions if box is None else [box]


def way_of(step: Step, shape: tuple[int, ...], mode: Share) -> Reading:
    """How `step` is read in `mode` (`regions` or `bytes`): whole (a scalar, or a transform that
    needs the whole tensor), as a block resharded (`loader.sharded.blocks.plan_block`), or by
    regions."""
    if step.leaf.kind is LeafKind.SCALAR or step.transform is not None:
        return Reading(Way.WHOLE)
    block = plan_block(step, shape) if mode is Share.BYTES else None
    return Reading(Way.REGIONS) if block is None else Reading(Way.BLOCK, block)


@dataclass
class Slices:
    """An `Executor` (see `loader.sequence`): each leaf from this process's index ranges (or, in
    bytes mode, its leading-axis block resharded: `loader.sharded.share`), one tensor at a
    time, as one `stream` phase (`read` / `cast` / `transfer` sub-steps).

    Attributes:
        share: `share=` as asked (`loader.sharded.share.Share`); None: a sharded directory,
            whose slices are read by regions, with no `LoadReport.share`.
    """

    share: Share | None = None
    _reader: SliceReader | None = field(default=None, init=False, repr=False)

    def start(self, source: LayoutSource, probe: Probe) -> None:
        self._reader = SliceReader(source.layout, source.open_file)

    def fill(self, plan: LoadPlan, source: LayoutSource, probe: Probe) -> None:
        reader = self._reader
        assert reader is not None, "Slices.fill before Slices.start"
        shapes = [source.layout.tensors[step.file_key].shape for step in plan.steps]
        with probe.phase(STREAM):
            mode, reason = self._mode(plan.steps, shapes, reader, source)
            readings = [way_of(step, shape, mode) for step, shape in zip(plan.steps, shapes)]
            reader.plan(
                (
                    (step.file_key, region)
                    for step, shape, reading in zip(plan.steps, shapes, readings)
                    for region in planned_reads(step, shape, reading)
                ),
                BYTES_MAX_OVER_READ if mode is Share.BYTES else None,
            )
            ahead = ReadAhead(reader)
            try:
                ways, exchanged = self._read(plan, shapes, readings, ahead, probe)
            finally:
                ahead.close()
        plan.report.share_bytes = reader.read_bytes
        if self.share is None:
            return
        plan.report.share = ShareStats(
            asked=self.share,
            mode=mode,
            reason=reason,
            block_tensors=ways.count(Way.BLOCK),
            region_tensors=ways.count(Way.REGIONS),
            whole_tensors=ways.count(Way.WHOLE),
            exchanged_bytes=exchanged,
        )

    def _read(
        self,
        plan: LoadPlan,
        shapes: list[tuple[int, ...]],
        readings: list[Reading],
        ahead: ReadAhead,
        probe: Probe,
    ) -> tuple[list[Way], int]:
        """Fill every step as `readings` say, its planned reads read ahead
        (`loader.sharded.ahead`): how each tensor was read in the end, and the bytes exchanged."""
        me = jax.process_index()
        assert self._reader is not None, "Slices._read before Slices.start"
        reads = [
            (step.file_key, region)
            for step, shape, reading in zip(plan.steps, shapes, readings)
            for region in planned_reads(step, shape, reading)
        ]
        ahead.expect((key, region, self._reader.bytes_of([(key, region)])) for key, region in reads)
        ways, exchanged = [], 0
        for step, shape, reading in zip(plan.steps, shapes, readings):
            way = reading.way
            if way is Way.WHOLE:
                value = _whole(step, plan, ahead, probe, shape)
            elif reading.block is not None:
                with substep(probe, READ):
                    host = ahead.read_region(step.file_key, reading.block.region(shape, me))
                placed = assembled_from_block(step, reading.block, host, probe, shape)
                del host
                if placed is None:  # a program with arithmetic, in every process: by regions
                    way, value = Way.REGIONS, _assembled(step, ahead, probe, shape)
                else:
                    value, received = placed
                    exchanged += received
            else:
                value = _assembled(step, ahead, probe, shape)
            ways.append(way)
            if value is None:
                continue
            assign(step.leaf, value)
            plan.report.loaded.append(step.leaf.key)
            del value
        return ways, exchanged

    def _mode(
        self,
        steps: list[Step],
        shapes: list[tuple[int, ...]],
        reader: SliceReader,
        source: LayoutSource,
    ) -> tuple[Share, str]:
        """The mode of this load and why: as asked, or `auto`'s choice on every process's
        figures (gathered, so that every process chooses the same)."""
        if self.share is None:
            return Share.REGIONS, "a sharded directory: each process reads its own slices"
        if self.share is not Share.AUTO:
            return self.share, f"asked share={self.share.value!r}"
        processes, remote = jax.process_count(), source.remote_stats() is not None
        if processes == 1 or not remote:
            return choose(processes=processes, remote=remote, figures=[])
        mine = _figures(steps, shapes, reader)
        gathered = multihost_utils.process_allgather(np.array(mine.as_list(), "<i8").view(np.uint8))
        figures = [
            ProcessFigures(*np.asarray(row, np.uint8).view("<i8").tolist())
            for row in np.asarray(gathered).reshape(processes, -1)
        ]
        return choose(processes=processes, remote=remote, figures=figures)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def _figures(
    steps: list[Step], shapes: list[tuple[int, ...]], reader: SliceReader
) -> ProcessFigures:
    """What this process would read by regions (requests, bytes, tensors) and by bytes."""
    by_mode = {}
    for mode in (Share.REGIONS, Share.BYTES):
        by_mode[mode] = [
            (step.file_key, region)
            for step, shape in zip(steps, shapes)
            for region in planned_reads(step, shape, way_of(step, shape, mode))
        ]
    regions = by_mode[Share.REGIONS]
    planned = reader.plan_figures(regions)
    return ProcessFigures(
        regions_requests=planned.requests,
        regions_bytes=reader.bytes_of(regions),
        regions_tensors=len({key for key, _ in regions}),
        bytes_bytes=reader.bytes_of(by_mode[Share.BYTES]),
        regions_read_bytes=planned.read_bytes,
    )


#: A directory written by `save_sharded` / `convert_to_sharded`.
DIRECTORY_RECIPE = Recipe(Slices, open_source=open_manifest, adjust_plan=apply_rule)


def file_recipe(
    remote: RemoteOptions | None = None, share: Share = DEFAULT_SHARE
) -> Recipe[LayoutSource]:
    """A plain `.safetensors` checkpoint (a file, a folder of shards, or a URL's), each process
    reading its share of it as `share` says (`loader.sharded.share`); a URL's ranges by range
    requests, as `remote` says (`concurrency` in flight, digest, time limits:
    `loader.sharded.remote`)."""
    from loader.sharded.remote import open_remote_layout

    return Recipe(
        functools.partial(Slices, share),
        open_source=file_layout_source,
        adjust_plan=apply_rule,
        open_remote=functools.partial(open_remote_layout, options=remote),
    )
