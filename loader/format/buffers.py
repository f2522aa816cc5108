"""Host buffers for reads: private anonymous mappings, page-aligned (so 64-byte aligned too).

Why not `np.empty`: numpy asks for transparent huge pages on large arrays
(`madvise(MADV_HUGEPAGE)`), and where the kernel's THP defrag setting is `madvise` (as here),
faulting those pages in may stall in direct compaction once the page cache has fragmented memory.
Measured here: reading sa3's 2.27 GB into retained numpy buffers took 4.4 s, into buffers without
huge pages 1.3-1.5 s. A private anonymous `mmap` gets ordinary pages, counts as anonymous RSS (a
shared one would count as shmem), and lives as long as the arrays that view it (a jax array that
adopts it included).
"""

from __future__ import annotations

import mmap

import numpy as np
import numpy.typing as npt


def host_buffer(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised, C-contiguous, page-aligned array of `shape` and `dtype`."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes == 0:
        return np.empty(shape, dt)
    mapping = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(mapping, np.uint8, count=nbytes).view(dt).reshape(shape)
