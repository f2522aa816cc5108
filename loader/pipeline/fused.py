"""Leaves cut from one stored tensor, read once for all of them from a remote source.

A fused tensor split into several leaves by the key map (GPT-2's `c_attn` `(d, 3d)`, its q, k
and v each a `Slice` of the last axis, and a `Reshape` or `Transpose`) gives each leaf a strided
view whose every row is a short run of the stored row. Read leaf by leaf (`AdoptJob`), each view
reads the stored rows it spans through (`loader.pipeline.views`): over a URL, every leaf would
fetch about the whole tensor again. `fuse` groups the adopt jobs of such leaves by their stored
tensor; each `FusedRows` is some stored rows of it, read once, a scratch-sized block at a time,
and every leaf's piece of those rows cut from the block (`fill_rows`). The jobs stay the leaves'
own (`AdoptJob.finish` places each one); a `FusedRows` is `Work` for all of them, as a
`loader.pipeline.order.Run` is for adjacent small tensors.

Where the tensor was read whole before the plan (speculatively), every one of its leaves reads
from that buffer (as `FusedRows`, or each through its own view in one `FromMemory`), not only the
first. Only a byte source that shares rows is grouped (`ByteSource.shares_rows`, a remote one:
`Pipeline.fill`): a local file's second read of a row is a page cache hit. The scratch bounds each
block, so the bytes in flight stay within the budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from loader.format import TensorInfo
from loader.format.buffers import prefault
from loader.pipeline.jobs import PART_BYTES, AdoptJob, Job, MappedPart, Work
from loader.pipeline.regions import Bytes
from loader.pipeline.views import copy_strided, row_axis, stretch
from loader.transforms import View


@dataclass(frozen=True)
class RowTarget:
    """One device piece of a leaf, as a view of the stored tensor whose index along `axis` is a
    stored row (`first` the row of index 0), and the piece's buffer."""

    view: View
    dest: np.ndarray
    axis: int
    first: int

    @property
    def rows(self) -> slice:
        """The stored rows the piece holds."""
        return slice(self.first, self.first + self.view.shape[self.axis])

    def within(self, rows: slice) -> tuple[View, np.ndarray] | None:
        """The piece's view and buffer restricted to the stored `rows` (None: none of them)."""
        lo, hi = max(rows.start, self.first), min(rows.stop, self.rows.stop)
        if lo >= hi:
            return None
        k = self.axis
        index = slice(lo - self.first, hi - self.first)
        region = tuple(index if a == k else slice(0, n) for a, n in enumerate(self.view.shape))
        return self.view.restrict(region), self.dest[(slice(None),) * k + (index,)]


