"""The staging ring: a bounded ring of host buffers, for a backend that does not adopt host memory.

On a GPU or TPU a `jax.device_put` copies host bytes into device memory, so a host buffer is only
a staging copy: it must live until its transfer has completed, and no longer. The ring holds a
fixed number of equal slots, allocated once (their bytes are the budget's, reserved up front); a
reader takes a slot, fills it with one chunk, starts the transfer and hands the slot back with the
transfer. The slot is given out again only once that transfer `is_ready()` (or after
`block_until_ready()`, when every slot is in flight): a reused slot never changes bytes a transfer
is still reading.

Memory: the slots are `pinned_host` (page-locked; jax's memory kind) where the backend offers it
and the transfer from it works, pageable otherwise; `memory_kind` says which. On the CPU backend
(staging forced with `staging=True`) they are pageable, and a device array borrows its slot
until the update that copies it into the shard has run (see `pageable_transfer`): the host then
holds the model, the ring and the scratch, and no transfer copies beside them.

`backend_adopts_host_buffers()` says whether a load needs the ring (`uses_ring`): the CPU backend
adopts aligned host buffers (a destination buffer is then the model's own memory), others do not.
`loader.pipeline.ring_job.RingJob` is a leaf that travels through it; `RingSender` is what the
ring jobs of one load share: the ring, the transfer, and per device the bytes transferred to it
and the bytes of its regions (`received_bytes` / `expected_bytes`: equal unless something sent a
device more than its shard).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

from loader.format.buffers import aligned, host_buffer  # slots: `aligned` (tests count its calls)
from loader.pipeline import device_shards
from loader.pipeline.ring_chunks import DevicePiece
from loader.report import LoadReport

PINNED, PAGEABLE = "pinned_host", "pageable"
#: A transfer: (host chunk, device) -> a device array (or anything with `is_ready` and
#: `block_until_ready`). Tests pass a fake that completes late.
Transfer = Callable[[np.ndarray, object], object]


def backend_adopts_host_buffers() -> bool:
    """True on the CPU backend, whose device arrays may alias host buffers (no staging needed)."""
    return jax.default_backend() == "cpu"


def host_memory(device: object) -> bool:
    """Whether `device`'s memory is the host's (the CPU backend's devices)."""
    return getattr(device, "platform", "cpu") == "cpu"


def offers_pinned_host(device: object) -> bool:
    """Whether `device` has a `pinned_host` memory to stage through (never on the CPU backend,
    whose `pinned_host` is its own memory: nothing to pin)."""
    if host_memory(device):
        return False
    memories = getattr(device, "addressable_memories", None)
    try:
        return memories is not None and any(m.kind == PINNED for m in memories())
    except Exception:  # noqa: BLE001 - a backend that cannot list its memories: pageable
        return False


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


def pinned_transfer(chunk: np.ndarray, device: object) -> object:
    """Through the device's `pinned_host` memory: page-locked, so the copy to the device is DMA."""
    from jax.sharding import SingleDeviceSharding

    pinned = jax.device_put(chunk, SingleDeviceSharding(device, memory_kind=PINNED))
    return jax.device_put(pinned, device)


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

    def __init__(self, slots: int, slot_bytes: int, memory_kind: str = PAGEABLE) -> None:
        self.slot_bytes = int(slot_bytes)
        self.memory_kind = memory_kind
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


class PinnedTransfer:
    """`pinned_transfer`, falling back for good to `pageable_transfer` (and recording it in the
    ring) the first time the backend refuses the pinned route for a reason other than memory."""

    def __init__(self, ring: StagingRing) -> None:
        self.ring = ring

    def __call__(self, chunk: np.ndarray, device: object) -> object:
        if self.ring.memory_kind == PINNED:
            try:
                return pinned_transfer(chunk, device)
            except Exception as exc:
                if "RESOURCE_EXHAUSTED" in str(exc):
                    raise
                self.ring.memory_kind = PAGEABLE
        return pageable_transfer(chunk, device)


def uses_ring(staging: bool | None) -> bool:
    """Whether a load goes through the ring: as `staging=` asks, or (None) where the backend does
    not adopt host buffers."""
    return (not backend_adopts_host_buffers()) if staging is None else bool(staging)


def make_ring(layout: tuple[int, int], transfer: Transfer | None) -> tuple[StagingRing, Transfer]:
    """The ring of `layout` (slots, slot bytes) and the transfer to use with it: `transfer` as
    given (pageable slots), else pinned where the first local device offers it."""
    slots, slot_bytes = layout
    pinned = transfer is None and offers_pinned_host(jax.local_devices()[0])
    ring = StagingRing(slots, slot_bytes, PINNED if pinned else PAGEABLE)
    if transfer is None:
        transfer = PinnedTransfer(ring) if pinned else pageable_transfer
    return ring, transfer


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
        self.compiled: set[tuple[object, ...]] = set()  # the shapes whose updates are compiled

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
            if device_shards.is_out_of_memory(exc):
                raise device_shards.oom_error(where, piece.device, chunk.nbytes) from exc
            raise
        with self._lock:
            self.transfer_s += time.perf_counter() - t0
        self.count(self.received_bytes, piece.device, chunk.nbytes)
        return handle

    def report(self, report: LoadReport) -> None:
        """Say in the load's report how it staged and what each device received."""
        report.staging_memory = self.ring.memory_kind
        report.staging_slots = self.ring.high_water_slots
        report.device_received_bytes = dict(self.received_bytes)
        report.device_expected_bytes = dict(self.expected_bytes)

    def drain(self) -> None:
        """Wait for every transfer still reading a slot."""
        self.ring.drain()
