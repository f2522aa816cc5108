"""Staged jobs: a sharded leaf read chunk by chunk through the staging ring onto its devices.

For a backend that does not adopt host buffers (`loader.pipeline.staging`). Each addressable
device's index region of the leaf (never the whole tensor, unless the leaf is replicated there) is
cut into chunks of at most one staging slot (`chunk_regions`: whole rows, or parts of one row when
a row is larger than a slot). A reader thread fills a slot with one chunk (cast on the host, chunk
by chunk, into the model's dtype), starts its transfer to the device at once and returns the slot
to the ring, which reuses it only once that transfer has completed. A device region of one chunk
is the transferred array itself; a larger one is assembled on its device by in-place updates of
one buffer (`dynamic_update_slice` with the buffer donated), so the device holds the shard and the
chunks in flight, never a second copy of the shard.

`Stager.received_bytes` / `expected_bytes` count, per device, the bytes transferred to it and the
bytes of its regions: equal unless something sent a device more than its shard.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import numpy as np

from loader.format import TensorInfo
from loader.materialize import assign
from loader.pipeline.device_oom import is_out_of_memory, oom_error
from loader.pipeline.jobs import LeafJob, device_regions, region_shape
from loader.pipeline.regions import Bytes, Region, fill_region
from loader.pipeline.ring_size import check_staging_budget
from loader.pipeline.staging import (
    StagingRing,
    Transfer,
    owned_chunk,
    staging_for,
    staging_ring,
)
from loader.planning import LoadPlan, Step
from loader.report import LoadReport

STAGED = "staged"


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
class StagedPiece:
    """One device's region of the leaf, and what has reached the device of it so far."""

    device: object
    region: Region
    dtype: np.dtype
    array: Any = None  # the device shard (or its buffer being assembled)
    pending: list[tuple[object, Region]] = field(default_factory=list)  # transfers not folded yet
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class StagedPart:
    """A unit of work for a reader thread: one chunk of one device's region."""

    job: StagedJob
    piece: StagedPiece
    region: Region


@dataclass
class StagedJob(LeafJob):
    """A leaf whose device regions are staged chunk by chunk (`kind == STAGED`)."""

    staged: list[StagedPiece] = field(default_factory=list)
    chunks: list[StagedPart] = field(default_factory=list)

    def staged_parts(self) -> list[StagedPart]:
        return list(self.chunks)


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


def _update(buffer: Any, chunk: Any, starts: tuple[int, ...]) -> tuple[Any, Any]:
    with _no_mesh():
        return _jit_update(buffer, chunk, starts)  # type: ignore[no-any-return]


@partial(jax.jit, donate_argnums=0)
def _jit_update(buffer: Any, chunk: Any, starts: tuple[int, ...]) -> tuple[Any, Any]:
    """`buffer` (donated: updated in place) with `chunk` at `starts`, and a token (one element
    of the chunk) that is ready once the update has run."""
    token = chunk[(0,) * chunk.ndim]
    return jax.lax.dynamic_update_slice(buffer, chunk, starts), token


