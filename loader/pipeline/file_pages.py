"""`FilePages`: a checkpoint file's pages mapped a window at a time for the mapped chunks of one
load (`loader.pipeline.ring`'s mapped route).

Mapping each chunk afresh costs an `mmap` and a `munmap` per chunk; inside a sandbox that runs its
own kernel (gVisor, on a TPU v5e host) each took about a third of a millisecond, as long as the
chunk's transfer (sa3's 684 chunks: 0.22 s of mapping in a 0.77 s stream). So chunks are views of
a window of `WINDOW_BYTES` (or the chunk, if larger), mapped once and shared by the chunks that
fall in it: the sender goes through the file in order, so a window serves many chunks.

Memory: a window is unmapped when the last view of it goes (a chunk's view lives until its
transfer has completed, `MappedFlight`), and a window is at most `WINDOW_BYTES` (or one chunk),
so the pages mapped beyond the chunks in flight (counted in the budget) are at most the current
window of each file and the one before it: a fixed allowance, whatever the budget
(`tests/unit/test_staged_budget.py` counts what is mapped at once). (Mapping the whole file once
and dropping landed pages with `MADV_DONTNEED` kept the host's RSS at the whole file inside
gVisor: only `munmap` gives pages back there.) `MAPPED` counts the bytes mapped at once in this
process, and their high-water mark: what a load held of its files' pages beside the budget.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from dataclasses import dataclass

import numpy as np

#: Mapped at once (a larger chunk is mapped alone): small enough that the pages mapped beyond the
#: chunks in flight stay a fixed allowance beside the budget, large enough that an `mmap` (about a
#: third of a millisecond inside gVisor) costs a few percent of the window's transfer.
WINDOW_BYTES = 16 << 20


class MappedBytes:
    """The bytes of file windows mapped now in this process, and the most at once since `reset`.

    Example:
        >>> MAPPED.reset(); load_model(model, path, staging=True); MAPPED.peak_bytes
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now_bytes = self.peak_bytes = 0

    def mapped(self, pages: mmap.mmap, nbytes: int) -> None:
        """Count `pages` (`nbytes` long) until it is unmapped (with its last view)."""
        with self._lock:
            self.now_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.now_bytes)
        weakref.finalize(pages, self._unmapped, nbytes)

    def _unmapped(self, nbytes: int) -> None:
        with self._lock:
            self.now_bytes -= nbytes

    def reset(self) -> None:
        """Start a new high-water mark from what is mapped now."""
        with self._lock:
            self.peak_bytes = self.now_bytes


MAPPED = MappedBytes()


@dataclass(frozen=True)
class _Window:
    start: int
    stop: int
    pages: mmap.mmap


class FilePages:
    """The pages of one open file (`fd`, `size` bytes), mapped a window at a time.

    `view` raises OSError where the file cannot be mapped (the caller then reads through the ring).
    """

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._window: _Window | None = None
        self._lock = threading.Lock()

    def view(self, at: int, nbytes: int) -> np.ndarray:
        """The `nbytes` at file offset `at`, as a read-only uint8 view (no copy) of the current
        window, or of a new one starting at the range where it does not fall in that one."""
        with self._lock:
            window = self._window
            if window is None or not (window.start <= at and at + nbytes <= window.stop):
                base = at - at % mmap.ALLOCATIONGRANULARITY
                stop = min(self.size, max(base + WINDOW_BYTES, at + nbytes))
                pages = mmap.mmap(self.fd, stop - base, prot=mmap.PROT_READ, offset=base)
                MAPPED.mapped(pages, stop - base)
                window = self._window = _Window(base, stop, pages)
        return np.frombuffer(window.pages, np.uint8, count=nbytes, offset=at - window.start)

    def close(self) -> None:
        """Let go of the current window (it is unmapped with its last view)."""
        with self._lock:
            self._window = None
