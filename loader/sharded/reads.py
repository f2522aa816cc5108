"""What the sharded executor reads: one load's planned reads, and the protocol of what reads them.

The executor (`loader.sharded.load.Slices`) works out every index range it will read once, in the
order it will ask for them (`PlannedRead`: tensor key, global region, bytes), before it reads any,
and hands that one list to its `RegionReader`: the slice reader itself
(`loader.sharded.slices.SliceReader`, which tells each file every read so that a remote file plans
its requests over all of them: `loader.sharded.read_plan`) or the read-ahead in front of it
(`loader.sharded.slices.ReadAhead`, which tells the slice reader and then reads the list ahead
within the load's budget). Either way the executor then asks for each range by `read_region`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np

from loader.sharded.layout import Region


class PlannedRead(NamedTuple):
    """One index range a load will read: tensor key, global region, and its bytes.

    Example:
        >>> PlannedRead("fc.kernel", ((0, 4), (0, 8)), 128).nbytes
        128
    """

    key: str
    region: Region
    nbytes: int


class RegionReader(Protocol):
    """What reads a load's index ranges: told every planned read first, then asked for each."""

    def plan(self, reads: Sequence[PlannedRead], max_over_read: float | None = None) -> None:
        """Every read `read_region` will be asked for, in that order, told before the first;
        `max_over_read` bounds what a remote file's plan may read over them (None: the file's
        own bound)."""
        ...

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """The values of tensor `key` in the global `region`, as a host array of its own."""
        ...


def total_bytes(reads: Sequence[PlannedRead]) -> int:
    """The bytes of `reads`.

    Example:
        >>> total_bytes([PlannedRead("a", ((0, 2),), 8), PlannedRead("b", ((0, 1),), 4)])
        12
    """
    return sum(read.nbytes for read in reads)
