"""`RingJob`: a sharded leaf streamed chunk by chunk through the staging ring onto its devices.

For a backend that does not adopt host buffers (`loader.pipeline.ring`), or with `staging=True`.
Each addressable device's index region of the leaf is cut into chunks of one shape
(`loader.pipeline.ring_chunks.even_chunks`). Without a cast on the host (none, or one on the
device: `cast_shapes`), from a source that maps its bytes (a local file), a chunk goes straight
from its mapped pages to the device, a batch per put (`loader.pipeline.mapped_send`: `map_chunk`,
then `arrived`; no host copy): which chunks do is chosen once, when the job is made
(`RingJob.mapped` answers it for a queued part). Otherwise a reader thread fills a ring slot with
one chunk (cast on the host into the model's dtype; a cast from a local file by several readers
side by side, a `SlotShare` each: `slot_shares`), starts its transfer to the device at once
(`RingSender.send`) and returns the slot to the ring, which reuses it only once that transfer has
completed (and, where the chunk is folded into a larger shard, once that update has run:
`loader.pipeline.device_shards`, whose programs `loader.pipeline.programs` compiles once per shape,
ahead). Where the bytes share rows (`Bytes.shares_rows`: a remote source's), rows that several
devices hold (a kernel split by columns, a replicated leaf) are fetched once, a block of them in
the reader's scratch, and every device's chunks cut from it (`SharedChunks`): each byte crosses the
link once.

A leaf with a declared transform that is a transpose of one contiguous block of the file tensor
(`loader.Transpose`, alone or with a `Reshape` or a leading `Slice`: `View.permuted_block`) travels
the same way in the FILE's layout: each chunk is a box of the block's contiguous rows. From mapped
pages it is handed to `jax.device_put` as a strided view in the leaf's axis order, which the device
runtime transposes while it copies it (on a TPU v5e host a batch of such views went at 10.5 GB/s
against 11.0 GB/s as stored, with no device program; `LoadReport.transfer_transposed` lists these
leaves). Through a ring slot it is read without a transposing copy on the host, and the update
that writes it into the shard transposes it on the device (`LoadReport.device_transposed`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import ml_dtypes
import numpy as np

from loader.format import TensorInfo
from loader.pipeline import device_shards
from loader.pipeline.cast import cast_into
from loader.pipeline.jobs import AdoptJob, JobPart, MappedPart, Work, device_regions, tensor_where
from loader.pipeline.regions import (
    Bytes,
    Region,
    fill_region,
    full_region,
    region_shape,
)
from loader.pipeline.ring import RingSender, Slot
from loader.pipeline.ring import host_memory as device_is_host
from loader.pipeline.ring_chunks import (
    Chunk,
    DevicePiece,
    SharedChunks,
    contiguous_bytes,
    even_chunks,
    shared_chunks,
)
from loader.placement.materialize import assign
from loader.planning.keys import look_up
from loader.planning.plan import LoadPlan, Step
from loader.transforms.declared import Chain
from loader.transforms.view import PermutedBlock

#: A chunk of a leaf whose transfer transposes it (a strided view of mapped pages, in the leaf's
#: axis order) is at most this, so that twice as many of them are in flight within the budget as
#: plain chunks: the Llama-3-8B port on a TPU v5e host, interleaved, 64 MiB 2.69 s, 32 MiB 2.13 s
#: (16 and 8 MiB slower again; docs/results.md, "Eighth session").
TRANSPOSED_CHUNK_BYTES = 32 << 20
#: A leaf whose file dtype and model dtype are both among these may be cast on its device
#: (`cast_shapes`): its file bytes go straight from mapped pages, as for a plain load, and one
#: program per shape converts them there.
DEVICE_CASTS = frozenset(np.dtype(d) for d in (np.float32, np.float16, ml_dtypes.bfloat16))
#: ... where the leaves of its shape (and dtypes) hold at least this many bytes in the file:
#: enough to pay for the program. On a TPU v5e host the host's cast ran at about 4 GB/s of input
#: with 4 to 8 readers (memory-bound), the link carried file bytes at 11 GB/s, a conversion
#: program compiled in about 0.07 s, and the compiler's first use in a process took 0.5 s: sa3
#: (16 shapes, the largest 0.6 GiB in F32) cast on its device in 2.14 s against about 2 s on the
#: host, so its casts stay on the host; Llama-3-8B in F32 has five shapes of 1-14 GiB.
DEVICE_CAST_SHAPE_BYTES = 1 << 30
#: A reader's share of a slot it fills with others (`slot_shares`) is about this: a slot of one
#: 64 MiB piece is sixteen shares, enough for every reader of a host.
SHARE_BYTES = 4 << 20


@dataclass(eq=False)
class SlotFill:
    """A chunk cast on the host into its ring slot (a cast from a local file) by several readers
    side by side (a `SlotShare` each), so that a slot of one piece (as large as a mapped chunk: a
    cast leaf needs no device program a plain one would not) fills at the speed of all the
    readers, not one. The first share to start takes the slot; the last to finish starts the
    transfer (or, where one of them failed, gives the slot back unsent)."""

    chunk: Chunk
    left: int  # shares not finished yet
    slot: Slot | None = None
    failed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class SlotShare:
    """A part of a `RingJob`: rows of one chunk (a box of the stored block, `region`), at `index`
    in the chunk's slot view."""

    fill: SlotFill
    region: Region
    index: tuple[slice, ...]

    @property
    def device_bytes(self) -> int:
        """The bytes of its rows on the device (in the model's dtype)."""
        return math.prod(region_shape(self.region)) * self.fill.chunk.piece.dtype.itemsize


