"""The staging ring and the mapped route: how a chunk reaches a device that does not adopt host
memory.

On a GPU or TPU a `jax.device_put` copies host bytes into device memory, so a host buffer is only
a staging copy: it must live until its transfer has completed, and no longer. Two routes:

- **Mapped** (a local file, no cast): the chunk's bytes are a read-only view of the file's mapped
  pages (a window of them, `loader.pipeline.file_pages`), handed to `jax.device_put` as they
  are, with no host copy, a batch of them per call (`loader.pipeline.mapped_send`,
  `RingSender.send_many`); the view holds its bytes of the budget until the transfer completes,
  then goes (`MappedFlight`). A host whose
  first touch of fresh anonymous memory is slow (a sandbox such as gVisor faults each page in
  through its own kernel) copies nothing this way, and several transfers in flight keep the link
  busy (one `device_put` at a time carries about half of what several do on a TPU v5e host; see
  docs/results.md).
- **The ring** (casts, remote reads, regions that are not one run of bytes): a fixed number of
  equal slots of one piece each, allocated on first use (their bytes taken from the budget for
  good); a reader takes a slot, fills it with one chunk (cast on the host; a cast from a local file
  by several readers side by side, `loader.pipeline.ring_job.SlotShare`), starts the transfer and
  hands the slot back with the transfer. The slot is given out again only once that transfer
  `is_ready()` (or after `block_until_ready()`, when every slot is in flight): a reused slot never
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
    """One staging buffer of the ring."""

    index: int
    raw: np.ndarray  # uint8, `slot_bytes` long
    transfer: object | None = None  # the transfer reading it, until it has completed

    def view(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.raw[:n].view(dtype).reshape(shape)


class StagingRing:
    """`slots` host buffers of `slot_bytes` each; `take()` blocks until one is free.

    Attributes:
        high_water_slots: most slots out at once (taken, or in flight), never above `slots`.
    """

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.slot_bytes = int(slot_bytes)
        self._all = [Slot(i, aligned((self.slot_bytes,), np.dtype(np.uint8))) for i in range(slots)]
        self._free: deque[Slot] = deque(self._all)
        self._flight: deque[Slot] = deque()  # oldest first
        self._cond = threading.Condition()
        self._out = 0
        self.high_water_slots = 0

    @property
    def slots(self) -> int:
        return len(self._all)

    @property
    def nbytes(self) -> int:
        return self.slots * self.slot_bytes

    def take(self) -> Slot:
        """A slot no transfer is reading: a free one, else the oldest in flight once it is done."""
        while True:
            with self._cond:
                self._reap()
                if self._free:
                    return self._hand_out(self._free.popleft())
                if not self._flight:  # every slot is being filled by other readers
                    self._cond.wait(0.05)
                    continue
                slot = self._flight.popleft()
                self._out -= 1  # it is handed out again below, once its transfer is done
            _wait(slot.transfer)  # outside the lock: other readers may reap meanwhile
            with self._cond:
                slot.transfer = None
                return self._hand_out(slot)

    def _hand_out(self, slot: Slot) -> Slot:
        self._out += 1
        self.high_water_slots = max(self.high_water_slots, self._out)
        return slot

    def _reap(self) -> None:
        """Slots whose transfers have completed go back to the free list (lock held)."""
        for slot in [s for s in self._flight if _ready(s.transfer)]:
            self._flight.remove(slot)
            slot.transfer = None
            self._free.append(slot)
            self._out -= 1

    def give_back(self, slot: Slot, transfer: object | None) -> None:
        """Return `slot`; with `transfer`, it is reused only once that transfer has completed."""
        with self._cond:
            if transfer is None:
                self._free.append(slot)
                self._out -= 1
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
                self.flight.take_budget(slots * slot_bytes)
                self._ring = StagingRing(slots, slot_bytes)
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
        return handle

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

    def _device_full(self, nbytes: int) -> bool:
        """Whether `nbytes` more would pass `device_cap` (never with nothing in flight)."""
        with self._lock:
            return (
                self.device_cap is not None
                and 0 < self._bytes
                and (self._bytes + nbytes > self.device_cap)
            )

    def admit(self, nbytes: int) -> None:
        """Take `nbytes` of the budget for a mapped chunk, landing the oldest transfers first
        while they do not fit (in the budget, or in what the device has room for)."""
        while self._device_full(nbytes) and self._land_oldest():
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
