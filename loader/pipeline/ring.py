"""The staging ring and the mapped route: how a chunk reaches a device that does not adopt host
memory.

On a GPU or TPU a `jax.device_put` copies host bytes into device memory, so a host buffer is only
a staging copy: it must live until its transfer has completed, and no longer. Two routes:

- **Mapped** (a local file, no cast on the host): the chunk's bytes are a read-only view of the
  file's mapped pages (a window of them, `loader.pipeline.file_pages`), handed to `jax.device_put`
  as they are, with no host copy, a batch of them per call (`loader.pipeline.mapped_send`,
  `RingSender.send_many`); the view holds its bytes of the budget until the transfer completes,
  then goes (`MappedFlight`). A host whose
  first touch of fresh anonymous memory is slow (a sandbox such as gVisor faults each page in
  through its own kernel) copies nothing this way, and several transfers in flight keep the link
  busy (one `device_put` at a time carries about half of what several do on a TPU v5e host; see
  docs/results.md).
- **The ring** (casts, remote reads, regions that are not one run of bytes): one arena, allocated
  on first use (its bytes taken from the budget for good), handed out as slots of the bytes each
  chunk needs (a piece at most), so the arena bounds the bytes staged, not the number of chunks;
  a reader takes a slot, fills it with one chunk (cast on the host; a cast from a local file
  by several readers side by side, `loader.pipeline.ring_job.SlotShare`), starts the transfer and
  hands the slot back with the transfer. Its bytes are given out again only once that transfer
  `is_ready()` (or after `block_until_ready()`, when the arena is full): a reused slot never
  changes bytes a transfer is still reading.

Memory: the slots are pageable. JAX's `pinned_host` memory is no faster route: filling it from
numpy goes through `jax.device_put`, a second copy that ran at about 1 GB/s on a TPU v5e host
(where pageable transfers ran at 13 GB/s with four in flight). On the CPU backend (staging forced
with `staging=True`) a device array borrows its slot until the update that copies it into the
shard has run (see `pageable_transfer`): the host then holds the model, the ring and the scratch,
and no transfer copies beside them.

`backend_adopts_host_buffers()` says whether a load needs this path (`uses_ring`): the CPU backend
adopts aligned host buffers (a destination buffer is then the model's own memory), others do not.
`loader.pipeline.ring_job.RingJob` is a leaf that travels this way; `RingSender` is what the ring
jobs of one load share: the routes, the device programs (`loader.pipeline.programs`), and per
device the bytes transferred to it and the bytes of its regions (`received_bytes` /
`expected_bytes`: equal unless something sent a device more than its shard), and of the former
the rows sent twice by design (`resent_bytes`: the last chunk of a leaf overlaps the one before
it, `loader.pipeline.ring_chunks.even_chunks`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import jax
import numpy as np

from loader.budget import ByteBudget
from loader.format.buffers import aligned, host_buffer  # slots: `aligned` (tests count its calls)
from loader.pipeline import device_shards
from loader.pipeline.programs import DevicePrograms
from loader.pipeline.ring_chunks import DevicePiece
from loader.report import LoadReport

#: `LoadReport.staging_memory`: chunks went through pageable ring slots (casts, remote reads), or
#: all of them straight from the file's mapped pages.
PAGEABLE, MAPPED = "pageable", "mapped"
PAGE = 4096  # the least a mapped chunk is cut to where a device has little room
#: A load whose leaves are cast on their device keeps the device's peak within this share of the
#: model's bytes over the model (`RingSender.cast_cap`).
CAST_PEAK_SLACK = 0.01
#: A transfer: (host chunk, device) -> a device array (or anything with `is_ready` and
#: `block_until_ready`). Tests pass a fake that completes late.
Transfer = Callable[[np.ndarray, object], object]


def backend_adopts_host_buffers() -> bool:
    """True on the CPU backend, whose device arrays may alias host buffers (no staging needed)."""
    return jax.default_backend() == "cpu"


def host_memory(device: object) -> bool:
    """Whether `device`'s memory is the host's (the CPU backend's devices)."""
    return getattr(device, "platform", "cpu") == "cpu"


def pageable_transfer(chunk: np.ndarray, device: object) -> object:
    """Copy `chunk` to `device` (asynchronous on an accelerator). On the CPU backend the device
    array borrows the slot itself (no copy, and ready at once): the slot is reused only once the
    update that copied it into the shard's buffer has run (`RingJob.read`), and a chunk that is a
    whole shard is handed over as its own copy (`owned_chunk`)."""
    if host_memory(device):
        return jax.device_put(chunk, device).block_until_ready()
    return jax.device_put(chunk, device)


def owned_chunk(chunk: np.ndarray, device: object) -> np.ndarray:
    """The chunk to transfer when it is a whole shard: on the CPU backend, whose device array
    borrows host memory, a fresh aligned copy that becomes the model's own (the slot is then free
    at once); elsewhere the slot itself, which the transfer copies to the device."""
    if not host_memory(device):
        return chunk
    copy = host_buffer(chunk.shape, chunk.dtype)  # the model's memory, not a ring slot
    np.copyto(copy, chunk)
    return copy


@dataclass
class Slot:
    """One staging buffer: `nbytes` of the ring's arena from `offset` on (page-aligned)."""

    offset: int
    raw: np.ndarray  # uint8: the arena's bytes [offset, offset + its length)
    transfer: object | None = None  # the transfer reading it, until it has completed

    def view(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.raw[:n].view(dtype).reshape(shape)


def _rounded(nbytes: int) -> int:
    """`nbytes` up to whole pages (each slot starts page-aligned: the CPU backend adopts it)."""
    return max(PAGE, -(-int(nbytes) // PAGE) * PAGE)


class StagingRing:
    """One arena of `nbytes` host bytes, handed out as slots of the bytes each chunk needs;
    `take(n)` blocks until a run of `n` is free. The arena bounds the bytes staged at once, not
    how many chunks: a leaf of a few kilobytes takes a page, not a whole piece, so the small
    tensors of a cast travel many at a time beside the large ones.

    Free runs are kept in address order and merged when freed; a slot goes first-fit. A chunk is
    at most `slot_bytes` (one piece), which an empty arena always holds.

    Attributes:
        high_water_slots: most slots out at once (taken, or in flight).
        high_water_bytes: most arena bytes out at once.
    """

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.slot_bytes = _rounded(slot_bytes) if slot_bytes else 0
        self._arena = aligned((max(1, slots) * self.slot_bytes,), np.dtype(np.uint8))
        self._runs: list[list[int]] = [[0, len(self._arena)]]  # free [start, end), by address
        self._flight: deque[Slot] = deque()  # oldest first
        self._cond = threading.Condition()
        self._out = self._out_bytes = 0
        self.high_water_slots = self.high_water_bytes = 0

    @property
    def nbytes(self) -> int:
        return len(self._arena)

    def take(self, nbytes: int | None = None) -> Slot:
        """A slot of `nbytes` (default one piece) no transfer is reading: free bytes, else those
        of the oldest transfers in flight once they are done."""
        need = _rounded(self.slot_bytes if nbytes is None else nbytes)
        if need > self.nbytes:
            raise ValueError(f"a staging slot of {need} bytes exceeds the ring's {self.nbytes}")
        while True:
            with self._cond:
                self._reap()
                slot = self._carve(need)
                if slot is not None:
                    return slot
                if not self._flight:  # the arena is being filled by other readers
                    self._cond.wait(0.05)
                    continue
                oldest = self._flight.popleft()
            _wait(oldest.transfer)  # outside the lock: other readers may reap meanwhile
            with self._cond:
                oldest.transfer = None
                self._free(oldest)

    def _carve(self, need: int) -> Slot | None:
        """The first free run of `need` bytes, as a slot (lock held); None where none is."""
        for run in self._runs:
            start, end = run
            if end - start >= need:
                run[0] = start + need
                if run[0] == end:
                    self._runs.remove(run)
                self._out += 1
                self._out_bytes += need
                self.high_water_slots = max(self.high_water_slots, self._out)
                self.high_water_bytes = max(self.high_water_bytes, self._out_bytes)
                return Slot(start, self._arena[start : start + need])
        return None

    def _free(self, slot: Slot) -> None:
        """Its bytes back into the free runs, merged with their neighbours (lock held)."""
        start, end = slot.offset, slot.offset + len(slot.raw)
        self._out -= 1
        self._out_bytes -= end - start
        runs = self._runs
        at = next((i for i, run in enumerate(runs) if run[0] >= end), len(runs))
        if at < len(runs) and runs[at][0] == end:
            runs[at][0] = start
        else:
            runs.insert(at, [start, end])
        if at > 0 and runs[at - 1][1] == runs[at][0]:
            runs[at - 1][1] = runs[at][1]
            del runs[at]
        self._cond.notify_all()

    def _reap(self) -> None:
        """Slots whose transfers have completed go back to the free runs (lock held)."""
        for slot in [s for s in self._flight if _ready(s.transfer)]:
            self._flight.remove(slot)
            slot.transfer = None
            self._free(slot)

    def give_back(self, slot: Slot, transfer: object | None) -> None:
        """Return `slot`; with `transfer`, its bytes are reused only once that transfer has
        completed."""
        with self._cond:
            if transfer is None:
                self._free(slot)
            else:
                slot.transfer = transfer
                self._flight.append(slot)
            self._cond.notify_all()

    def drain(self) -> None:
        """Wait for every transfer still reading a slot."""
        with self._cond:
            flight = list(self._flight)
        for slot in flight:
            _wait(slot.transfer)
        with self._cond:
            self._reap()


def _ready(transfer: object) -> bool:
    is_ready = getattr(transfer, "is_ready", None)
    return bool(is_ready()) if is_ready is not None else True


def _wait(transfer: object) -> None:
    block = getattr(transfer, "block_until_ready", None)
    if block is not None:
        block()


def uses_ring(staging: bool | None) -> bool:
    """Whether a load goes through the ring: as `staging=` asks, or (None) where the backend does
    not adopt host buffers."""
    return (not backend_adopts_host_buffers()) if staging is None else bool(staging)


class RingSender:
    """What the ring jobs of one load share: the transfer onto the devices, the staging ring (made
    on first use), the chunks in flight from mapped file pages, the device programs, the bytes each
    device received against those of its regions, and the seconds spent starting transfers.

    Args:
        layout: the ring's (slots, slot bytes), from `loader.pipeline.sizing.Sizing`; the ring is
            made, and its bytes taken from `budget` for good, when a chunk first needs a slot (a
            cast, a remote read, a region that is not one run of bytes): a load whose chunks all go
            straight from mapped pages never allocates it.
        chunk_bytes: the largest piece, sent straight from mapped pages or through a ring slot
            (`Sizing.chunk_bytes`).
        budget: the load's budget (mapped chunks hold their bytes of it while in flight).
        flight_bytes: the most bytes of mapped chunks in flight at once (`Sizing.flight_bytes`;
            None: as many as the budget holds).
        transfer: the host -> device copy of one chunk (`loader.pipeline.ring.Transfer`).
        compile_threads: the threads compiling the device programs (`Sizing.compile_threads`).
    """

    def __init__(
        self,
        layout: tuple[int, int],
        chunk_bytes: int,
        budget: ByteBudget,
        transfer: Transfer | None = None,
        *,
        compile_threads: int,
        flight_bytes: int | None = None,
    ) -> None:
        self.layout, self.chunk_bytes, self.budget = layout, chunk_bytes, budget
        self.transfer: Transfer = transfer or pageable_transfer
        self.flight = MappedFlight(budget, flight_bytes or None)
        self.programs = DevicePrograms(compile_threads)
        #: a shard of at most this many bytes may leave its chunks pending on its device while
        #: the programs that assemble it compile (`device_shards.fold`): what `fit` finds the
        #: device holds beside the model and the chunks in flight; 0 where it does not say, or
        #: its arrays borrow host memory
        self.defer_bytes = 0
        self.received_bytes: dict[str, int] = {}
        self.expected_bytes: dict[str, int] = {}
        #: the leaves' bytes (in the model's dtypes) the jobs will send, and those sent so far
        self.leaf_bytes = self.sent_leaf_bytes = 0
        #: the casts done on the devices (`loader.pipeline.ring_job.cast_shapes`), set by the
        #: engine before the jobs are made
        self.cast_shapes: set[tuple[tuple[int, ...], str, str]] = set()
        self.resent_bytes: dict[str, int] = {}
        self.transfer_s = 0.0
        self._lock = threading.Lock()
        self._ring_lock = threading.Lock()
        self._ring: StagingRing | None = None

    @property
    def slot_bytes(self) -> int:
        """A ring slot's bytes: one piece (smaller where the device has little room, `fit`)."""
        return min(self.layout[1], self.chunk_bytes)

    @property
    def ring(self) -> StagingRing:
        """The staging ring, made on first use (its bytes taken from the budget for good)."""
        with self._ring_lock:
            if self._ring is None:
                slots, slot_bytes = self.layout[0], self.slot_bytes
                self._ring = StagingRing(slots, slot_bytes)
                self.flight.take_budget(self._ring.nbytes)
            return self._ring

    def fit(self, need: dict[object, int]) -> None:
        """Before a byte is read: check that each device has the memory for its share of the model
        (`need`, bytes per device), raising one `DeviceOutOfMemoryError` naming both figures where
        not; and keep what is in flight on a device within half of what the model leaves free
        there (mapped chunks smaller, and fewer at once, where that is little); the other half
        is what a shard may hold of it beside its own chunks, folded late (`defer_bytes`)."""
        headroom = None
        for device, nbytes in need.items():
            free = device_shards.free_bytes(device)
            if free is None:  # a backend that does not say (the CPU's)
                continue
            if nbytes > free:
                raise device_shards.model_too_large(device, nbytes, free)
            headroom = free - nbytes if headroom is None else min(headroom, free - nbytes)
        if headroom is not None:
            cap = max(PAGE, headroom // 2)
            self.chunk_bytes = min(self.chunk_bytes, max(PAGE, cap // 4 // PAGE * PAGE))
            self.flight.device_cap = min(cap, self.flight.device_cap or cap)
            # (on the CPU backend a chunk may borrow a ring slot, reused once it is folded)
            if not any(host_memory(device) for device in need):
                self.defer_bytes = max(0, headroom - cap)

    def cast_cap(self, batch_leaf_bytes: int, ratio: float) -> float | None:
        """The most bytes in flight before a batch of chunks cast on their device whose file
        dtype is `ratio` times as wide as the leaf's (2 for float32 into bfloat16) and that
        make `batch_leaf_bytes` of leaves; None: no bound (a cast that widens or keeps the size).

        A chunk in flight holds its file bytes on the device until converted, beside the leaves
        already there; so that the device's peak stays within `CAST_PEAK_SLACK` of the model's
        (the leaves yet to come leave room for it early in the load, none at its end), the
        bytes in flight `T` keep `T * (ratio - 1) / ratio <= left + slack`, with `left` the leaf
        bytes not sent yet after this batch."""
        if ratio <= 1:
            return None
        with self._lock:
            left = max(0, self.leaf_bytes - self.sent_leaf_bytes - batch_leaf_bytes)
            slack = CAST_PEAK_SLACK * self.leaf_bytes
        return (left + slack) * ratio / (ratio - 1)

    def count(self, table: dict[str, int], device: object, nbytes: int) -> None:
        with self._lock:
            table[str(device)] = table.get(str(device), 0) + nbytes

    def send(self, chunk: np.ndarray, piece: DevicePiece, where: str, *, whole: bool) -> object:
        """Start the chunk's transfer to the piece's device; the transfer's handle. A `whole`
        chunk is the shard itself, so its array must own its bytes (`owned_chunk`)."""
        with self._starting(where, piece.device, chunk.nbytes):
            handle = self.transfer(
                owned_chunk(chunk, piece.device) if whole else chunk, piece.device
            )
        self.count(self.received_bytes, piece.device, chunk.nbytes)
        self._sent_leaf(chunk.size * piece.dtype.itemsize)
        return handle

    def _sent_leaf(self, nbytes: int) -> None:
        with self._lock:
            self.sent_leaf_bytes += nbytes

    def send_many(self, chunks: list[tuple[np.ndarray, DevicePiece, str, bool]]) -> list[object]:
        """Start the transfers of (chunk, piece, where, whole) with one `jax.device_put` of the
        list onto an accelerator (the Python cost of a put is paid once for the batch, see
        `loader.pipeline.mapped_send`); one `send` each on the CPU backend or with a test's
        transfer. The transfers' handles, in order."""
        if not chunks:
            return []
        if self.transfer is not pageable_transfer or any(
            host_memory(piece.device) for _, piece, _, _ in chunks
        ):
            return [self.send(c, piece, where, whole=whole) for c, piece, where, whole in chunks]
        where = chunks[0][2] if len(chunks) == 1 else f"{chunks[0][2]} to {chunks[-1][2]}"
        nbytes = sum(c.nbytes for c, *_ in chunks)
        with self._starting(where, chunks[0][1].device, nbytes):
            handles: list[object] = jax.device_put(
                [c for c, _, _, _ in chunks], [piece.device for _, piece, _, _ in chunks]
            )
        for c, piece, _, _ in chunks:
            self.count(self.received_bytes, piece.device, c.nbytes)
            self._sent_leaf(c.size * piece.dtype.itemsize)
        return handles

    @contextlib.contextmanager
    def _starting(self, where: str, device: object, nbytes: int) -> Iterator[None]:
        """Around the start of transfers of `nbytes` to `device`: their seconds counted into
        `transfer_s`; a device out of memory raised as one error naming `where` and the device."""
        t0 = time.perf_counter()
        try:
            yield
        except Exception as exc:
            if device_shards.is_out_of_memory(exc):
                raise device_shards.oom_error(where, device, nbytes) from exc
            raise
        with self._lock:
            self.transfer_s += time.perf_counter() - t0

    def report(self, report: LoadReport) -> None:
        """Say in the load's report how it staged and what each device received."""
        report.staging_memory = PAGEABLE if self._ring is not None else MAPPED
        report.staging_slots = self._ring.high_water_slots if self._ring is not None else 0
        offsets = self.programs.offset_bytes  # sent beside the chunks, by design too
        report.device_received_bytes = _added(self.received_bytes, offsets)
        report.device_expected_bytes = dict(self.expected_bytes)
        report.device_resent_bytes = _added(self.resent_bytes, offsets)
        report.device_programs = self.programs.compiled

    def drain(self) -> None:
        """Wait for every transfer still reading a slot or mapped pages, and every compile."""
        if self._ring is not None:
            self._ring.drain()
        self.flight.drain()
        self.programs.close()


def _added(first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    """Bytes per device of both."""
    return {d: first.get(d, 0) + second.get(d, 0) for d in {**first, **second}}


class MappedFlight:
    """Chunks sent straight from mapped file pages (no host copy): each holds its bytes of the
    budget, and its mapped view, until its transfer has completed; then the view goes (and its
    window of the file with its last view, `loader.pipeline.file_pages`), so the host holds about
    the budget of file pages at a time.

    `admit(n)` waits for the oldest transfers until `n` bytes fit, in the budget and within
    `device_cap` (the bytes the link needs in flight, `Sizing.flight_bytes`, or less where the
    device has little room: `RingSender.fit`); `launched_many` records those a batch started.
    """

    def __init__(self, budget: ByteBudget, device_cap: int | None = None) -> None:
        self.budget, self.device_cap = budget, device_cap
        self._flight: deque[tuple[object, int, object]] = deque()  # (transfer, bytes, view)
        self._lock = threading.Lock()
        self._bytes = 0  # in flight now

    def _device_full(self, nbytes: int, cap: float | None) -> bool:
        """Whether `nbytes` more would pass `device_cap` or `cap` (never with nothing in
        flight)."""
        limit = min(self.device_cap or math.inf, math.inf if cap is None else cap)
        with self._lock:
            return 0 < self._bytes and self._bytes + nbytes > limit

    def admit(self, nbytes: int, cap: float | None = None) -> None:
        """Take `nbytes` of the budget for a mapped chunk, landing the oldest transfers first
        while they do not fit (in the budget, in what the device has room for, or in `cap`:
        `RingSender.cast_cap`)."""
        while self._device_full(nbytes, cap) and self._land_oldest():
            pass
        self.take_budget(nbytes)
        with self._lock:
            self._bytes += nbytes

    def withdraw(self, nbytes: int) -> None:
        """Give back what `admit(nbytes)` took, for a chunk that was not sent after all."""
        self._give_back(nbytes)

    def _give_back(self, nbytes: int) -> None:
        """`nbytes` no longer in flight: out of the count, back to the budget."""
        with self._lock:
            self._bytes -= nbytes
        self.budget.release(nbytes)

    def take_budget(self, nbytes: int) -> None:
        """Take `nbytes` of the budget, landing the oldest transfers in flight while they do not
        fit; with none left, wait as the budget says."""
        while not self.budget.try_acquire(nbytes):
            if not self._land_oldest():
                self.budget.acquire(nbytes)
                return

    def _land_oldest(self) -> bool:
        """Wait for the oldest transfer in flight and give back its bytes; False if none."""
        with self._lock:
            oldest = self._flight.popleft() if self._flight else None
        if oldest is not None:
            self._land(oldest)
        return oldest is not None

    def launched_many(self, started: list[tuple[object, int, object]]) -> None:
        """Record transfers started, each (transfer, bytes, mapping) in the order they started;
        then land, together, the oldest ones that have completed (transfers complete in about the
        order they start: asking only the oldest, once per batch, keeps this cheap with hundreds
        of small chunks in flight)."""
        with self._lock:
            self._flight.extend(started)
            landed = 0
            while self._flight and _ready(self._flight[0][0]):
                landed += self._flight.popleft()[1]  # its mapped view goes with it
        if landed:
            self._give_back(landed)

    def _land(self, flight: tuple[object, int, object]) -> None:
        transfer, nbytes, _ = flight
        _wait(transfer)
        self._give_back(nbytes)  # the mapped view goes with `flight`

    def drain(self) -> None:
        while self._land_oldest():
            pass
