"""`RingJob`: a sharded leaf streamed chunk by chunk through the staging ring onto its devices.

For a backend that does not adopt host buffers (`loader.pipeline.ring`), or with `staging=True`.
Each addressable device's index region of the leaf (never the whole tensor, unless the leaf is
replicated there) is cut into chunks of at most one ring slot (`chunk_regions`: whole rows, or
parts of one row when a row is larger than a slot). A reader thread fills a slot with one chunk
(cast on the host, chunk by chunk, into the model's dtype), starts its transfer to the device at
once and returns the slot to the ring, which reuses it only once that transfer has completed. A
device region of one chunk is the transferred array itself; a larger one is assembled on its
device by in-place updates of one buffer (`dynamic_update_slice` with the buffer donated), so the
device holds the shard and the chunks in flight, never a second copy of the shard. From a remote
source, rows that several devices hold (a kernel split by columns, a replicated leaf) are fetched
once, a block of them in the reader's scratch, and every device's chunks cut from it
(`SharedChunks`): each byte crosses the link once.

A leaf with a declared transform that is a transpose of one contiguous block of the file tensor
(`loader.Transpose`, alone or with a `Reshape` or a leading `Slice`: `View.permuted_block`) travels
the same way in the FILE's layout: each chunk is a box of the block's contiguous rows, read without
a transposing copy on the host, and the update that writes it into the shard transposes it on the
device (`LoadReport.device_transposed` lists these leaves). A transpose in device memory runs near
the speed of a plain device copy, while on the host it is a second, slower pass over every byte.

`RingSender` is what the ring jobs of one load share: the ring, the transfer, and per device the
bytes transferred to it and the bytes of its regions (`received_bytes` / `expected_bytes`: equal
unless something sent a device more than its shard). A device that runs out of memory mid-load
raises one error naming the tensor, the device and its free memory (`DeviceOutOfMemoryError`; the
bench records it as an `oom` row of kind `device`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import numpy as np

from loader.errors import DeviceOutOfMemoryError
from loader.format import TensorInfo
from loader.pipeline.budget import check_staging_budget
from loader.pipeline.cast import cast_into
from loader.pipeline.jobs import by_rows, device_regions, region_shape
from loader.pipeline.regions import Bytes, Region, fill_region
from loader.pipeline.ring import StagingRing, Transfer, make_ring, owned_chunk, uses_ring
from loader.placement.materialize import assign
from loader.planning.plan import LoadPlan, Step
from loader.remote.ranges import RemoteBytes
from loader.report import LoadReport
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


@dataclass
class DevicePiece:
    """One device's region of the leaf, and what has reached the device of it so far.

    With a `block` (a leaf transposed on the device), chunks are regions of the block, in the
    file's layout, and each is transposed into its place by its update.
    """

    device: object
    region: Region
    dtype: np.dtype
    block: PermutedBlock | None = None
    array: Any = None  # the device shard (or its buffer being assembled)
    pending: list[tuple[object, Region]] = field(default_factory=list)  # transfers not folded yet
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def transposes(self) -> bool:
        return self.block is not None and self.block.transposes

    @property
    def source_region(self) -> Region:
        """The region as it is stored: of the block for a leaf transposed on the device."""
        return self.block.block_region(self.region) if self.block is not None else self.region

    def placement(self, region: Region) -> tuple[Region, tuple[int, ...]]:
        """Where a chunk (a `source_region` box) goes in the shard: its leaf region, and the
        axes to transpose it by on the device (none: as stored)."""
        if not self.transposes:
            return region, ()
        assert self.block is not None
        return self.block.leaf_region(region), self.block.perm


@dataclass(frozen=True)
class Chunk:
    """A part of a `RingJob`: one chunk of one device's region, at most one ring slot (a box of
    the stored block for a leaf transposed on the device)."""

    piece: DevicePiece
    region: Region


@dataclass(frozen=True)
class SharedChunks:
    """A part of a `RingJob` from a remote source: rows of the stored tensor that several device
    pieces hold (column blocks span every row; replicas are all of it), fetched once into the
    reader's scratch, and each piece's share of them sent in chunks of at most one slot."""

    rows: slice
    chunks: tuple[Chunk, ...]


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


@contextlib.contextmanager
def _no_mesh() -> Iterator[None]:
    """Outside any `jax.set_mesh` context: the updates run on one device, not the model's mesh
    (where this jax has no `set_mesh(None)`, as it is)."""
    try:
        context: AbstractContextManager[object] = jax.set_mesh(None)
        context.__enter__()
    except Exception:  # noqa: BLE001 - an older or newer jax without it: no mesh to leave
        yield
        return
    try:
        yield
    finally:
        context.__exit__(None, None, None)


def _update(
    buffer: Any, chunk: Any, starts: tuple[int, ...], perm: tuple[int, ...] = ()
) -> tuple[Any, Any]:
    with _no_mesh():
        updated: tuple[Any, Any] = _jit_update(buffer, chunk, starts, perm)
    return updated


@partial(jax.jit, donate_argnums=0, static_argnums=3)
def _jit_update(
    buffer: Any, chunk: Any, starts: tuple[int, ...], perm: tuple[int, ...]
) -> tuple[Any, Any]:
    """`buffer` (donated: updated in place) with `chunk` at `starts`, transposed by `perm` first
    if given (on the device), and a token (one element of the chunk) that is ready once the
    update has run."""
    token = chunk[(0,) * chunk.ndim]
    placed = jax.numpy.transpose(chunk, perm) if perm else chunk
    return jax.lax.dynamic_update_slice(buffer, placed, starts), token


class RingSender:
    """What the ring jobs of one load share: the ring, the transfer onto the devices, the bytes
    each device received against those of its regions, and the seconds spent starting transfers.

    Args:
        ring: the staging ring (its slots are the budget's, reserved up front).
        transfer: the host -> device copy of one chunk (`loader.pipeline.ring.Transfer`).
    """

    def __init__(self, ring: StagingRing, transfer: Transfer) -> None:
        self.ring, self.transfer = ring, transfer
        self.received_bytes: dict[str, int] = {}
        self.expected_bytes: dict[str, int] = {}
        self.transfer_s = 0.0
        self._lock = threading.Lock()
        self._compiled: set[tuple[object, ...]] = set()

    def count(self, table: dict[str, int], device: object, nbytes: int) -> None:
        with self._lock:
            table[str(device)] = table.get(str(device), 0) + nbytes

    def send(self, chunk: np.ndarray, piece: DevicePiece, where: str, *, whole: bool) -> object:
        """Start the chunk's transfer to the piece's device; the transfer's handle. A `whole`
        chunk is the shard itself, so its array must own its bytes (`owned_chunk`)."""
        t0 = time.perf_counter()
        try:
            handle = self.transfer(
                owned_chunk(chunk, piece.device) if whole else chunk, piece.device
            )
        except Exception as exc:
            if is_out_of_memory(exc):
                raise oom_error(where, piece.device, chunk.nbytes) from exc
            raise
        with self._lock:
            self.transfer_s += time.perf_counter() - t0
        self.count(self.received_bytes, piece.device, chunk.nbytes)
        return handle

    def compile_updates(self, piece: DevicePiece, chunks: list[Region]) -> None:
        """Compile the piece's in-place updates now, once per shape, before any read: compiling
        needs host memory for a while, and no ring slot is in use yet."""
        import jax.numpy as jnp

        for region in {region_shape(r): r for r in chunks}.values():
            shape = region_shape(region)
            _, perm = piece.placement(region)
            key = (region_shape(piece.region), shape, piece.dtype.str, str(piece.device), perm)
            if key not in self._compiled:
                self._compiled.add(key)
                with _no_mesh():
                    zero = jnp.zeros(shape, piece.dtype, device=piece.device)
                piece.array, _ = _update(piece.array, zero, (0,) * len(shape), perm)

    def report(self, report: LoadReport) -> None:
        """Say in the load's report how it staged and what each device received."""
        report.staging_memory = self.ring.memory_kind
        report.staging_slots = self.ring.high_water_slots
        report.device_received_bytes = dict(self.received_bytes)
        report.device_expected_bytes = dict(self.expected_bytes)

    def drain(self) -> None:
        """Wait for every transfer still reading a slot."""
        self.ring.drain()


def ring_sender(
    staging: bool | None, limit: int, threads: int, transfer: Transfer | None
) -> RingSender | None:
    """The ring sender of a load that goes through the ring (`uses_ring`), its ring sized from
    the budget; None for one whose host buffers the devices adopt."""
    if not uses_ring(staging):
        return None
    return RingSender(*make_ring(check_staging_budget(limit, threads), transfer))


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
        slot = sender.ring.slot_bytes
        for device, region in device_regions(step):
            job.pieces.append(DevicePiece(device, region, dtype, block))
            nbytes = math.prod(region_shape(region)) * dtype.itemsize
            sender.count(sender.expected_bytes, device, nbytes)
        if isinstance(source, RemoteBytes) and len(job.pieces) > 1:
            shape, itemsize = job.stored_shape, info.np_dtype.itemsize
            job.shared = shared_chunks(job.pieces, shape, itemsize, scratch_bytes, slot)
        for piece in job.pieces:
            if job.shared:
                chunks = [c.region for part in job.shared for c in part.chunks if c.piece is piece]
            elif math.prod(region_shape(piece.region)):
                chunks = chunk_regions(piece.source_region, dtype.itemsize, slot)
            else:
                chunks = []
            job.chunks += [Chunk(piece, r) for r in chunks]
            if len(chunks) > 1 or (chunks and piece.transposes):
                # assembled on the device: its buffer, and its updates compiled
                _allocate(piece, job.where)
                sender.compile_updates(piece, chunks)
        return job

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape the chunks are boxes of: the block's, or the file tensor's."""
        return self.block.block_shape if self.block is not None else self.info.shape

    @property
    def _offset(self) -> int:
        """Where the stored block starts, in bytes from the tensor's start."""
        return self.block.offset * self.info.np_dtype.itemsize if self.block else 0

    @property
    def transposed_on_device(self) -> bool:
        return self.block is not None and self.block.transposes

    @property
    def where(self) -> str:
        return f"{self.file}: tensor {self.step.file_key!r}"

    @property
    def casts(self) -> bool:
        return bool(np.dtype(self.step.leaf.dtype) != self.info.np_dtype)

    @property
    def holds_budget(self) -> bool:
        return False  # its slots are the ring's, reserved up front

    def parts(self) -> list[Chunk] | list[SharedChunks]:
        return list(self.shared) if self.shared else list(self.chunks)

    def read(self, part: Chunk | SharedChunks, scratch: np.ndarray) -> float:
        """Fill a slot with the chunk, start its transfer; the seconds spent reading (for
        `SharedChunks`: fetch their rows once into `scratch`, then send every chunk of them)."""
        source = self.source
        assert source is not None, f"{self.where}: read after the job was finished"
        if isinstance(part, SharedChunks):
            return self._read_shared(source, part, scratch)

        def fill(chunk: np.ndarray) -> None:
            shape, dtype = self.stored_shape, self.info.np_dtype
            fill_region(source, shape, dtype, part.region, chunk, scratch, self._offset)

        return self._send(part, fill)

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
            seconds += self._send(chunk, _copy_of(box))
        return seconds

    def _send(self, part: Chunk, fill: Callable[[np.ndarray], None]) -> float:
        """Fill a slot with the chunk (`fill`), start its transfer; the seconds `fill` took."""
        piece, ring = part.piece, self.sender.ring
        slot = ring.take()
        handle = token = None
        try:
            chunk = slot.view(region_shape(part.region), piece.dtype)
            t0 = time.perf_counter()
            fill(chunk)
            t1 = time.perf_counter()
            whole = part.region == piece.source_region and not piece.transposes
            handle = self.sender.send(chunk, piece, self.where, whole=whole)
            with piece.lock:
                piece.pending.append((handle, part.region))
                token = _fold(piece, self.where, ready_only=True)
                folded = all(h is not handle for h, _ in piece.pending)
        finally:
            # reused once its transfer completed and, if its chunk was folded into the shard's
            # buffer just now, once that update ran (so chunks awaiting updates stay bounded too)
            ring.give_back(slot, token if token is not None and folded else handle)
        return t1 - t0

    def finish(self, plan: LoadPlan) -> None:
        """Assemble each device's shard and give the leaf its value."""
        step = self.step
        arrays: list[Any] = []
        for piece in self.pieces:
            with piece.lock:
                _fold(piece, self.where, ready_only=False)
            if piece.array is None:  # an empty region
                piece.array = jax.device_put(
                    np.zeros(region_shape(piece.region), piece.dtype), piece.device
                )
            arrays.append(piece.array)
        sharding: Any = step.sharding
        value = jax.make_array_from_single_device_arrays(step.leaf.shape, sharding, arrays)
        assign(step.leaf, value)
        self.pieces.clear()
        self.chunks.clear()
        self.shared.clear()
        self.source = None
        plan.report.loaded.append(step.leaf.key)
        if self.transposed_on_device:
            plan.report.device_transposed.append(step.leaf.key)


def _copy_of(box: np.ndarray) -> Callable[[np.ndarray], None]:
    """Fill a slot's chunk with `box` (cast into the leaf's dtype)."""
    return lambda chunk: cast_into(chunk, box)


def _fold(piece: DevicePiece, where: str, *, ready_only: bool) -> object | None:
    """Move transferred chunks into the piece's device array (lock held); the token of the last
    update made (ready once it, and every update before it on that buffer, has run)."""
    keep, token = [], None
    for handle, region in piece.pending:
        if ready_only and not _is_ready(handle):
            keep.append((handle, region))
            continue
        array = _as_array(handle)
        target, perm = piece.placement(region)
        if target == piece.region and not perm:
            piece.array = array
            continue
        if piece.array is None:
            _allocate(piece, where)
        starts = tuple(r.start - p.start for r, p in zip(target, piece.region))
        piece.array, token = _update(piece.array, array, starts, perm)
    piece.pending = keep
    return token


def _zeros(piece: DevicePiece) -> jax.Array:
    """The shard's buffer, made on its device (owned by XLA, so the updates may donate it; an
    adopted host buffer cannot be donated: each update would copy the shard)."""
    import jax.numpy as jnp

    with _no_mesh():
        return jnp.zeros(region_shape(piece.region), piece.dtype, device=piece.device)


def _allocate(piece: DevicePiece, where: str) -> None:
    """Make the shard's buffer on its device; out of device memory, one error naming the tensor,
    the device and its free memory."""
    try:
        piece.array = _zeros(piece)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise oom_error(where, piece.device, _nbytes(piece)) from exc
        raise


def _nbytes(piece: DevicePiece) -> int:
    return math.prod(region_shape(piece.region)) * piece.dtype.itemsize


def _is_ready(handle: object) -> bool:
    is_ready = getattr(handle, "is_ready", None)
    return bool(is_ready()) if is_ready is not None else True


def _as_array(handle: object) -> Any:
    """The device array of a transfer (a fake transfer's `result()`, else the handle itself)."""
    result = getattr(handle, "result", None)
    return result() if callable(result) and not isinstance(handle, jax.Array) else handle


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def free_memory(device: object) -> str:
    """The device's free memory, as its allocator reports it ("unknown" where it does not)."""
    memory_stats = getattr(device, "memory_stats", None)
    try:
        stats = (memory_stats() if memory_stats is not None else None) or {}
    except Exception:  # noqa: BLE001 - a backend that cannot report it
        stats = {}
    if "bytes_limit" not in stats:
        return "unknown free memory"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return f"{free} bytes free of {int(stats['bytes_limit'])}"


def oom_error(where: str, device: object, nbytes: int) -> DeviceOutOfMemoryError:
    """A device out of memory, as one error naming the tensor, the device and its free memory."""
    return DeviceOutOfMemoryError(
        f"{where}: device {device} ran out of memory receiving {nbytes} bytes "
        f"({free_memory(device)})"
    )
