"""Destination and scratch buffers: page-aligned private anonymous mappings, prefaulted in bulk.

The buffers are `loader.buffers.host_buffer` mappings (ordinary pages, no huge-page compaction
stall; 64-byte aligned, so the CPU backend adopts them without a copy). Faulting a fresh buffer in
page by page during a read costs more than the copy itself; `prefault` asks the kernel to populate
a range in one call (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14+), through ctypes so the GIL is
released meanwhile. Where the kernel refuses, the read faults the pages in as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from loader.format.buffers import host_buffer

MADV_POPULATE_WRITE = 23
_PAGE = mmap.PAGESIZE


def _madvise() -> Callable[[int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _madvise()
_populate_works = _MADVISE is not None


def prefault(array: np.ndarray) -> None:
    """Populate the pages under `array` (a view into a `host_buffer`) for writing; best effort."""
    global _populate_works
    if _MADVISE is None or not _populate_works or array.nbytes < _PAGE:
        return
    start = array.__array_interface__["data"][0]
    begin = start - start % _PAGE
    if _MADVISE(begin, start + array.nbytes - begin, MADV_POPULATE_WRITE) != 0:
        _populate_works = False  # an older kernel (EINVAL): let the reads fault pages in


def aligned(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised page-aligned buffer (pages are faulted in by `prefault` or the read)."""
    return host_buffer(tuple(shape), np.dtype(dtype))
