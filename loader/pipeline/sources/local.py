"""`LocalFiles`: a checkpoint on a local disk (one `.safetensors` file or a folder of shards), read
by `os.preadv` on the reader threads, minding the page cache.

Reader threads (`reader_threads`; `threads=` overrides): a warm read (the file's pages already
cached) is a memory copy: it is CPU-bound, so one reader per usable CPU, never more (on a 1-CPU
host a second reader only takes turns with the first and with the model build). A cold read waits
on the disk: more requests in flight keep the device busy, so twice the CPUs, at least 2 and at
most `MAX_COLD_THREADS`. "Usable CPUs" and "cached" are the host's answers (`loader.host`: the
affinity mask capped by the cgroup CPU quota; `mincore`), the count is taken before the read-ahead
hint (which may cache a small file whole), and off the staging ring only (its slots are sized for
the warm count).

The page cache (`cache_policy=`; `loader.pipeline.cache_fit`): `"auto"` (default) drops ranges
from the page cache once read (`posix_fadvise(POSIX_FADV_DONTNEED)` behind the reader) only where
files and model do not fit in memory together, decided once the plan says what the model holds
(`plan_reads`); `"keep"` leaves the page cache as it is (a cold load leaves the file cached: RAM
then holds model and file); `"dontneed"` drops every range once read, and at close what read-ahead
left. The read-ahead hint at open, given only where the files will fit, is `cache_fit.read_ahead`
(`begin`).

A run of neighbouring tensors (`read_run`) is one `preadv` scattering the file's contiguous bytes
into their buffers. A short read raises `CheckpointError` naming the file and the tensor.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from loader.errors import CheckpointError
from loader.format.buffers import PAGE_BYTES
from loader.format.file_order import file_order
from loader.format.source import CheckpointSource
from loader.host import busy_cpus, cached_fraction, usable_cpus
from loader.options import NO_OPTIONS, Reading
from loader.pipeline import cache_fit
from loader.pipeline.file_pages import FilePages
from loader.vocabulary import AUTO, DONTNEED

MAX_WARM_THREADS = 8  # memory bandwidth, not cores, bounds a copy beyond this
MAX_COLD_THREADS = 16
COLD_BELOW = 0.5  # a file with less than this fraction of its pages cached reads as cold


def reader_threads(cpus: float, *, cold: bool) -> int:
    """Readers for `cpus` usable CPUs: one per whole CPU warm; twice the CPUs (2-16) cold."""
    if cold:
        return max(2, min(MAX_COLD_THREADS, 2 * busy_cpus(cpus)))
    return max(1, min(MAX_WARM_THREADS, math.floor(cpus)))


def preadv_all(fd: int, views: list[memoryview], offset: int) -> int:
    """Fill `views` (uint8) with the file's bytes from `offset` on; the bytes read (less: EOF)."""
    done = 0
    views = [v for v in views if len(v)]
    while views:
        n = os.preadv(fd, views, offset + done)
        if n == 0:
            return done
        done += n
        while views and n >= len(views[0]):
            n -= len(views.pop(0))
        if n:
            views[0] = views[0][n:]
    return done


