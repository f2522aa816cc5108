"""The byte budget: a bound on the host bytes in flight beyond the model's own, and its count.

Both engines count with it, and neither imports the other for it: `pipelined`
(`loader.pipeline`) sets aside its readers' scratch and its staging ring up front
(`reserved_bytes`, `loader.pipeline.sizing.Sizing`) and takes from it each speculative read and
each host copy of a leaf that is transformed before it is placed; `sharded`
(`loader.sharded.slices.ReadAhead`) takes from it each range it reads ahead of the tensor being
placed. A destination buffer the device adopts is the model's own memory, never counted.
`DEFAULT_BUDGET_BYTES` is the bound when `budget=` says none.
"""

from __future__ import annotations

import threading

from loader.options import DEFAULT_BUDGET_BYTES  # `budget=`'s default (its `loader.options` row)

__all__ = ["DEFAULT_BUDGET_BYTES", "ByteBudget", "Cancelled"]


class Cancelled(Exception):
    """The load was abandoned (an error elsewhere, or `close()`): stop waiting for bytes."""


class ByteBudget:
    """A counting bound on bytes, with a high-water mark; `reserved_bytes` are set aside for good
    (the readers' scratch and requests, the ring: `Sizing.reserved_bytes`).

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
