"""Fill a destination buffer with one index region of a stored tensor, in bounded chunks.

A stored tensor is C-ordered bytes at a file offset. Its rows (index along axis 0) are contiguous,
so a region is read a block of whole rows at a time into a per-thread scratch buffer, then the
region's columns are converted (`cast_into`) straight into the destination. When a single row is
larger than the scratch, the row itself is treated as a tensor one axis smaller. When the region is
whole rows and the dtype already matches, the bytes are read straight into the destination (no
scratch, no copy). The bytes come from a `Bytes`: the file (`os.preadv`) or a buffer read earlier.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Protocol

import numpy as np

from loader.errors import CheckpointError
from loader.pipeline.cast import cast_into

Region = tuple[slice, ...]


class Bytes(Protocol):
    """Where a tensor's stored bytes come from."""

    def read(self, offset: int, out: np.ndarray) -> None:
        """Fill the uint8 array `out` with the bytes at `offset` (relative to the tensor)."""


class FileBytes:
    """A tensor's bytes in a file, read with `os.preadv` (which releases the GIL).

    With `drop=True` (`cache_policy="dontneed"`) the pages just read are dropped from the page
    cache (`posix_fadvise(DONTNEED)`), so a cold load does not leave the file cached.
    """

    def __init__(self, fd: int, start: int, where: str, *, drop: bool = False) -> None:
        self.fd, self.start, self.where, self.drop = fd, start, where, drop

    def read(self, offset: int, out: np.ndarray) -> None:
        view = out.data.cast("B")  # memoryview(out): numpy types arrays as buffers from 3.12 only
        done = preadv_all(self.fd, [view], self.start + offset)
        if done < len(view):
            raise CheckpointError(
                f"{self.where}: file ends {len(view) - done} bytes early (truncated?)"
            )
        if self.drop:
            drop_cached(self.fd, self.start + offset, len(view))


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


class MemoryBytes:
    """A tensor's bytes already in memory (a speculative read made before the plan)."""

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw.reshape(-1).view(np.uint8)

    def read(self, offset: int, out: np.ndarray) -> None:
        out[...] = self.raw[offset : offset + out.nbytes]


def full_region(shape: tuple[int, ...]) -> Region:
    return tuple(slice(0, n) for n in shape)


def normalize(region: tuple[slice, ...], shape: tuple[int, ...]) -> Region:
    """Concrete `slice(start, stop)` per axis (jax gives `slice(None)` for a whole axis)."""
    out = []
    for s, n in zip(region, shape):
        start, stop, step = s.indices(n)
        if step != 1:
            raise CheckpointError(f"a device slice with step {step} cannot be read in place")
        out.append(slice(start, stop))
    return tuple(out) + full_region(shape[len(out) :])


def fill_region(
    src: Bytes,
    shape: tuple[int, ...],
    dtype: np.dtype,
    region: Region,
    dst: np.ndarray,
    scratch: np.ndarray,
    offset: int = 0,
) -> None:
    """Write `region` of the stored tensor (`shape`, `dtype`, at `offset` in `src`) into `dst`."""
    if not shape:  # a 0-d tensor: one element
        shape, region, dst = (1,), (slice(0, 1),), dst.reshape(1)
    rows, rest = region[0], region[1:]
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    whole_rows = rest == full_region(shape[1:])
    if whole_rows and dst.dtype == dtype and dst.flags.c_contiguous:
        src.read(offset + rows.start * row_bytes, dst.reshape(-1).view(np.uint8))
        return
    if row_bytes > scratch.nbytes and len(shape) > 1:
        for i in range(rows.start, rows.stop):
            fill_region(
                src, shape[1:], dtype, rest, dst[i - rows.start], scratch, offset + i * row_bytes
            )
        return
    per = max(1, scratch.nbytes // max(row_bytes, 1))
    for b in range(rows.start, rows.stop, per):
        e = min(rows.stop, b + per)
        raw = scratch[: (e - b) * row_bytes]
        src.read(offset + b * row_bytes, raw)
        block = raw.view(dtype).reshape((e - b, *shape[1:]))[(slice(None), *rest)]
        cast_into(dst[b - rows.start : e - rows.start], block, scratch_writable=whole_rows)
