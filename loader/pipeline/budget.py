"""The budget: a bound on the host bytes in flight beyond the model's own, how it is split, and
how it is counted.

What counts: each reader thread's scratch (reserved once, up front), the staging ring's slots
(likewise), speculative reads made before the plan is known, and the host copy of a leaf that is
transformed or rebuilt before it is placed (`loader.pipeline.jobs.HostCopyJob`). What does not: a
destination buffer the device adopts (same dtype, or a cast destination), which is the model's own
memory from the moment it is allocated.

The split (`scratch_bytes`, `ring_layout`): each thread's scratch is a quarter of the budget over
the threads (at most `MAX_SCRATCH_BYTES`, and, once the checkpoint's size is known, at most
`SCRATCH_SHARE` of it); the ring takes half of what the scratch leaves (`2 * threads` slots, so
each reader can fill one slot while its previous one is in transfer), at most `MAX_SLOT_BYTES` a
slot; the rest stays for what is counted as it comes (`ByteBudget.acquire`).
"""

from __future__ import annotations

import threading

from loader.errors import CheckpointError

DEFAULT_BUDGET_BYTES = 256 << 20  # 256 MiB: `load_model(..., budget=None)` and `bench run --budget`
MIN_SLOT_BYTES = 4096  # one staging chunk: a page
MAX_SLOT_BYTES = 64 << 20
MAX_SCRATCH_BYTES = 8 << 20
#: A thread's scratch (touched only by casts and transforms) is at most this share of the
#: checkpoint, and at least `MIN_SCRATCH_BYTES`: on a small checkpoint a fixed scratch per thread
#: is a visible share of the peak (docs/results.md, "The readers' scratch on a small checkpoint").
SCRATCH_SHARE = 1 / 200
MIN_SCRATCH_BYTES = 1 << 20


class Cancelled(Exception):
    """The load was abandoned (an error elsewhere, or `close()`): stop waiting for bytes."""


class ByteBudget:
    """A counting bound on bytes, with a high-water mark.

    `acquire` blocks until the bytes fit. A single request larger than what is left after the
    reserve is let through only when nothing else is in flight (one host copy that cannot be
    split, such as a transformed leaf); `high_water_bytes` then shows the excess.

    Example:
        >>> budget = ByteBudget(256 << 20)
        >>> budget.acquire(1 << 20); budget.release(1 << 20)
    """

    def __init__(self, limit_bytes: int, reserved_bytes: int = 0) -> None:
        self.limit_bytes = int(limit_bytes)
        self.reserved_bytes = int(reserved_bytes)
        self._held = 0
        self.high_water_bytes = self.reserved_bytes
        self._cond = threading.Condition()
        self._cancelled = False

    @property
    def in_flight_bytes(self) -> int:
        return self.reserved_bytes + self._held

    def reserve(self, n: int) -> None:
        """Set aside `n` bytes for good (the scratch, the ring), in place of an earlier reserve
        that was never allocated; the high-water mark starts again from what is in flight now."""
        with self._cond:
            self.reserved_bytes = int(n)
            self.high_water_bytes = self.in_flight_bytes
            self._cond.notify_all()

    def _fits(self, n: int) -> bool:
        return self.reserved_bytes + self._held + n <= self.limit_bytes or self._held == 0

    def try_acquire(self, n: int) -> bool:
        """Take `n` bytes if they fit within the limit now (never the oversize exception)."""
        with self._cond:
            if self._cancelled or self.reserved_bytes + self._held + n > self.limit_bytes:
                return False
            self._take(n)
            return True

    def acquire(self, n: int) -> None:
        """Take `n` bytes, waiting for releases; `Cancelled` if the load is abandoned meanwhile."""
        with self._cond:
            while not self._fits(n):
                if self._cancelled:
                    raise Cancelled
                self._cond.wait(0.1)
            if self._cancelled:
                raise Cancelled
            self._take(n)

    def _take(self, n: int) -> None:
        self._held += n
        self.high_water_bytes = max(self.high_water_bytes, self.in_flight_bytes)

    def release(self, n: int) -> None:
        """Give back `n` bytes taken earlier (by `acquire` or `try_acquire`)."""
        with self._cond:
            self._held -= n
            self._cond.notify_all()

    def cancel(self) -> None:
        """Wake every waiter with `Cancelled`."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()


def check_budget(limit: int, threads: int) -> int:
    """`limit`, or a one-line error where it cannot hold two pages per reader thread."""
    if limit < 4096 * threads * 2:
        raise CheckpointError(
            f"budget of {limit} bytes is too small; give at least {8192 * threads}"
        )
    return limit


def scratch_bytes(limit: int, threads: int, checkpoint_bytes: int | None = None) -> int:
    """Each reader thread's scratch buffer (for casts and transforms): a quarter of the budget
    over the threads, at most `MAX_SCRATCH_BYTES`, and with the checkpoint's size known, at most
    `SCRATCH_SHARE` of it over the threads (not under `MIN_SCRATCH_BYTES`)."""
    size = min(MAX_SCRATCH_BYTES, limit // (4 * threads))
    if checkpoint_bytes is not None:
        size = min(size, max(MIN_SCRATCH_BYTES, int(checkpoint_bytes * SCRATCH_SHARE) // threads))
    return size // 64 * 64


def ring_layout(limit: int, threads: int) -> tuple[int, int]:
    """(slots, slot_bytes) of the staging ring for a budget of `limit` bytes."""
    slots = 2 * threads
    ring = (limit - scratch_bytes(limit, threads) * threads) // 2
    return slots, min(MAX_SLOT_BYTES, ring // slots) // MIN_SLOT_BYTES * MIN_SLOT_BYTES


def min_staging_budget(threads: int) -> int:
    """The smallest budget whose slots hold one staging chunk each (exact: a bisection)."""
    lo, hi = 0, 8 * 2 * threads * MIN_SLOT_BYTES
    while lo < hi:
        mid = (lo + hi) // 2
        if ring_layout(mid, threads)[1] >= MIN_SLOT_BYTES:
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_staging_budget(limit: int, threads: int) -> tuple[int, int]:
    """The ring's (slots, slot_bytes); a one-line `CheckpointError` naming the minimum if the
    budget cannot hold one staging chunk per slot."""
    slots, slot_bytes = ring_layout(limit, threads)
    if slot_bytes < MIN_SLOT_BYTES:
        raise CheckpointError(
            f"budget of {limit} bytes is smaller than one staging chunk per slot ({slots} slots "
            f"of {MIN_SLOT_BYTES} bytes, {threads} threads); give budget= at least "
            f"{min_staging_budget(threads)} bytes"
        )
    return slots, slot_bytes
