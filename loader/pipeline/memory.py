"""Destination and scratch buffers: page-aligned private anonymous mappings, prefaulted in bulk.

The buffers are `loader.buffers.host_buffer` mappings (ordinary pages, no huge-page compaction
stall; 64-byte aligned, so the CPU backend adopts them without a copy). Faulting a fresh buffer in
page by page during a read costs more than the copy itself; `prefault` asks the kernel to populate
a range in one call (`loader.format.buffers.populate_for_write`). Where the kernel refuses, the
read faults the pages in as before.
"""

from __future__ import annotations

import mmap

import numpy as np
import numpy.typing as npt

from loader.format.buffers import host_buffer, populate_for_write

_PAGE = mmap.PAGESIZE
_populate_works = True


def prefault(array: np.ndarray) -> None:
    """Populate the pages under `array` (a view into a `host_buffer`) for writing; best effort."""
    global _populate_works
    if not _populate_works or array.nbytes < _PAGE:
        return
    if not populate_for_write(array):
        _populate_works = False  # an older kernel (EINVAL): let the reads fault pages in


def aligned(shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised page-aligned buffer (pages are faulted in by `prefault` or the read)."""
    return host_buffer(tuple(shape), np.dtype(dtype))