def drop_cached(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to drop the file's cached pages over a range (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class FileBytes:
    """A tensor's bytes in a file, read with `os.preadv` (which releases the GIL), or handed out
    as mapped pages of the file (`mapped`, through the load's one mapping of it: `pages`).

    With `drop=True` the pages just read are dropped from the page cache
    (`posix_fadvise(DONTNEED)`), so a cold load does not leave them cached.
    """

    shares_rows = False  # a row read again is a page-cache hit

    def __init__(
        self,
        fd: int,
        start: int,
        where: str,
        *,
        drop: bool = False,
        pages: Callable[[], FilePages | None] = lambda: None,
    ) -> None:
        self.fd, self.start, self.where, self.drop = fd, start, where, drop
        self._pages = pages

    def read(self, offset: int, out: np.ndarray) -> None:
        view = out.data.cast("B")  # memoryview(out): numpy types arrays as buffers from 3.12 only
        done = preadv_all(self.fd, [view], self.start + offset)
        if done < len(view):
            raise CheckpointError(
                f"{self.where}: file ends {len(view) - done} bytes early (truncated?)"
            )
        if self.drop:
            drop_cached(self.fd, self.start + offset, len(view))

    @property
    def maps(self) -> bool:
        """Pages to be dropped from the page cache once read are not mapped (`mapped`)."""
        return not self.drop

    def mapped(self, offset: int, nbytes: int) -> np.ndarray | None:
        """The `nbytes` at `offset` as a uint8 view of the file's mapped pages (no copy); None
        where the pages are to be dropped from the page cache once read (`drop`), which a mapping
        would not do, or where the file cannot be mapped. The view holds its window of the file
        mapped (`loader.pipeline.file_pages`) until it goes."""
        if self.drop or nbytes == 0:
            return None
        pages = self._pages()
        if pages is None:  # a file system that does not map: the chunk goes through the ring
            return None
        at = self.start + offset
        if at + nbytes > pages.size:  # a mapping past the end would fault later
            raise CheckpointError(f"{self.where}: file ends before byte {at + nbytes} (truncated?)")
        try:
            return pages.view(at, nbytes)
        except OSError:
            return None


class LocalFiles(CheckpointSource):
    """A local checkpoint as a `loader.pipeline.sources.ByteSource`: its files opened for the
    reader threads, its page cache minded as `reading`'s `cache_policy` says (see the module
    docstring).

    Args:
        path: a `.safetensors` file, or a folder of shards.
        reading: the load's `loader.options.Reading` (its page-cache policy: `"auto"` by
            default, `"keep"` or `"dontneed"`; checked when the group was made).

    Example:
        >>> with LocalFiles("model.safetensors", Reading(cache_policy="keep")) as source:
        ...     source.tensor_bytes("layers.0.kernel").read(0, out)
    """

    shares_rows = False  # a row read again is a page-cache hit
    in_file_order = False  # nothing checks the bytes as they arrive

    def __init__(self, path: str | os.PathLike[str], reading: Reading = NO_OPTIONS.reading) -> None:
        super().__init__(path)
        self.cache_policy: str = reading.value("cache_policy")
        self._readers: dict[Path, int] = {f: os.open(f, os.O_RDONLY) for f in self.files}
        # the tensors dropped from the page cache once read: all of them, or (auto) from the plan
        self._dropped: set[str] = set(self.keys()) if self.cache_policy == DONTNEED else set()
        self._mapped: dict[Path, FilePages | None] = {}  # each file's mapping (`mapped` chunks)
        self._pages_lock = threading.Lock()

    # -- sizing, before any reader starts --------------------------------------------------------
    def reader_threads(self, budget_bytes: int, *, staged: bool) -> int:
        """One reader per usable CPU; twice as many (2-16) where under `COLD_BELOW` of the files
        is cached, if the budget holds two pages each (see the module docstring)."""
        warm = reader_threads(usable_cpus(), cold=False)
        if staged:
            return warm
        cached = cached_fraction(self._readers.values())
        cold = cached is not None and cached < COLD_BELOW
        n = reader_threads(usable_cpus(), cold=cold)
        return n if n > warm and budget_bytes >= 2 * PAGE_BYTES * n else warm

    def request_bytes(self, budget_bytes: int, threads: int) -> int:
        return 0  # a read lands in its destination (or the reader's scratch)

    def begin(self, request_bytes: int) -> None:
        """The read-ahead hint, where the files will stay cached (`cache_fit.read_ahead`)."""
        cache_fit.read_ahead(self._readers.values(), self.cache_policy, self.total_bytes)

    # -- reads -----------------------------------------------------------------------------------
    def tensor_bytes(self, key: str) -> FileBytes:
        f = self.file_of(key)
        where = f"{f}: tensor {key!r}"
        fd, drop = self._readers[f], key in self._dropped
        return FileBytes(fd, self.file_offset(key), where, drop=drop, pages=lambda: self._pages(f))

    def _pages(self, f: Path) -> FilePages | None:
        """The load's window mapper of file `f` (`FilePages`), made on first use; None where its
        size cannot be read (`fstat` failed). A window the file system refuses to map fails later,
        in `FileBytes.mapped`, which then sends the chunk through the ring."""
        with self._pages_lock:
            if f not in self._mapped:
                fd = self._readers[f]
                try:
                    self._mapped[f] = FilePages(fd, os.fstat(fd).st_size)
                except OSError:
                    self._mapped[f] = None
            return self._mapped[f]

    def read_run(self, keys: list[str], views: list[np.ndarray]) -> None:
        """One scattered `preadv` of the run, then the pages of each tensor to drop dropped."""
        f = self.file_of(keys[0])
        fd, start = self._readers[f], self.file_offset(keys[0])
        done = preadv_all(fd, [v.reshape(-1).data.cast("B") for v in views], start)
        if done < sum(v.nbytes for v in views):
            raise CheckpointError(
                f"{f}: tensor {self._stopped_in(keys, done)!r}: file ends early (truncated?)"
            )
        for key in keys:
            if key in self._dropped:
                drop_cached(fd, self.file_offset(key), self.info(key).nbytes)

    def _stopped_in(self, keys: list[str], done: int) -> str:
        """The tensor of the run in which the byte `done` (from the run's start) lies."""
        for key in keys:
            if done < self.info(key).nbytes:
                return key
            done -= self.info(key).nbytes
        return keys[-1]

    # -- the page cache, once the plan is known --------------------------------------------------
    def plan_reads(self, keys: set[str], read: set[str], host_bytes: Callable[[], int]) -> None:
        """With `"auto"`, the one decision of what to drop (`cache_fit.drops`): the tensors the
        plan reads, in the readers' order, beside what the host will hold (the model's host
        bytes, and the tensors read before the plan, left cached)."""
        if self.cache_policy != AUTO:
            return
        order = file_order([self.info(k) for k in keys - read], self.file_of)
        kept = sum(self.info(k).nbytes for k in read)
        self._dropped = cache_fit.drops(self.cache_policy, order, host_bytes() + kept)

    def close(self) -> None:
        """Close the files (with `"dontneed"`, first dropping what read-ahead left cached) and
        let go of their mapped windows."""
        for pages in self._mapped.values():
            if pages is not None:
                pages.close()
        self._mapped.clear()
        for fd in self._readers.values():
            if self.cache_policy == DONTNEED:
                drop_cached(fd, 0, 0)
            os.close(fd)
        self._readers.clear()
        super().close()

    def __enter__(self) -> LocalFiles:
        return self
