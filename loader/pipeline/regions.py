"""Fill a destination buffer with one index region of a stored tensor, in bounded chunks.

A stored tensor is C-ordered bytes at a file offset. Its rows (index along axis 0) are contiguous,
so a region is read a block of whole rows at a time into a per-thread scratch buffer, then the
region's columns are converted (`cast_into`) straight into the destination. When a single row is
larger than the scratch, the row itself is treated as a tensor one axis smaller. When the region is
whole rows and the dtype already matches, the bytes are read straight into the destination (no
scratch, no copy). Several destinations of the same rows (`fill_regions`: the column blocks of a
tensor split over devices, or its replicas) are filled from one read of those rows. The bytes come
from a `Bytes`: made by the load's byte source (`loader.pipeline.sources`: a local file, a remote
file's range requests), or a buffer read earlier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from loader.errors import CheckpointError
from loader.pipeline.cast import cast_into

Region = tuple[slice, ...]


class Bytes(Protocol):
    """Where a tensor's stored bytes come from (made by its `loader.pipeline.sources.ByteSource`,
    or a buffer read earlier).

    Attributes:
        shares_rows: rows that several destinations hold are read once for all of them
            (`fill_regions`), not per destination: each byte read again costs a request.
        maps: `mapped` hands out ranges as memory, with no copy (a local file's mapped pages, a
            buffer already read): the staged path sends such a range to its device as it is.
            False where every answer would be None (a URL's bytes; pages to be dropped from the
            page cache).
    """

    shares_rows: bool

    @property
    def maps(self) -> bool: ...

    def read(self, offset: int, out: np.ndarray) -> None:
        """Fill the uint8 array `out` with the bytes at `offset` (relative to the tensor)."""

    def mapped(self, offset: int, nbytes: int) -> np.ndarray | None:
        """The uint8 bytes at `offset` (relative to the tensor), `nbytes` long, as memory with
        no copy; None for a range it cannot hand out so (always None where not `maps`)."""


class MemoryBytes:
    """A tensor's bytes already in memory (a speculative read made before the plan)."""

    shares_rows = False  # reading a row again is a memory copy
    maps = True

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw.reshape(-1).view(np.uint8)

    def read(self, offset: int, out: np.ndarray) -> None:
        out[...] = self.raw[offset : offset + out.nbytes]

    def mapped(self, offset: int, nbytes: int) -> np.ndarray | None:
        return self.raw[offset : offset + nbytes]


def full_region(shape: tuple[int, ...]) -> Region:
    return tuple(slice(0, n) for n in shape)


def region_shape(region: Region) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in region)


