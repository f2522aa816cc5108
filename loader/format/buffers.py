"""Host buffers for reads: private anonymous mappings, page-aligned (so 64-byte aligned too).

Why not `np.empty`: numpy asks for transparent huge pages on large arrays
(`madvise(MADV_HUGEPAGE)`), and where the kernel's THP defrag setting is `madvise` (the default),
faulting those pages in may stall in direct compaction once the page cache has fragmented memory
(docs/results.md, "Host buffers without huge pages", saw a read run three times slower for it). A
private anonymous `mmap` gets ordinary pages, counts as anonymous RSS (a shared one would count as
shmem), and lives as long as the arrays that view it (a jax array that adopts it included).

`populate_for_write` asks the kernel to fault a range of such a buffer in at once
(`madvise(MADV_POPULATE_WRITE)`, Linux 5.14+), through ctypes so the GIL is released meanwhile:
faulting fresh pages one by one during a read costs more than the copy itself. The loader's
prefault (`prefault`, best effort: where the kernel refuses once, later reads fault the pages in)
and the probe's copy passes (`bench.machine.bandwidth`) use it. `aligned` is a `host_buffer` whose
pages are faulted in by `prefault` or the read itself.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from loader.format.libc import libc_function

#: The page a budget and a staging chunk count in (the x86-64 and most arm64 kernels' size).
PAGE_BYTES = 4096
MADV_POPULATE_WRITE = 23  # Linux 5.14+; Python's mmap module names it only from 3.13


def host_buffer(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised, C-contiguous, page-aligned array of `shape` and `dtype`."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes == 0:
        return np.empty(shape, dt)
    mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(mapping, np.uint8, count=nbytes).view(dt).reshape(shape)


def _madvise() -> Callable[[int, int, int], int] | None:
    fn = libc_function("madvise")
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    madvise: Callable[[int, int, int], int] = fn
    return madvise


_MADVISE = _madvise()


def populate_for_write(array: np.ndarray) -> bool:
    """Populate the pages under `array` (a view into a `host_buffer`) for writing. True when done
    (or nothing to do); False where the kernel refused (`ctypes.get_errno()` says why) or this libc
    has no `madvise`."""
    if array.nbytes == 0:
        return True
    if _MADVISE is None:
        return False
    start = array.__array_interface__["data"][0]
    begin = start - start % mmap.PAGESIZE
    return _MADVISE(begin, start + array.nbytes - begin, MADV_POPULATE_WRITE) == 0


_populate_works = True


def prefault(array: np.ndarray) -> None:
    """Populate the pages under `array` (a view into a `host_buffer`) for writing; best effort."""
    global _populate_works
    if not _populate_works or array.nbytes < mmap.PAGESIZE:
        return
    if not populate_for_write(array):
        _populate_works = False  # an older kernel (EINVAL): let the reads fault pages in


def aligned(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised page-aligned buffer (pages are faulted in by `prefault` or the read)."""
    return host_buffer(tuple(shape), np.dtype(dtype))
