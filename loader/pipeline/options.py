"""The pipelined engine's settings: the budget, reader threads, cache policy; its stats and errors.

The budget (`ByteBudget`) bounds the host bytes in flight: buffers that are alive but will not
become the model's own.

What counts: per-thread scratch (reserved once, up front), speculative reads made before the plan
is known, and staging buffers (a leaf whose bytes are transformed or rebuilt before placement).
What does not: a destination buffer the device adopts (same dtype, or a cast destination), which is
the model's own memory from the moment it is allocated.

`cache_policy=` (`loader.pipeline.cache_fit`): `"auto"` (default) drops ranges from the page cache
once read (`posix_fadvise(POSIX_FADV_DONTNEED)` behind the reader) only where files and model do
not fit in memory together; `"keep"` leaves the page cache as it is (a cold load leaves the file
cached: RAM then holds model and file); `"dontneed"` drops every range. The read-ahead hint at
open, given only where the files will fit, is `cache_fit.read_ahead`.

Reader threads (`threads=`, default from the CPUs this process may use and the page cache): a
warm read (the file's pages already cached) is a memory copy: it is CPU-bound, so one reader per
usable CPU, never more (on a 1-CPU host a second reader only takes turns with the first and with
the model build). A cold read waits on the disk: more requests in flight keep the device busy, so
twice the CPUs, at least 2 and at most `MAX_COLD_THREADS`. "Usable CPUs" and "cached" are the
host's answers (`loader.host`: the affinity mask capped by the cgroup CPU quota; `mincore`).
`threads=` on `load_model` / `Pipeline` overrides all of it (e.g. the queue depth that
`loadbench probe` found best for the disk: its `cold_read_threads`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from loader.errors import CheckpointError
from loader.host import cached_fraction, usable_cpus
from loader.pipeline.regions import drop_cached
from loader.vocabulary import CACHE_POLICIES, DONTNEED, KEEP

__all__ = [
    "CACHE_POLICIES",
    "DEFAULT_BUDGET_BYTES",
    "DONTNEED",
    "KEEP",
    "ByteBudget",
    "PipelineStats",
    "check_options",
    "reader_error",
]

MAX_WARM_THREADS = 8  # memory bandwidth, not cores, bounds a copy beyond this
MAX_COLD_THREADS = 16
COLD_BELOW = 0.5  # a file with less than this fraction of its pages cached reads as cold
DEFAULT_BUDGET_BYTES = 256 << 20  # 256 MiB: `load_model(..., budget=None)` and `bench run --budget`


class Cancelled(Exception):
    """The load was abandoned (an error elsewhere, or `close()`): stop waiting for bytes."""


class ByteBudget:
    """A counting bound on bytes, with a high-water mark.

    `acquire` blocks until the bytes fit. A single request larger than what is left after the
    reserve is let through only when nothing else is in flight (one staging buffer that cannot be
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
        with self._cond:
            self._held -= n
            self._cond.notify_all()

    def cancel(self) -> None:
        """Wake every waiter with `Cancelled`."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()


@dataclass
class PipelineStats:
    """What the engine did: for reports and the bench."""

    budget_bytes: int = 0
    inflight_peak_bytes: int = 0  # high-water mark of budgeted bytes (scratch included)
    speculative_bytes: int = 0  # read (or prefaulted, strict) before the plan was known
    threads: int = 0
    read_s: float = 0.0  # summed over threads
    cast_s: float = 0.0
    coalesced: int = 0  # tensors read in runs of adjacent small tensors (`coalesce`)


def check_options(threads: int | None, cache_policy: str) -> int:
    """The reader thread count (`threads`, or the warm default); one-line errors for bad values."""
    if cache_policy not in CACHE_POLICIES:
        raise CheckpointError(
            f"cache_policy={cache_policy!r} is not one of {', '.join(map(repr, CACHE_POLICIES))}"
        )
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise CheckpointError(f"threads={threads!r}: give a whole number of reader threads, >= 1")
    return threads or reader_threads(usable_cpus(), cold=False)


def check_budget(limit: int, threads: int) -> int:
    """`limit`, or a one-line error where it cannot hold two pages per reader thread."""
    if limit < 4096 * threads * 2:
        raise CheckpointError(
            f"budget of {limit} bytes is too small; give at least {8192 * threads}"
        )
    return limit


def open_files(paths: Iterable[Path]) -> dict[str, int]:
    """Each file opened for reading (path -> fd)."""
    return {str(p): os.open(p, os.O_RDONLY) for p in paths}


def close_files(fds: dict[str, int], cache_policy: str) -> None:
    """Close the files (with `"dontneed"`, first dropping what read-ahead left cached)."""
    for fd in fds.values():
        if cache_policy == DONTNEED:
            drop_cached(fd, 0, 0)
        os.close(fd)
    fds.clear()


def reader_error(where: str, exc: BaseException) -> CheckpointError:
    """The error to raise on the main thread for a failure in a reader thread."""
    if isinstance(exc, CheckpointError):  # already names the file and tensor (`FileBytes`)
        return exc
    err = CheckpointError(f"{where}: reading failed ({type(exc).__name__}: {exc})")
    err.__cause__ = exc
    return err


def reader_threads(cpus: float, *, cold: bool) -> int:
    """Readers for `cpus` usable CPUs: one per whole CPU warm; twice the CPUs (2-16) cold."""
    if cold:
        return max(2, min(MAX_COLD_THREADS, 2 * math.ceil(cpus)))
    return max(1, min(MAX_WARM_THREADS, math.floor(cpus)))


def file_threads(fds: list[int]) -> int:
    """Readers for these open files: the cold count where under `COLD_BELOW` of them is cached."""
    cached = cached_fraction(fds)
    return reader_threads(usable_cpus(), cold=cached is not None and cached < COLD_BELOW)
