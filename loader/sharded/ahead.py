"""Reading ahead of the sharded executor: the next tensors' bytes arrive while this one is placed.

The sharded executor fills one tensor at a time: read its ranges, then place them, and in bytes
mode (`loader.sharded.share`) compile its resharding program and run the collectives, which wait
for every process. Read one after the other, a process's link idles through all of that, and a
small tensor's one range request waits out a whole round trip alone. `ReadAhead` is a
`loader.sharded.reads.RegionReader` in front of the slice reader: told the load's planned reads
(`plan`: every range the executor will ask for, in its order; the slice reader is told them too),
it reads them on `workers` threads of its own ahead of the one the executor asks for
(`read_region`), so the link stays busy while the executor places, compiles and exchanges.

Host memory is bound the way the pipelined engine binds it (`loader.pipeline.budget`): a read
ahead takes its bytes from the load's `ByteBudget` (`budget=`, default `DEFAULT_BUDGET_BYTES`)
when it starts and gives them back when the executor takes it, and one read larger than the
budget is let through only when nothing else is held; the budget's high-water mark is the load's
`LoadReport.inflight_peak_bytes`. A read nobody planned (a tensor that falls back to regions) is
read at once, on the executor's thread, beside what is held.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Sequence

import numpy as np

from loader.pipeline.budget import ByteBudget
from loader.sharded.layout import Region
from loader.sharded.reads import PlannedRead, RegionReader

#: `sharded`'s default budget: the bytes read ahead of the read the executor waits for (at least
#: one read is), beside the requests a remote file has in flight.
DEFAULT_BUDGET_BYTES = 128 << 20
#: The reads in progress at once: several small tensors' requests share the round trip's wait
#: (a large read is itself several requests in flight: the remote file's `concurrency`).
READ_AHEAD_WORKERS = 4


class ReadAhead:
    """The planned reads of one load, read ahead within `budget` on `workers` threads.

    Example:
        >>> ahead = ReadAhead(reader, ByteBudget(64 << 20))
        >>> ahead.plan([PlannedRead("w", ((0, 4), (0, 8)), 128)])
        >>> host = ahead.read_region("w", ((0, 4), (0, 8)))  # read ahead, taken now
        >>> ahead.close()
    """

    def __init__(
        self,
        reader: RegionReader,
        budget: ByteBudget | None = None,
        workers: int = READ_AHEAD_WORKERS,
    ) -> None:
        self._reader = reader
        self.budget = budget if budget is not None else ByteBudget(DEFAULT_BUDGET_BYTES)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="loader-ahead"
        )
        self._waiting: collections.deque[PlannedRead] = collections.deque()
        self._reading: collections.deque[tuple[PlannedRead, concurrent.futures.Future[np.ndarray]]]
        self._reading = collections.deque()

    def plan(self, reads: Sequence[PlannedRead], max_over_read: float | None = None) -> None:
        """The reads `read_region` will be asked for, in that order: told to the slice reader,
        and reading them starts now."""
        self._reader.plan(reads, max_over_read)
        self._waiting.extend(reads)
        self._top_up()

    def _top_up(self) -> None:
        while self._waiting:
            read = self._waiting[0]
            if not self.budget.try_acquire(read.nbytes):
                if self._reading:
                    return  # the budget is full: the next read starts when one is taken
                self.budget.acquire(read.nbytes)  # nothing held: one read larger than it goes
            self._waiting.popleft()
            future = self._pool.submit(self._reader.read_region, read.key, read.region)
            self._reading.append((read, future))

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """`key`'s `region`: the planned read, once it is in (the reads planned before it stay
        until asked for or closed), or, where it was not planned or not started yet, read now."""
        for at, (read, future) in enumerate(self._reading):
            if (read.key, read.region) == (key, region):
                del self._reading[at]
                try:
                    return future.result()
                finally:
                    self.budget.release(read.nbytes)
                    self._top_up()
        for at, read in enumerate(self._waiting):
            if (read.key, read.region) == (key, region):  # asked before its turn: read now, once
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