def by_rows(regions: Sequence[Region], axis: int = 0) -> dict[tuple[int, int], list[int]]:
    """The indices of `regions`, grouped by the rows (along `axis`) they hold: jax's shardings
    are grids, so two device regions' rows are the same or disjoint (a 0-d region: row 0)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, region in enumerate(regions):
        rows = region[axis] if region else slice(0, 1)
        groups.setdefault((rows.start, rows.stop), []).append(i)
    return groups


def normalize(region: tuple[slice, ...], shape: tuple[int, ...]) -> Region:
    """Concrete `slice(start, stop)` per axis (jax gives `slice(None)` for a whole axis)."""
    out = []
    for s, n in zip(region, shape):
        start, stop, step = s.indices(n)
        if step != 1:
            raise CheckpointError(f"a device slice with step {step} cannot be read in place")
        out.append(slice(start, stop))
    return tuple(out) + full_region(shape[len(out) :])


Target = tuple[Region, np.ndarray]  # an index region of the stored tensor, and its destination


def fill_region(
    src: Bytes,
    shape: tuple[int, ...],
    dtype: np.dtype,
    region: Region,
    dst: np.ndarray,
    scratch: np.ndarray,
    offset: int = 0,
) -> None:
    """Write `region` of the stored tensor (`shape`, `dtype`, at `offset` in `src`) into `dst`."""
    fill_regions(src, shape, dtype, [(region, dst)], scratch, offset)


def fill_regions(
    src: Bytes,
    shape: tuple[int, ...],
    dtype: np.dtype,
    targets: list[Target],
    scratch: np.ndarray,
    offset: int = 0,
) -> None:
    """Write each target's region of the stored tensor into its destination, reading each stored
    byte they need once, however many targets hold it (the column blocks of a kernel split over
    several devices: every block spans all rows; a replicated leaf: every target is the whole).

    The targets' rows are read in spans (overlapping or adjacent row ranges merged): a block of
    whole rows at a time into `scratch`, each target's columns cut from it; a row larger than the
    scratch is read as a tensor one axis smaller; a target that is whole rows of the span in the
    file's dtype is read into straight, and the others cut from it (no scratch).

    Example:
        >>> fill_regions(src, (4, 8), f32, [((slice(0, 4), slice(0, 4)), left),
        ...                                 ((slice(0, 4), slice(4, 8)), right)], scratch)
    """
    if not shape:  # a 0-d tensor: one element
        shape, targets = (1,), [((slice(0, 1),), dst.reshape(1)) for _, dst in targets]
    for rows, group in _row_spans(targets):
        _fill_span(src, shape, dtype, rows, group, scratch, offset)


def _row_spans(targets: list[Target]) -> list[tuple[slice, list[Target]]]:
    """The targets grouped by their rows (axis 0): each span is a union of row ranges that
    overlap or touch, with the targets inside it; empty targets are left out."""
    spans: list[tuple[slice, list[Target]]] = []
    for region, dst in sorted(targets, key=lambda t: t[0][0].start):
        rows = region[0]
        if dst.size == 0:
            continue
        if spans and rows.start <= spans[-1][0].stop:
            last, group = spans[-1]
            spans[-1] = (slice(last.start, max(last.stop, rows.stop)), [*group, (region, dst)])
        else:
            spans.append((rows, [(region, dst)]))
    return spans


def _straight(target: Target, rows: slice, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """The target is the span's whole rows, in the file's dtype, contiguous: read into as is."""
    region, dst = target
    whole = region[0] == rows and region[1:] == full_region(shape[1:])
    return whole and dst.dtype == dtype and dst.flags.c_contiguous


def _fill_span(
    src: Bytes,
    shape: tuple[int, ...],
    dtype: np.dtype,
    rows: slice,
    targets: list[Target],
    scratch: np.ndarray,
    offset: int,
) -> None:
    """`fill_regions` for targets whose rows all lie in `rows`, read once."""
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    straight = next((t for t in targets if _straight(t, rows, shape, dtype)), None)
    if straight is not None:
        src.read(offset + rows.start * row_bytes, straight[1].reshape(-1).view(np.uint8))
        others = [t for t in targets if t is not straight]
        _cut(straight[1], rows.start, others, block_is_scratch=False)
        return
    if row_bytes > scratch.nbytes and len(shape) > 1:
        for i in range(rows.start, rows.stop):
            within = [(r[1:], d[i - r[0].start]) for r, d in targets if r[0].start <= i < r[0].stop]
            fill_regions(src, shape[1:], dtype, within, scratch, offset + i * row_bytes)
        return
    per = max(1, scratch.nbytes // max(row_bytes, 1))
    for b in range(rows.start, rows.stop, per):
        e = min(rows.stop, b + per)
        raw = scratch[: (e - b) * row_bytes]
        src.read(offset + b * row_bytes, raw)
        _cut(raw.view(dtype).reshape((e - b, *shape[1:])), b, targets, block_is_scratch=True)


def _cut(block: np.ndarray, first: int, targets: list[Target], *, block_is_scratch: bool) -> None:
    """Each target's part of `block` (the stored rows from `first` on), cast into its destination.
    The last target may overwrite a scratch block (`cast_into`'s in-place path): no other target
    reads it after."""
    end = first + len(block)
    for i, (region, dst) in enumerate(targets):
        rows = region[0]
        lo, hi = max(first, rows.start), min(end, rows.stop)
        if lo < hi:
            whole = region[1:] == full_region(block.shape[1:])
            cast_into(
                dst[lo - rows.start : hi - rows.start],
                block[(slice(lo - first, hi - first), *region[1:])],
                scratch_writable=whole and block_is_scratch and i == len(targets) - 1,
            )
