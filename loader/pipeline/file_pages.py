"""`FilePages`: one read-only mapping of a whole checkpoint file, shared by the mapped chunks of one
load (`loader.pipeline.ring`'s mapped route).

Mapping each chunk afresh costs an `mmap` and a `munmap` per chunk; inside a sandbox that runs its
own kernel (gVisor, on a TPU v5e host) each took about a third of a millisecond, as long as the
chunk's transfer. So a file is mapped once, on first use, and each chunk is a view of it. Pages
handed out are given back once their transfer has completed (`give_back`): dropped from this
process's memory with `MADV_DONTNEED` (the page cache keeps them, so nothing is read again), a
batch of ranges at a time. The host then holds the chunks in flight (the budget) plus at most
`BATCH_BYTES` of landed pages per file, not the whole file as a long-lived mapping would.

Where the kernel refuses `madvise`, each chunk gets its own mapping instead (`view` answers from a
fresh one that goes with its view), as before.
"""

from __future__ import annotations

import mmap
import threading

import numpy as np

BATCH_BYTES = 16 << 20  # landed pages dropped together, at most this many bytes left mapped
PAGE = mmap.PAGESIZE


class FilePages:
    """The pages of one open file (`fd`, `size` bytes), mapped once for every chunk of a load.

    Raises:
        OSError: the file cannot be mapped (the caller then reads through the ring).
    """

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._map: mmap.mmap | None = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
        self._lock = threading.Lock()
        self._landed: list[tuple[int, int]] = []  # (start, stop) given back, not yet dropped
        self._landed_bytes = 0
        self._drops = hasattr(mmap, "MADV_DONTNEED")

    def view(self, at: int, nbytes: int) -> np.ndarray:
        """The `nbytes` at file offset `at`, as a read-only uint8 view (no copy)."""
        if self._map is None or not self._drops:
            return _fresh_mapping(self.fd, at, nbytes)
        return np.frombuffer(self._map, np.uint8, count=nbytes, offset=at)

    def give_back(self, at: int, nbytes: int) -> None:
        """The range's transfer has completed: its pages may leave this process's memory (with
        the next batch)."""
        with self._lock:
            self._landed.append((at, at + nbytes))
            self._landed_bytes += nbytes
            if self._landed_bytes < BATCH_BYTES:
                return
            ranges, self._landed, self._landed_bytes = self._landed, [], 0
        self._drop(ranges)

    def close(self) -> None:
        """Drop what is left mapped; the mapping itself goes with the last view of it (a device
        array on the CPU backend may still alias a range)."""
        with self._lock:
            ranges, self._landed, self._landed_bytes = self._landed, [], 0
        self._drop(ranges)
        self._map = None

    def _drop(self, ranges: list[tuple[int, int]]) -> None:
        """`MADV_DONTNEED` over the whole pages of each run of adjacent ranges."""
        mapping = self._map
        if mapping is None:
            return
        for start, stop in _merged(ranges):
            first, last = -(-start // PAGE) * PAGE, stop // PAGE * PAGE
            if last > first:
                try:
                    mapping.madvise(mmap.MADV_DONTNEED, first, last - first)
                except OSError:  # refused here: from now on each chunk maps its own pages
                    self._drops = False
                    return


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges sorted, adjacent or overlapping ones joined."""
    runs: list[tuple[int, int]] = []
    for start, stop in sorted(ranges):
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], stop))
        else:
            runs.append((start, stop))
    return runs


def _fresh_mapping(fd: int, at: int, nbytes: int) -> np.ndarray:
    """The range through a mapping of its own (it goes when the view does)."""
    base = at - at % mmap.ALLOCATIONGRANULARITY
    mapping = mmap.mmap(fd, at - base + nbytes, prot=mmap.PROT_READ, offset=base)
    return np.frombuffer(mapping, np.uint8, count=nbytes, offset=at - base)