class Stager:
    """Reads staged parts through `ring` and transfers them with `transfer`, counting bytes."""

    def __init__(self, ring: StagingRing, transfer: Transfer) -> None:
        self.ring, self.transfer = ring, transfer
        self.received_bytes: dict[str, int] = {}
        self.expected_bytes: dict[str, int] = {}
        self.transfer_s = 0.0
        self._lock = threading.Lock()
        self._compiled: set[tuple[object, ...]] = set()

    def job(self, step: Step, info: TensorInfo, source: Bytes, where: str) -> StagedJob:
        """The staged job of an adoptable step: its device regions, cut into chunks."""
        dtype = np.dtype(step.leaf.dtype)
        job = StagedJob(step, info, STAGED, source, source_file=where)
        for device, region in device_regions(step):
            piece = StagedPiece(device, region, dtype)
            job.staged.append(piece)
            nbytes = math.prod(region_shape(region)) * dtype.itemsize
            self._count(self.expected_bytes, device, nbytes)
            chunks = chunk_regions(region, dtype.itemsize, self.ring.slot_bytes) if nbytes else []
            job.chunks += [StagedPart(job, piece, r) for r in chunks]
            if len(chunks) > 1:
                self._prepare(piece, job, chunks)
        job.pending = len(job.chunks)
        return job

    def _prepare(self, piece: StagedPiece, job: LeafJob, chunks: list[Region]) -> None:
        """Make the shard's buffer, and compile its updates now, before any read: compiling
        needs host memory for a while, and no staging buffer is in use yet."""
        import jax.numpy as jnp

        _allocate(job, piece)
        for shape in {region_shape(r) for r in chunks}:
            key = (region_shape(piece.region), shape, piece.dtype.str, str(piece.device))
            if key not in self._compiled:
                self._compiled.add(key)
                with _no_mesh():
                    zero = jnp.zeros(shape, piece.dtype, device=piece.device)
                piece.array, _ = _update(piece.array, zero, (0,) * len(shape))

    def _count(self, table: dict[str, int], device: object, nbytes: int) -> None:
        with self._lock:
            table[str(device)] = table.get(str(device), 0) + nbytes

    def read(self, part: StagedPart, scratch: np.ndarray) -> float:
        """Fill a slot with the part's chunk, start its transfer; the seconds spent reading."""
        job, piece = part.job, part.piece
        slot = self.ring.take()
        handle = token = None
        try:
            chunk = slot.view(region_shape(part.region), piece.dtype)
            t0 = time.perf_counter()
            assert job.source is not None, f"{job.where}: read after the job was finished"
            fill_region(job.source, job.info.shape, job.info.np_dtype, part.region, chunk, scratch)
            t1 = time.perf_counter()
            whole = part.region == piece.region  # the shard itself: its array must own its bytes
            handle = self._send(owned_chunk(chunk, piece.device) if whole else chunk, piece, job)
            self.transfer_s += time.perf_counter() - t1
            self._count(self.received_bytes, piece.device, chunk.nbytes)
            with piece.lock:
                piece.pending.append((handle, part.region))
                token = _fold(piece, job, ready_only=True)
                folded = all(h is not handle for h, _ in piece.pending)
        finally:
            # reused once its transfer completed and, if its chunk was folded into the shard's
            # buffer just now, once that update ran (so chunks awaiting updates stay bounded too)
            self.ring.give_back(slot, token if token is not None and folded else handle)
        return t1 - t0

    def _send(self, chunk: np.ndarray, piece: StagedPiece, job: LeafJob) -> object:
        try:
            return self.transfer(chunk, piece.device)
        except Exception as exc:
            if is_out_of_memory(exc):
                raise oom_error(job, piece.device, chunk.nbytes) from exc
            raise

    def report(self, report: LoadReport) -> None:
        """Say in the load's report how it staged and what each device received."""
        report.staging_memory = self.ring.memory_kind
        report.staging_slots = self.ring.high_water_slots
        report.device_received_bytes = dict(self.received_bytes)
        report.device_expected_bytes = dict(self.expected_bytes)

    def finish(self, job: StagedJob, plan: LoadPlan) -> None:
        """Assemble each device's shard and give the leaf its value."""
        step = job.step
        arrays: list[Any] = []
        for piece in job.staged:
            with piece.lock:
                _fold(piece, job, ready_only=False)
            if piece.array is None:  # an empty region
                piece.array = jax.device_put(
                    np.zeros(region_shape(piece.region), piece.dtype), piece.device
                )
            arrays.append(piece.array)
        sharding: Any = step.sharding
        value = jax.make_array_from_single_device_arrays(step.leaf.shape, sharding, arrays)
        assign(step.leaf, value)
        job.staged.clear()
        job.chunks.clear()
        plan.report.loaded.append(step.leaf.key)


def make_stager(
    staging: bool | None, limit: int, threads: int, transfer: Transfer | None
) -> Stager | None:
    """The stager of a load that stages (`staging_for`), its ring sized from the budget; None
    for one that adopts host buffers."""
    if not staging_for(staging):
        return None
    return Stager(*staging_ring(check_staging_budget(limit, threads), transfer))


def _fold(piece: StagedPiece, job: LeafJob, *, ready_only: bool) -> object | None:
    """Move transferred chunks into the piece's device array (lock held); the token of the last
    update made (ready once it, and every update before it on that buffer, has run)."""
    keep, token = [], None
    for handle, region in piece.pending:
        if ready_only and not _is_ready(handle):
            keep.append((handle, region))
            continue
        array = _as_array(handle)
        if region == piece.region:
            piece.array = array
            continue
        if piece.array is None:
            _allocate(job, piece)
        starts = tuple(r.start - p.start for r, p in zip(region, piece.region))
        piece.array, token = _update(piece.array, array, starts)
    piece.pending = keep
    return token


def _zeros(piece: StagedPiece) -> jax.Array:
    """The shard's buffer, made on its device (owned by XLA, so the updates may donate it; an
    adopted host buffer cannot be donated: each update would copy the shard)."""
    import jax.numpy as jnp

    with _no_mesh():
        return jnp.zeros(region_shape(piece.region), piece.dtype, device=piece.device)


def _allocate(job: LeafJob, piece: StagedPiece) -> None:
    """Make the shard's buffer on its device; out of device memory, one error naming the tensor,
    the device and its free memory."""
    try:
        piece.array = _zeros(piece)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise oom_error(job, piece.device, _nbytes(piece)) from exc
        raise


def _nbytes(piece: StagedPiece) -> int:
    return math.prod(region_shape(piece.region)) * piece.dtype.itemsize


def _is_ready(handle: object) -> bool:
    is_ready = getattr(handle, "is_ready", None)
    return bool(is_ready()) if is_ready is not None else True


def _as_array(handle: object) -> Any:
    """The device array of a transfer (a fake transfer's `result()`, else the handle itself)."""
    result = getattr(handle, "result", None)
    return result() if callable(result) and not isinstance(handle, jax.Array) else handle
