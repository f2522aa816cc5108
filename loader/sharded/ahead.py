"""Reading ahead of the sharded executor: the next tensors' bytes arrive while this one is placed.

The sharded executor fills one tensor at a time: read its ranges, then place them, and in bytes
mode (`loader.sharded.share`) compile its resharding program and run the collectives, which wait
for every process. Read one after the other, a process's link idles through all of that, and a
small tensor's one range request waits out a whole round trip alone. `ReadAhead` reads the load's
planned reads (`expect`: every range `loader.sharded.load.planned_reads` names, in the load's
order) on `workers` threads of its own, up to `budget` bytes ahead of the one the executor asks
for (`read_region`), so the link stays busy while the executor places, compiles and exchanges.
A read nobody expected (a tensor that falls back to regions) is read at once. Host memory holds
at most `budget` bytes read ahead (one read where a read is larger), beside what the executor
holds.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Iterable

import numpy as np

from loader.sharded.layout import Region
from loader.sharded.slices import SliceReader

#: The bytes read ahead of the read the executor waits for (at least one read is).
READ_AHEAD_BYTES = 128 << 20
#: The reads in progress at once: several small tensors' requests share the round trip's wait
#: (a large read is itself several requests in flight: the remote file's `concurrency`).
READ_AHEAD_WORKERS = 4

#: A read the load will make: tensor key, global region, its bytes.
Expected = tuple[str, Region, int]


class ReadAhead:
    """The planned reads of one load, up to `budget` bytes ahead on `workers` threads.

    Example:
        >>> ahead = ReadAhead(reader)
        >>> ahead.expect([("w", ((0, 4), (0, 8)), 128)])
        >>> host = ahead.read_region("w", ((0, 4), (0, 8)))  # read ahead, taken now
        >>> ahead.close()
    """

    def __init__(
        self,
        reader: SliceReader,
        budget: int = READ_AHEAD_BYTES,
        workers: int = READ_AHEAD_WORKERS,
    ) -> None:
        self._reader = reader
        self._budget = budget
        self._pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="loader-ahead"
        )
        self._waiting: collections.deque[Expected] = collections.deque()
        self._reading: collections.deque[tuple[Expected, concurrent.futures.Future[np.ndarray]]]
        self._reading = collections.deque()
        self._held = 0  # bytes of reads started and not yet taken

    def expect(self, reads: Iterable[Expected]) -> None:
        """The reads `read_region` will be asked for, in that order; reading them starts now."""
        self._waiting.extend(reads)
        self._top_up()

    def _top_up(self) -> None:
        while self._waiting and (
            not self._held or self._held + self._waiting[0][2] <= self._budget
        ):
            read = self._waiting.popleft()
            key, region, size = read
            self._reading.append((read, self._pool.submit(self._reader.read_region, key, region)))
            self._held += size

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """`key`'s `region`: the expected read, once it is in (the reads expected before it stay
        until asked for or closed), or, where it was not expected or not started yet, read now."""
        for at, ((k, r, size), future) in enumerate(self._reading):
            if (k, r) == (key, region):
                del self._reading[at]
                try:
                    return future.result()
                finally:
                    self._held -= size
                    self._top_up()
        for at, (k, r, _) in enumerate(self._waiting):
            if (k, r) == (key, region):  # asked for before its turn: read now, not again later
                del self._waiting[at]
                break
        return self._reader.read_region(key, region)

    def close(self) -> None:
        """Drop the reads not started, and wait for those in progress."""
        self._waiting.clear()
        for _, future in self._reading:
            future.cancel()
        self._reading.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
