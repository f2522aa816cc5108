"""The geometry of the staging ring's chunks: a device's region of a leaf cut into slot-sized boxes.

A `RingJob` (`loader.pipeline.ring_job`) holds one `DevicePiece` per addressable device: the index
region of the leaf that device holds (never the whole tensor unless the leaf is replicated there),
and what has reached the device of it so far. `chunk_regions` cuts a region into C-ordered boxes
of at most one ring slot (whole rows, or parts of one row when a row is larger than a slot); a
`Chunk` is one such box of one piece, the unit a reader fills a slot with. Where rows that several
pieces hold are read once for all of them (`Bytes.shares_rows`: a kernel split by columns, a
replicated leaf, over a URL), `shared_chunks` groups the pieces' chunks by the stored rows they
come from (`SharedChunks`): a block of rows fetched once into the reader's scratch, every piece's
chunks cut from it.

With a `PermutedBlock` (a leaf transposed on the device, `loader.Transpose`), the boxes are of the
block in the file's layout, and each knows where it lands in the shard (`DevicePiece.placement`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loader.pipeline.regions import Region, by_rows, region_shape
from loader.transforms.view import PermutedBlock


def chunk_regions(region: Region, itemsize: int, limit: int) -> list[Region]:
    """`region` cut into C-ordered boxes of at most `limit` bytes: blocks of whole rows, or, when
    one row is larger than `limit`, the same cut applied to each row one axis down."""
    shape = region_shape(region)
    if not shape or math.prod(shape) * itemsize <= limit:
        return [region]
    row_bytes = math.prod(shape[1:]) * itemsize
    first = region[0]
    if row_bytes > limit and len(shape) > 1:
        return [
            (slice(i, i + 1), *sub)
            for i in range(first.start, first.stop)
            for sub in chunk_regions(region[1:], itemsize, limit)
        ]
    per = max(1, limit // max(row_bytes, 1))
    return [
        (slice(b, min(first.stop, b + per)), *region[1:])
        for b in range(first.start, first.stop, per)
    ]


def even_chunks(region: Region, itemsize: int, limit: int) -> list[Region]:
    """`region` cut into blocks of whole rows of ONE shape, each at most `limit` bytes: the last
    block ends at the region's end and overlaps the one before it (those rows are sent twice,
    with the same bytes), so assembling the shard on its device needs one update program, not
    one per remainder. A row larger than `limit` is cut as `chunk_regions` cuts it."""
    shape = region_shape(region)
    if not shape or math.prod(shape) * itemsize <= limit:
        return [region]
    row_bytes = math.prod(shape[1:]) * itemsize
    if row_bytes > limit and len(shape) > 1:
        return chunk_regions(region, itemsize, limit)
    first, most = region[0], max(1, limit // max(row_bytes, 1))
    count = -(-(first.stop - first.start) // most)
    per = -(-(first.stop - first.start) // count)  # balanced: the overlap is under `count` rows
    starts = [first.start + i * per for i in range(count - 1)] + [first.stop - per]
    return [(slice(b, b + per), *region[1:]) for b in starts]


def contiguous_bytes(region: Region, shape: tuple[int, ...]) -> bool:
    """Whether `region` of a C-ordered tensor of `shape` is one run of bytes (whole trailing
    axes: blocks of whole rows, or one row's part where every later axis is whole)."""
    axis = next((a for a, s in enumerate(region) if s.stop - s.start != 1), len(region))
    # one index on each axis before `axis`, any run on `axis`, whole axes after it
    return all(t.start == 0 and t.stop == n for t, n in zip(region[axis + 1 :], shape[axis + 1 :]))


@dataclass
class DevicePiece:
    """One device's region of the leaf, and what has reached the device of it so far.

    With a `block` (a leaf transposed on the device), chunks are regions of the block, in the
    file's layout, and each is transposed into its place: by its transfer, where it went as a
    strided view of mapped pages (`on_host`), else by its update on the device. With `sent` (a
    leaf cast on its device), chunks arrive in that dtype (the file's) and are converted into
    `dtype` (the leaf's) there.
    """

    device: object
    region: Region
    dtype: np.dtype
    block: PermutedBlock | None = None
    sent: np.dtype | None = None
    array: Any = None  # the device shard (or its buffer being assembled)
    #: transfers not folded yet: (transfer, its region of the block, whether it was transposed
    #: on its way by the transfer itself: `placement`'s `on_host`)
    pending: list[tuple[object, Region, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def transposes(self) -> bool:
        return self.block is not None and self.block.transposes

    @property
    def arrives_as(self) -> np.dtype:
        """The dtype its chunks arrive in: the file's for a leaf cast on its device."""
        return self.dtype if self.sent is None else self.sent

    @property
    def converts(self) -> bool:
        """Whether its chunks are converted into the leaf's dtype on the device."""
        return self.arrives_as != self.dtype

    @property
    def source_region(self) -> Region:
        """The region as it is stored: of the block for a leaf transposed on the device."""
        return self.block.block_region(self.region) if self.block is not None else self.region

    def placement(self, region: Region, *, on_host: bool) -> tuple[Region, tuple[int, ...]]:
        """Where a chunk (a `source_region` box) goes in the shard: its leaf region, and the
        axes to transpose it by on the device (none: as stored, or already transposed by its
        transfer, `on_host`)."""
        if not self.transposes:
            return region, ()
        assert self.block is not None
        return self.block.leaf_region(region), () if on_host else self.block.perm

    def arriving_shape(self, region: Region, *, on_host: bool) -> tuple[int, ...]:
        """The shape of a chunk's array on the device: the box's, or its leaf region's where its
        transfer transposed it (`on_host`)."""
        target, _ = self.placement(region, on_host=on_host)
        return region_shape(target if on_host else region)

    def as_sent(self, box: np.ndarray) -> np.ndarray:
        """A box of the block as it is sent transposed on the host: a strided view in the leaf's
        axis order (no copy; the transfer arranges the bytes while it copies them)."""
        return box.transpose(self.block.perm) if self.block is not None and self.transposes else box


@dataclass(frozen=True)
class Chunk:
    """A part of a `RingJob`: one chunk of one device's region, at most one ring slot (a box of
    the stored block for a leaf transposed on the device)."""

    piece: DevicePiece
    region: Region

    @property
    def device_bytes(self) -> int:
        """The bytes it puts on its device (in the model's dtype)."""
        return math.prod(region_shape(self.region)) * self.piece.dtype.itemsize


@dataclass(frozen=True)
class SharedChunks:
    """A part of a `RingJob` from a remote source: rows of the stored tensor that several device
    pieces hold (column blocks span every row; replicas are all of it), fetched once into the
    reader's scratch, and each piece's share of them sent in chunks of at most one slot."""

    rows: slice
    chunks: tuple[Chunk, ...]

    @property
    def device_bytes(self) -> int:
        """The bytes its chunks put on their devices."""
        return sum(chunk.device_bytes for chunk in self.chunks)


def shared_chunks(
    pieces: list[DevicePiece], shape: tuple[int, ...], itemsize: int, scratch: int, slot: int
) -> list[SharedChunks]:
    """The pieces' stored rows (of their `source_region`s) cut into blocks that fit `scratch`
    (stored `shape`, `itemsize`), each with every piece's chunks of those rows; none where a
    stored row is larger than `scratch` (such a tensor goes piece by piece: a column block then
    reads only its own columns)."""
    row_bytes = math.prod(shape[1:]) * itemsize
    if not shape or row_bytes > scratch:
        return []
    per = max(1, scratch // max(row_bytes, 1))
    parts = []
    for (start, stop), group in by_rows([piece.source_region for piece in pieces]).items():
        for a in range(start, stop, per):
            rows = slice(a, min(stop, a + per))
            chunks = [
                Chunk(pieces[i], region)
                for i in group
                for region in chunk_regions(
                    (rows, *pieces[i].source_region[1:]), pieces[i].dtype.itemsize, slot
                )
                if math.prod(region_shape(region))
            ]
            parts.append(SharedChunks(rows, tuple(chunks)))
    return parts