def fill_rows(
    src: Bytes,
    dtype: np.dtype,
    row: int,
    rows: slice,
    targets: list[RowTarget],
    scratch: np.ndarray,
) -> None:
    """Fill every target's part of the stored `rows` (`row` elements each, `dtype`), reading
    each stored byte they need once: a block of rows at a time into `scratch` (which holds at
    least one row), from the first element any target wants in it to the last.

    Example:
        >>> q = RowTarget(View((4, 2), (6, 1), 0), q_dest, axis=0, first=0)
        >>> k = RowTarget(View((4, 2), (6, 1), 2), k_dest, axis=0, first=0)
        >>> fill_rows(src, f32, 6, slice(0, 4), [q, k], scratch)  # columns 0:2 and 2:4 of (4, 6)
    """
    itemsize = dtype.itemsize
    per = max(1, scratch.nbytes // (row * itemsize))
    for b in range(rows.start, rows.stop, per):
        block = [t for t in (t.within(slice(b, min(rows.stop, b + per))) for t in targets) if t]
        if not block:
            continue
        lo, hi = stretch([view for view, _ in block])
        raw = scratch[: (hi - lo) * itemsize]
        src.read(lo * itemsize, raw)
        elements = raw.view(dtype)
        for i, (view, dest) in enumerate(block):
            strides = tuple(s * itemsize for s in view.strides)
            values = as_strided(elements[view.offset - lo :], view.shape, strides)
            copy_strided(dest, values, scratch_writable=i == len(block) - 1)


@dataclass(eq=False)
class OneTensorWork:
    """`Work` for the jobs of several leaves cut from one stored tensor: they finish together,
    once the last piece of work that lists them is read."""

    jobs: tuple[AdoptJob, ...]

    @property
    def where(self) -> str:
        return self.jobs[0].where

    @property
    def casts(self) -> bool:
        return any(job.casts for job in self.jobs)

    device_bytes = 0  # into buffers the devices adopt

    def mapped(self) -> MappedPart | None:
        return None  # read by a reader thread


@dataclass(eq=False)
class FusedRows(OneTensorWork):
    """Some stored rows of the tensor the jobs' leaves are cut from: read once, every leaf's
    piece of them filled (`fill_rows`). The bytes come from the first job's source (every job's
    is the same tensor's), so a speculative buffer is let go with the jobs, not kept by this."""

    info: TensorInfo
    targets: tuple[RowTarget, ...]
    rows: slice

    def read(self, scratch: np.ndarray) -> float:
        source = self.jobs[0].source
        assert source is not None, f"{self.where}: read after the job was finished"
        t0 = time.perf_counter()
        for target in self.targets:  # each piece whole once (blocks write strided parts of it)
            if self.rows.start <= target.first < self.rows.stop:
                prefault(target.dest)
        row = math.prod(self.info.shape[1:])
        fill_rows(source, self.info.np_dtype, row, self.rows, list(self.targets), scratch)
        return time.perf_counter() - t0


@dataclass(eq=False)
class FromMemory(OneTensorWork):
    """Leaves cut from a tensor read before the plan (a speculative buffer), each read through
    its own view in turn, so the buffer's budget (held by one of the jobs) is let go only once
    every one has read it."""

    def read(self, scratch: np.ndarray) -> float:
        return sum(job.read(part, scratch) for job in self.jobs for part in job.parts())


def _targets(job: AdoptJob, row: int) -> list[RowTarget] | None:
    """The job's pieces as row targets; None where its view does not step through stored rows
    one index at a time (it is read on its own, as before)."""
    view = job.view
    if view is None or job.read_already:
        return None
    k = row_axis(view, row)
    if k is None:
        return None
    targets = []
    for piece in job.pieces:
        if piece.dest.size == 0:
            continue
        region = piece.region
        piece_view = view.restrict(region)
        targets.append(RowTarget(piece_view, piece.dest, k, view.offset // row + region[k].start))
    return targets


def _overlap(groups: list[list[RowTarget]]) -> bool:
    """Whether two jobs' pieces hold some stored row in common (else each reads its own)."""
    spans = sorted((min(t.first for t in g), max(t.rows.stop for t in g)) for g in groups if g)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def fuse(
    jobs: list[Job[Any]], scratch_bytes: int, max_part_bytes: float = math.inf
) -> tuple[list[Work], list[Job[Any]]]:
    """(the reads shared by leaves cut from one stored tensor, every other job).

    Adopt jobs reading one tensor through views whose index along their outer axis is a stored
    row are grouped when two of them hold a row in common and a row fits `scratch_bytes`; each
    group's rows are cut into `FusedRows` of about `PART_BYTES` of the file (at most
    `max_part_bytes`, a whole row at least: `Sizing.max_part_bytes`). Where one of the
    jobs has the tensor read already (speculatively, before the plan), every job of the tensor
    reads from that buffer: as `FusedRows`, or else together (`FromMemory`), so the buffer's
    budget is held until the last of them is read.
    """
    by_tensor: dict[tuple[str, str], list[AdoptJob]] = {}
    rest: list[Job[Any]] = []
    for job in jobs:
        if (adopt := job.fusable) is not None:
            by_tensor.setdefault((adopt.file, adopt.info.name), []).append(adopt)
        else:
            rest.append(job)
    fused: list[Work] = []
    for group in by_tensor.values():
        if len(group) < 2:
            rest.extend(group)
            continue
        memory = next((j.source for j in group if j.from_speculation), None)
        for job in group if memory is not None else []:
            job.source, job.from_speculation = memory, True
        info = group[0].info
        row = math.prod(info.shape[1:])
        targets = [_targets(job, row) for job in group]
        found = [t for t in targets if t is not None]
        fits = row * info.np_dtype.itemsize <= scratch_bytes
        if fits and len(found) == len(group) and _overlap(found):
            row_bytes = row * info.np_dtype.itemsize
            part_bytes = min(PART_BYTES, max_part_bytes)
            fused += _parts(group, [t for ts in found for t in ts], row_bytes, part_bytes)
        elif memory is not None:
            fused.append(FromMemory(tuple(group)))
        else:
            rest.extend(group)
    return fused, rest


def _parts(
    jobs: list[AdoptJob], targets: list[RowTarget], row_bytes: int, part_bytes: float
) -> list[FusedRows]:
    """The group's stored rows cut into `FusedRows` of about `part_bytes` each (a row at
    least)."""
    first = min(t.first for t in targets)
    last = max(t.rows.stop for t in targets)
    per = max(1, int(part_bytes // max(row_bytes, 1)))
    return [
        FusedRows(tuple(jobs), jobs[0].info, tuple(targets), slice(b, min(last, b + per)))
        for b in range(first, last, per)
    ]
