"""The sharded executor: fill a model from a `Layout` reading only this process's index ranges.

`DIRECTORY_RECIPE` (a sharded directory) and `file_recipe` (a plain checkpoint, local or remote,
seen as a layout of whole-tensor slices) are the recipes of `loader.sequence.run_load` that use
it. Planning and reporting are the sequence's (`plan_load` over a `LayoutSource`), so mismatches
read exactly as `loader.load_model` reports them; leaves that declare no sharding are placed with
the sharding rule (`loader.sharded.rule.apply_rule`). `Slices.fill` then, in one `stream` phase:

1. works out how each tensor is read (`way_of`: whole, by this process's regions, or as a
   leading-axis block resharded) and the index ranges that takes (`planned_reads`; the geometry,
   `local_regions` and `tiled_box`, is `loader.sharded.layout`'s), once per mode it weighs;
2. settles the mode (`loader.sharded.share.mode_of`: as `share=` asks, or `auto`'s choice on
   every process's figures);
3. hands the chosen mode's planned reads, once, to its `loader.sharded.reads.RegionReader`: the
   read-ahead (`loader.sharded.slices.ReadAhead`, within `budget=`), which tells the slice reader
   (`loader.sharded.slices.SliceReader`: a remote file plans its requests over all of them,
   `loader.sharded.read_plan`) and starts reading;
4. fills each leaf in plan order: reads its ranges (one box where a process's ranges tile one),
   casts on the host, puts each on the devices holding it and assembles the global array with
   `jax.make_array_from_single_device_arrays`; in bytes mode the block goes through
   `loader.sharded.blocks` instead.

The report gives this process's share (`LoadReport.share_bytes`, the bytes of the ranges it
read), the high-water mark of the bytes read ahead (`inflight_peak_bytes`), a URL's requests,
bytes and read plan, and for a plain checkpoint `LoadReport.share`: what was chosen, why, and the
bytes exchanged.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from loader.budget import DEFAULT_BUDGET_BYTES, ByteBudget
from loader.errors import CheckpointError
from loader.options import NO_OPTIONS, LoadOptions
from loader.phases import CAST, READ, STREAM, TRANSFER, Probe, substep
from loader.placement.leaves import LeafKind
from loader.placement.materialize import apply_transform, assign, host_cast, to_device
from loader.placement.place import describe_sharding
from loader.planning.plan import LoadPlan, Step
from loader.report import LoadReport, LoadWarning, ShareStats, caller_stacklevel
from loader.sequence import Recipe
from loader.sharded.blocks import Block, assembled_from_block, plan_block
from loader.sharded.layout import (
    LayoutSource,
    Region,
    file_layout_source,
    full_region,
    local_regions,
    open_manifest,
    tiled_box,
    within,
)
from loader.sharded.reads import PlannedRead, RegionReader
from loader.sharded.rule import apply_rule
from loader.sharded.share import (
    BYTES_MAX_OVER_READ,
    ProcessFigures,
    Share,
    Way,
    mode_of,
)
from loader.sharded.slices import ReadAhead, SliceReader


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
    step: Step, plan: LoadPlan, reader: RegionReader, probe: Probe, shape: tuple[int, ...]
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


def _assembled(step: Step, reader: RegionReader, probe: Probe, shape: tuple[int, ...]) -> jax.Array:
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
class StepReading:
    """How one step is read (`way_of`): its way, and in bytes mode how its block goes."""

    way: Way
    block: Block | None = None


def way_of(step: Step, shape: tuple[int, ...], mode: Share) -> StepReading:
    """How `step` is read in `mode` (`regions` or `bytes`): whole (a scalar, or a transform that
    needs the whole tensor), as a block resharded (`loader.sharded.blocks.plan_block`), or by
    regions."""
    if step.leaf.kind is LeafKind.SCALAR or step.transform is not None:
        return StepReading(Way.WHOLE)
    block = plan_block(step, shape) if mode is Share.BYTES else None
    return StepReading(Way.REGIONS) if block is None else StepReading(Way.BLOCK, block)


def planned_reads(step: Step, shape: tuple[int, ...], reading: StepReading) -> list[Region]:
    """The index ranges of the file's tensor that `step` reads as `reading` says (what
    `_whole`, `_assembled` and the block read will ask for, in that order)."""
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


@dataclass(frozen=True)
class ModePlan:
    """A load's steps as one mode reads them: each step's reading, and every planned read of the
    load in the order the executor asks for them (worked out once per mode: `planned_in`)."""

    readings: list[StepReading]
    reads: list[PlannedRead]


def planned_in(
    mode: Share, steps: list[Step], shapes: list[tuple[int, ...]], reader: SliceReader
) -> ModePlan:
    """How `mode` reads `steps` (`way_of`), and the planned reads that takes (`planned_reads`)."""
    readings = [way_of(step, shape, mode) for step, shape in zip(steps, shapes)]
    reads = [
        reader.planned(step.file_key, region)
        for step, shape, reading in zip(steps, shapes, readings)
        for region in planned_reads(step, shape, reading)
    ]
    return ModePlan(readings, reads)


@dataclass
class Slices:
    """An `Executor` (see `loader.sequence`): each leaf from this process's index ranges (or, in
    bytes mode, its leading-axis block resharded: `loader.sharded.share`), one tensor at a
    time, as one `stream` phase (`read` / `cast` / `transfer` sub-steps); see the module
    docstring.

    Attributes:
        share: `share=` as asked (`loader.options.Share`); None: a sharded directory, whose
            slices are read by regions, with no `LoadReport.share`.
        budget: the most host bytes read ahead of the tensor being placed (`budget=`).
    """

    share: Share | None = None
    budget: int = DEFAULT_BUDGET_BYTES
    _reader: SliceReader | None = field(default=None, init=False, repr=False)

    def start(self, source: LayoutSource, probe: Probe) -> None:
        self._reader = SliceReader(source.layout, source.open_file)

    def fill(self, plan: LoadPlan, source: LayoutSource, probe: Probe) -> None:
        reader = self._reader
        assert reader is not None, "Slices.fill before Slices.start"
        steps = plan.steps
        shapes = [source.layout.tensors[step.file_key].shape for step in steps]
        planned: Callable[[Share], ModePlan] = functools.cache(
            lambda mode: planned_in(mode, steps, shapes, reader)
        )
        budget = ByteBudget(self.budget)
        with probe.phase(STREAM):
            mode, reason = mode_of(
                self.share,
                processes=jax.process_count(),
                remote=source.over_a_link,
                figures=lambda: ProcessFigures.of(
                    planned(Share.REGIONS).reads,
                    planned(Share.BYTES).reads,
                    reader.plan_figures(planned(Share.REGIONS).reads),
                ),
            )
            chosen = planned(mode)
            ahead = ReadAhead(reader, budget)
            try:
                ahead.plan(chosen.reads, BYTES_MAX_OVER_READ if mode is Share.BYTES else None)
                ways, exchanged = _fill_steps(plan, shapes, chosen.readings, ahead, probe)
            finally:
                ahead.close()
        plan.report.share_bytes = reader.read_bytes
        plan.report.inflight_peak_bytes = budget.high_water_bytes
        _report_over_budget(plan.report, ahead.over_budget, budget)
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

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def _fill_steps(
    plan: LoadPlan,
    shapes: list[tuple[int, ...]],
    readings: list[StepReading],
    reader: RegionReader,
    probe: Probe,
) -> tuple[list[Way], int]:
    """Fill every step as `readings` say, through `reader`: how each tensor was read in the
    end, and the bytes exchanged."""
    me = jax.process_index()
    ways, exchanged = [], 0
    for step, shape, reading in zip(plan.steps, shapes, readings):
        way = reading.way
        if way is Way.WHOLE:
            value = _whole(step, plan, reader, probe, shape)
        elif reading.block is not None:
            with substep(probe, READ):
                host = reader.read_region(step.file_key, reading.block.region(shape, me))
            placed = assembled_from_block(step, reading.block, host, probe, shape)
            del host
            if placed is None:  # a program with arithmetic, in every process: by regions
                way, value = Way.REGIONS, _assembled(step, reader, probe, shape)
            else:
                value, received = placed
                exchanged += received
        else:
            value = _assembled(step, reader, probe, shape)
        ways.append(way)
        if value is None:
            continue
        assign(step.leaf, value)
        plan.report.loaded.append(step.leaf.key)
        del value
    return ways, exchanged


#: A directory written by `save_sharded` / `convert_to_sharded`.
DIRECTORY_RECIPE = Recipe(Slices, open_source=open_manifest, adjust_plan=apply_rule)


def _report_over_budget(report: LoadReport, over: list[PlannedRead], budget: ByteBudget) -> None:
    """Name the regions read whole beyond `budget=` in the report (`LoadReport.over_budget`), and
    warn once: the high-water mark is over the budget, and by how much."""
    report.over_budget = sorted({read.key for read in over})
    if not over:
        return
    largest = max(over, key=lambda read: read.nbytes)
    warnings.warn(
        f"{report.path}: budget={budget.limit_bytes} bytes was exceeded: "
        f"{budget.high_water_bytes} bytes were read ahead at the peak, since "
        f"{len(report.over_budget)} tensor(s) have a region larger than the budget, read whole "
        f"(the largest: {largest.key!r}, {largest.nbytes} bytes); give budget= at least "
        f"{largest.nbytes} to stay within it",
        LoadWarning,
        stacklevel=caller_stacklevel(),
    )


def file_recipe(options: LoadOptions = NO_OPTIONS) -> Recipe[LayoutSource]:
    """A plain `.safetensors` checkpoint (a file, a folder of shards, or a URL's), each process
    reading its share of it as `options.sharing` says (`loader.sharded.share`), at most
    `options.reading`'s `budget` bytes read ahead; a URL's ranges by range requests, as
    `options.remote` and `options.checking` say (`concurrency` in flight, digest, time limits:
    `loader.sharded.remote`)."""
    from loader.sharded.remote import open_remote_layout

    share, budget = Share(options.sharing.value("share")), options.reading.value("budget")
    return Recipe(
        functools.partial(Slices, share, budget),
        open_source=file_layout_source,
        adjust_plan=apply_rule,
        open_remote=functools.partial(
            open_remote_layout,
            remote=options.remote,
            checking=options.checking,
            sharing=options.sharing,
        ),
    )