def slot_shares(chunk: Chunk, itemsize: int, share_bytes: int | None = None) -> list[SlotShare]:
    """The chunk cut into blocks of about `share_bytes` (default `SHARE_BYTES`) along its first
    axis longer than one (the axes before it hold one index, those after it are whole within the
    chunk, so each block is one run of the slot); one share where it is no larger."""
    share_bytes = share_bytes or SHARE_BYTES
    shape = region_shape(chunk.region)
    axis = next((a for a, n in enumerate(shape) if n > 1), None)
    nbytes = math.prod(shape) * itemsize
    count = 1 if axis is None else min(shape[axis], max(1, -(-nbytes // share_bytes)))
    fill = SlotFill(chunk, count)
    if count == 1 or axis is None:
        return [SlotShare(fill, chunk.region, tuple(slice(0, n) for n in shape))]
    per = -(-shape[axis] // count)
    first = chunk.region[axis].start
    shares = []
    for a in range(0, shape[axis], per):
        b = min(shape[axis], a + per)
        region = (*chunk.region[:axis], slice(first + a, first + b), *chunk.region[axis + 1 :])
        index = (*(slice(0, n) for n in shape[:axis]), slice(a, b))
        shares.append(SlotShare(fill, region, index))
    fill.left = len(shares)
    return shares


@dataclass(eq=False)
class RingJob:
    """An adoptable leaf whose device regions are streamed chunk by chunk through the ring (a
    `loader.pipeline.jobs.Job`); nothing is read speculatively on this path.

    With a `block` (a declared transform that is a transpose of one contiguous block of the file
    tensor), the chunks are read in the file's layout and transposed on their device.
    """

    step: Step
    info: TensorInfo
    source: Bytes | None  # None once the job is finished
    file: str
    sender: RingSender
    block: PermutedBlock | None = None
    pieces: list[DevicePiece] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    shared: list[SharedChunks] = field(default_factory=list)  # its parts, if rows are shared
    shares: list[SlotShare] = field(default_factory=list)  # its parts, if readers share slots
    needs_programs: bool = False  # a shard of it is assembled or transposed on its device
    transposed_by: set[str] = field(default_factory=set)  # "transfer", "device": who transposed
    #: id(chunk) -> (the chunk, its offset and bytes in the source) for each chunk that goes
    #: straight from mapped pages: chosen once, when the job is made (`mapped`)
    _from_pages: dict[int, tuple[Chunk, int, int]] = field(default_factory=dict, repr=False)
    cast_on_device: bool = False  # its file bytes are converted on its devices (`start`)
    fusable = None  # its chunks are its own: no rows read with other leaves

    @classmethod
    def start(
        cls,
        step: Step,
        info: TensorInfo,
        source: Bytes,
        file: str,
        sender: RingSender,
        *,
        block: PermutedBlock | None = None,
        scratch_bytes: int = 0,
    ) -> RingJob:
        """The job of an adoptable step: its device regions, cut into chunks of one slot; from
        a remote source, rows that several devices hold are fetched once for all of them, a
        block of them at a time in the reader's scratch (`scratch_bytes`; `SharedChunks`)."""
        job = cls(step, info, source, file, sender, block)
        dtype = np.dtype(step.leaf.dtype)
        regions = list(device_regions(step))
        job.cast_on_device = job._casts_on_device([device for device, _ in regions])
        sent = info.np_dtype if job.cast_on_device else None
        # straight from mapped pages: chunks up to `mapped_chunk_bytes`; through a ring slot: one
        limit = mapped_chunk_bytes(sender, block) if job.maps_pages else sender.slot_bytes
        for device, region in regions:
            piece = DevicePiece(device, region, dtype, block, sent)
            job.pieces.append(piece)
            nbytes = math.prod(region_shape(region)) * piece.arrives_as.itemsize
            sender.count(sender.expected_bytes, device, nbytes)
            sender.leaf_bytes += math.prod(region_shape(region)) * dtype.itemsize
        if source.shares_rows and len(job.pieces) > 1:
            shape, itemsize = job.stored_shape, info.np_dtype.itemsize
            job.shared = shared_chunks(job.pieces, shape, itemsize, scratch_bytes, limit)
        for piece in job.pieces:
            if job.shared:
                chunks = [c.region for part in job.shared for c in part.chunks if c.piece is piece]
            elif math.prod(region_shape(piece.region)):
                chunks = even_chunks(piece.source_region, piece.arrives_as.itemsize, limit)
            else:
                chunks = []
            job._add_chunks(piece, chunks)
        if job.casts and not job.cast_on_device and source.maps and not job.shared:
            # cast on the host by readers side by side
            job.shares = [s for c in job.chunks for s in slot_shares(c, dtype.itemsize)]
        return job

    def _add_chunks(self, piece: DevicePiece, regions: list[Region]) -> None:
        """The piece's chunks (boxes `regions`): which go straight from mapped pages, chosen now,
        and whether its shard needs a device program."""
        sender, itemsize = self.sender, piece.arrives_as.itemsize
        made = [Chunk(piece, r) for r in regions]
        sent = sum(math.prod(region_shape(r)) for r in regions) * itemsize
        overlap = sent - math.prod(region_shape(piece.region)) * itemsize
        if overlap > 0:
            sender.count(sender.resent_bytes, piece.device, overlap)
        self.chunks += made
        for chunk in made:
            if (at := self.mapped_chunk(chunk)) is not None:
                self._from_pages[id(chunk)] = (chunk, *at)
        on_host = all(id(c) in self._from_pages for c in made)  # all from mapped pages
        if device_shards.ask_programs(piece, regions, sender.programs, on_host=on_host):
            self.needs_programs = True

    @property
    def maps_pages(self) -> bool:
        """Whether its chunks may go straight from mapped file pages: no cast on the host, and a
        source that hands out memory (`loader.pipeline.regions.Bytes.maps`: a local file)."""
        host_cast = self.casts and not self.cast_on_device
        return not host_cast and self.source is not None and self.source.maps

    def _casts_on_device(self, devices: list[object]) -> bool:
        """Whether its file bytes are sent as stored and converted on its devices: a float cast
        of a shape that pays for its program (`cast_shapes`), from a local file onto
        accelerators, not transposed on its way. (On the CPU backend the device is the host: a
        cast there goes through the ring, whose slots bound what it holds.)"""
        source = self.source
        return (
            self.casts
            and source is not None
            and source.maps
            and not source.shares_rows
            and (self.block is None or not self.block.transposes)
            and not any(device_is_host(device) for device in devices)
            and cast_key(self.info, self.step) in self.sender.cast_shapes
        )

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape the chunks are boxes of: the block's, or the file tensor's."""
        return self.block.block_shape if self.block is not None else self.info.shape

    @property
    def _offset(self) -> int:
        """Where the stored block starts, in bytes from the tensor's start."""
        return self.block.offset * self.info.np_dtype.itemsize if self.block else 0

    @property
    def where(self) -> str:
        return tensor_where(self.file, self.step)

    @property
    def casts(self) -> bool:
        return bool(np.dtype(self.step.leaf.dtype) != self.info.np_dtype)

    @property
    def holds_budget(self) -> bool:
        return False  # its slots are the ring's, reserved up front

    @property
    def shard_bytes(self) -> int:
        return max((device_shards.shard_bytes(piece) for piece in self.pieces), default=0)

    def joins_run(self, small_bytes: int) -> AdoptJob | None:
        return None  # through the ring, not into an arena

    def parts(self) -> list[Chunk] | list[SharedChunks] | list[SlotShare]:
        if self.shares:
            return list(self.shares)
        return list(self.shared) if self.shared else list(self.chunks)

    def device_bytes(self, part: Chunk | SharedChunks | SlotShare) -> int:
        return part.device_bytes

    def mapped(self, work: JobPart[Chunk | SharedChunks | SlotShare]) -> MappedPart | None:
        """The part as a `MappedPart` where it is a chunk planned to go from mapped pages."""
        found = self._from_pages.get(id(work.part))
        return None if found is None else MappedPart(work, self, *found)

    def read(self, part: Chunk | SharedChunks | SlotShare, scratch: np.ndarray) -> float:
        """Read the chunk into a ring slot and start its transfer; the seconds spent reading. For
        `SharedChunks`: fetch their rows once into `scratch`, then send every chunk of them; for
        a `SlotShare`: fill its rows of its chunk's slot (`fill_share`). (A chunk that can go
        from mapped pages is never read: `loader.pipeline.mapped_send` sends it.)"""
        source = self.source
        assert source is not None, f"{self.where}: read after the job was finished"
        if isinstance(part, SharedChunks):
            return self._read_shared(source, part, scratch)
        if isinstance(part, SlotShare):
            return self.fill_share(source, part, scratch)
        return self.through_ring(part, scratch)

    def fill_share(self, source: Bytes, share: SlotShare, scratch: np.ndarray) -> float:
        """Cast the share's rows into its chunk's slot (taken by the first share to start); the
        last share to finish starts the chunk's transfer and gives the slot back with it. The
        seconds spent filling."""
        fill, ring = share.fill, self.sender.ring
        with fill.lock:  # the other shares of this chunk wait for the slot, and only they
            if fill.slot is None:
                fill.slot = ring.take(fill.chunk.device_bytes)
            slot = fill.slot
        chunk = slot.view(region_shape(fill.chunk.region), fill.chunk.piece.dtype)
        t0 = time.perf_counter()
        shape, dtype = self.stored_shape, self.info.np_dtype
        try:
            fill_region(
                source, shape, dtype, share.region, chunk[share.index], scratch, self._offset
            )
        except BaseException:
            fill.failed = True
            raise
        finally:
            seconds = time.perf_counter() - t0
            with fill.lock:
                fill.left -= 1
                last = fill.left == 0
            if last and fill.failed:
                ring.give_back(slot, None)
        if last and not fill.failed:
            self._send_slot(fill.chunk, slot, chunk)
        return seconds

    def _send_slot(self, part: Chunk, slot: Slot, chunk: np.ndarray) -> None:
        """Start the transfer of the chunk filled in `slot`, and give the slot back with it."""
        handle = token = None
        folded = False
        try:
            handle, token, folded = self._hand_over(part, chunk)
        finally:
            # reused once its transfer completed and, if its chunk was folded into the shard's
            # buffer just now, once that update ran (so chunks awaiting updates stay bounded too)
            self.sender.ring.give_back(slot, token if token is not None and folded else handle)

    def _read_shared(self, source: Bytes, part: SharedChunks, scratch: np.ndarray) -> float:
        """Fetch the part's rows into `scratch` once, then send every chunk cut from them."""
        t0 = time.perf_counter()
        shape, dtype = self.stored_shape, self.info.np_dtype
        first, n = part.rows.start, part.rows.stop - part.rows.start
        row_bytes = math.prod(shape[1:]) * dtype.itemsize
        raw = scratch[: n * row_bytes]
        source.read(self._offset + first * row_bytes, raw)
        rows = raw.view(dtype).reshape((n, *shape[1:]))
        seconds = time.perf_counter() - t0
        for chunk in part.chunks:
            r = chunk.region
            box = rows[(slice(r[0].start - first, r[0].stop - first), *r[1:])]
            seconds += self._through_slot(chunk, _copy_of(box))
        return seconds

    def _through_slot(self, part: Chunk, fill: Callable[[np.ndarray], None]) -> float:
        """Take a ring slot, `fill` it with the chunk, start its transfer and give the slot back
        with it; the seconds spent filling."""
        ring, dtype = self.sender.ring, part.piece.arrives_as  # (the file's, cast on the device)
        slot = ring.take(math.prod(region_shape(part.region)) * dtype.itemsize)
        chunk = slot.view(region_shape(part.region), dtype)
        t0 = time.perf_counter()
        try:
            fill(chunk)
        except BaseException:
            ring.give_back(slot, None)
            raise
        t1 = time.perf_counter()
        self._send_slot(part, slot, chunk)
        return t1 - t0

    def goes_mapped(self, region: Region) -> bool:
        """Whether a chunk of `region` goes straight from mapped pages: no cast on the host, a
        source that maps, and a region that is one run of bytes of the stored tensor."""
        return self.maps_pages and contiguous_bytes(region, self.stored_shape)

    def mapped_chunk(self, part: Chunk) -> tuple[int, int] | None:
        """(offset, bytes) of the chunk in the source where it can go from mapped pages
        (`goes_mapped`), else None."""
        if not self.goes_mapped(part.region):
            return None
        itemsize = self.info.np_dtype.itemsize
        first = 0  # the box's first element, in C order (Horner's rule over the axes)
        for s, n in zip(part.region, self.stored_shape):
            first = first * n + s.start
        nbytes = math.prod(region_shape(part.region)) * itemsize
        return self._offset + first * itemsize, nbytes

    def map_chunk(
        self, part: Chunk, offset: int, nbytes: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(the chunk, its mapped bytes) as a view of the source's mapped pages; None where the
        source declines to map the range. Its bytes of the budget are the caller's to admit
        (`loader.pipeline.mapped_send.send_batch` admits a batch's at once)."""
        assert self.source is not None, f"{self.where}: read after the job was finished"
        raw = self.source.mapped(offset, nbytes)
        if raw is None:
            return None
        box = raw.view(self.info.np_dtype).reshape(region_shape(part.region))
        return part.piece.as_sent(box), raw

    def through_ring(self, part: Chunk, scratch: np.ndarray) -> float:
        """Fill a ring slot with the chunk and start its transfer (a chunk whose mapping the
        source declined); the seconds spent reading."""
        source = self.source
        assert source is not None, f"{self.where}: read after the job was finished"

        def fill(chunk: np.ndarray) -> None:
            shape, dtype = self.stored_shape, self.info.np_dtype
            fill_region(source, shape, dtype, part.region, chunk, scratch, self._offset)

        return self._through_slot(part, fill)

    def _hand_over(self, part: Chunk, chunk: np.ndarray) -> tuple[object, object | None, bool]:
        """Start the chunk's transfer and fold what has arrived into the shard: (the transfer,
        the token of the last update made, whether this chunk was folded)."""
        piece = part.piece
        whole = self.is_whole(part, on_host=False)
        handle = self.sender.send(chunk, piece, self.where, whole=whole)
        return (handle, *self.arrived(part, handle, on_host=False))

    def is_whole(self, part: Chunk, *, on_host: bool) -> bool:
        """Whether the chunk is its device's whole shard as it arrives (its array is the shard):
        as stored, or transposed by its transfer (`on_host`: sent as a strided view)."""
        piece = part.piece
        return part.region == piece.source_region and (on_host or not piece.transposes)

    def arrived(self, part: Chunk, handle: object, *, on_host: bool) -> tuple[object | None, bool]:
        """Record the chunk's transfer (transposed by it where `on_host`) and fold what has
        arrived into the shard: (the token of the last update made, whether this chunk was
        folded)."""
        piece = part.piece
        if piece.transposes:
            self.transposed_by.add("transfer" if on_host else "device")
        with piece.lock:
            piece.pending.append((handle, part.region, on_host))
            token = self._fold(piece)
            folded = all(h is not handle for h, _, _ in piece.pending)
        return token, folded

    def _fold(self, piece: DevicePiece) -> object | None:
        """Fold what has arrived of the piece and may be folded now (`device_shards.fold`)."""
        sender = self.sender
        return device_shards.fold(
            piece, self.where, sender.programs, ready_only=True, defer_bytes=sender.defer_bytes
        )

    def fold_arrived(self) -> bool:
        """Fold every chunk whose transfer has completed into its shard (so a chunk does not stay
        on the device beside the shard it was copied into); whether none is left pending."""
        left = False
        for piece in self.pieces:
            with piece.lock:
                if piece.pending:
                    self._fold(piece)
                    left = left or bool(piece.pending)
        return not left

    def finish(self, plan: LoadPlan) -> None:
        """Assemble each device's shard and give the leaf its value."""
        step = self.step
        arrays: list[Any] = []
        for piece in self.pieces:
            with piece.lock:
                device_shards.fold(piece, self.where, self.sender.programs, ready_only=False)
            if piece.array is None:  # an empty region
                piece.array = jax.device_put(
                    np.zeros(region_shape(piece.region), piece.dtype), piece.device
                )
            arrays.append(piece.array)
        sharding: Any = step.sharding
        whole = arrays[0] if len(arrays) == 1 else None
        if whole is not None and is_leaf_as_placed(whole, step.leaf.shape, sharding):
            value = whole  # one shard that is the leaf: nothing to assemble
        else:
            value = jax.make_array_from_single_device_arrays(step.leaf.shape, sharding, arrays)
        assign(step.leaf, value)
        converted = any(piece.converts for piece in self.pieces)
        self.pieces.clear()
        self.chunks.clear()
        self.shared.clear()
        self.shares.clear()
        self.source = None
        plan.report.loaded.append(step.leaf.key)
        if converted:
            plan.report.device_cast.append(step.leaf.key)
        if "device" in self.transposed_by:
            plan.report.device_transposed.append(step.leaf.key)
        elif "transfer" in self.transposed_by:
            plan.report.transfer_transposed.append(step.leaf.key)


def _copy_of(box: np.ndarray) -> Callable[[np.ndarray], None]:
    """Fill a slot's chunk with `box` (cast into the leaf's dtype)."""
    return lambda chunk: cast_into(chunk, box)


def waits_for_program(work: Work) -> bool:
    """Whether a queued part waits for a device program (assembling or transposing on the
    device): such parts are read after most others, while their programs compile
    (`programs_before_tail`)."""
    return any(job.needs_programs for job in work.jobs)


def programs_before_tail(work: list[Work], tail_bytes: int, defer_bytes: int = 0) -> list[Work]:
    """The queue with the parts that wait for a device program after the others (read while
    their programs compile), but before the last `tail_bytes` or more of the others.

    A chunk of a leaf assembled on its device holds device memory beyond the model from its
    transfer until its update has run: with such chunks last, they are in flight when nearly
    all of the model is already on the device, and the device's peak is the model plus the bytes
    in flight (llama3-8b on a TPU v5e host: 1.018x the model). With plain chunks (each its leaf's
    whole shard, so nothing beyond the model) of at least `tail_bytes` after them, the assembled
    chunks travel while the device still lacks at least that much of the model (there: 1.000x,
    in the same time; docs/results.md, "Ninth session"). The parts keep their order within each
    group, and the parts of jobs that hold budgeted bytes stay first, as
    `loader.pipeline.order.part_order` put them (so a wait for budget always ends). Of the parts
    that wait for a program, those of shards larger than `defer_bytes` go last: such a shard is
    folded as its chunks land, compiled or not (`device_shards.fold`), and the smaller ones before
    it give its programs time to compile.
    """
    holding = [w for w in work if any(job.holds_budget for job in w.jobs)]
    rest = [w for w in work if not any(job.holds_budget for job in w.jobs)]
    plain = [w for w in rest if not waits_for_program(w)]
    assembled = [w for w in rest if waits_for_program(w)]
    assembled.sort(key=lambda w: shard_bytes(w) > defer_bytes)  # stable: in order within each
    cut, tail = len(plain), 0
    while cut > 0 and tail < tail_bytes:
        cut -= 1
        tail += plain[cut].device_bytes
    return [*holding, *plain[:cut], *assembled, *plain[cut:]]


def shard_bytes(work: Work) -> int:
    """The bytes of the largest device shard of a queued part's leaves."""
    return max((job.shard_bytes for job in work.jobs), default=0)


def is_leaf_as_placed(array: Any, shape: tuple[int, ...], sharding: Any) -> bool:
    """Whether a device array already is the leaf: its shape, placed as the leaf's sharding says."""
    return (
        sharding is not None
        and tuple(array.shape) == tuple(shape)
        and array.sharding.is_equivalent_to(sharding, len(shape))
    )


CastKey = tuple[tuple[int, ...], str, str]


def cast_key(info: TensorInfo, step: Step) -> CastKey:
    """A leaf's shape as stored, its file dtype and its model dtype: what one program converts."""
    return tuple(info.shape), info.np_dtype.str, np.dtype(step.leaf.dtype).str


def cast_shapes(steps: list[Step], info: Callable[[str], TensorInfo]) -> set[CastKey]:
    """The casts of a load done on the device (`cast_key`s): float leaves (`DEVICE_CASTS`) whose
    shape holds at least `DEVICE_CAST_SHAPE_BYTES` of the file in all. The device converts as
    `astype` does (round to nearest, ties to even), bit for bit with the host's cast except where
    a device flushes subnormals (a TPU)."""
    totals: dict[CastKey, int] = {}
    for step in steps:
        stored, dtype = info(step.file_key), np.dtype(step.leaf.dtype)
        if stored.np_dtype != dtype and {stored.np_dtype, dtype} <= DEVICE_CASTS:
            key = cast_key(stored, step)
            totals[key] = totals.get(key, 0) + stored.nbytes
    return {key for key, nbytes in totals.items() if nbytes >= DEVICE_CAST_SHAPE_BYTES}


def mapped_chunk_bytes(sender: RingSender, block: PermutedBlock | None) -> int:
    """The largest chunk of a leaf sent straight from mapped pages: the sender's `chunk_bytes`, at
    most `TRANSPOSED_CHUNK_BYTES` where its transfer transposes it (a `block` that transposes)."""
    if block is not None and block.transposes:
        return min(sender.chunk_bytes, TRANSPOSED_CHUNK_BYTES)
    return sender.chunk_bytes


def warm_programs(sender: RingSender, infos: list[TensorInfo], key_map: object = None) -> None:
    """Start compiling, while the model is built, the programs that the tensors larger than a
    mapped chunk will need if the model takes them as stored (same dtype, unsharded, on the one
    local device), or as the `key_map` declares where its entry is a transpose of the whole
    tensor (a port's kernels, whose chunks arrive transposed: `likely_blocks`): the usual case
    of a model on one accelerator. Where the model differs, the programs it needs are asked for
    later, and these go unused."""
    devices = jax.local_devices()
    if len(devices) != 1:
        return
    blocks = likely_blocks(key_map, {info.name: info for info in infos})
    for info in infos:
        dtype = info.np_dtype
        for block in blocks.get(info.name, [None]):
            limit = mapped_chunk_bytes(sender, block)
            if math.prod(info.shape) * dtype.itemsize <= limit:
                continue  # sent whole: its array is the leaf
            shape = info.shape if block is None else block.leaf_shape
            piece = DevicePiece(devices[0], full_region(shape), dtype, block)
            chunks = even_chunks(piece.source_region, dtype.itemsize, limit)
            device_shards.ask_programs(piece, chunks, sender.programs, on_host=True)


def likely_blocks(key_map: object, infos: dict[str, TensorInfo]) -> dict[str, list[PermutedBlock]]:
    """File tensor -> the transposes of the whole tensor that a `key_map` (a mapping) declares of
    it: entries `(file_key, transform)` whose declared transform is one. A callable key_map, or
    any other entry, declares none here (its leaves' programs are asked for when their jobs are
    made)."""
    blocks: dict[str, list[PermutedBlock]] = {}
    if not isinstance(key_map, Mapping):
        return blocks
    for key in key_map:
        try:
            found = look_up(str(key), set(infos), key_map)
            chain = found.transform if found.file_key in infos else None
            stored = infos[found.file_key].shape if chain is not None else ()
            view = chain.view(stored) if isinstance(chain, Chain) else None
        except Exception:  # noqa: BLE001 - a bad entry is the plan's to report, not a warm-up's
            continue
        block = view.permuted_block() if view is not None else None
        if block and block.transposes and block.offset == 0 and block.block_shape == stored:
            blocks.setdefault(found.file_key, []).append(block)
    return blocks
