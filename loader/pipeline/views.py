"""Fill a destination buffer with a strided view of a stored tensor (a declared transform's result).

A `loader.transforms.View` says where each element of the leaf lies in the file tensor (element
strides and an offset). A reader thread fills a part of it in bounded chunks:

- a C-contiguous view in the file's dtype (a Reshape, a Slice of the leading axis) is read
  straight into the destination: no scratch, no copy;
- otherwise the file bytes the chunk spans are read into the thread's scratch buffer and copied
  (and cast) through a strided numpy view into the destination: a Transpose is a transposing copy
  of contiguous source rows. Gaps inside the span are read through when the runs between them are
  short (a syscall per run costs more than copying the gap: GPT-2's `c_attn` slices of the last
  axis are 3 KB rows) or when most of the span is wanted; long runs are read one by one.

Parts are cut along the view's outer axis (its largest stride), so each part reads one
contiguous stretch of the file: a transposed weight's part is some rows of the source, scattered
to columns of the destination. Several destinations that hold the same indices along that axis
(the device pieces of a transposed kernel split by its rows, or its replicas) are filled from one
read of the stretch they span together (`fill_views`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from loader.pipeline.cast import cast_into
from loader.pipeline.regions import Bytes, Target
from loader.transforms import View, c_strides

READ_THROUGH_RUN_BYTES = 64 << 10
#: A transposing copy goes tile by tile (TILE x TILE elements along the two fastest axes), which
#: keeps both sides in cache (several times faster than one numpy copy). Each tile is one numpy
#: call, which takes the GIL: fewer, larger tiles leave the GIL free longer (a compile thread
#: shares it). 256 beat 128 and 512 on Llama/sa3-sized weights (docs/results.md, "Tile size of
#: transposing copies").
TILE = 256


def outer_axis(view: View) -> int:
    """The axis with the largest stride (of those longer than 1): parts are cut along it."""
    axes = [a for a, n in enumerate(view.shape) if n > 1]
    return max(axes, key=lambda a: (view.strides[a], -a)) if axes else 0


def _span(view: View) -> int:
    """Elements from the view's first to its last element in the file (inclusive)."""
    return sum((n - 1) * s for n, s in zip(view.shape, view.strides) if n > 1) + 1


def _run(view: View) -> int:
    """Elements in one contiguous run at the view's innermost axes."""
    run = 1
    for n, s in zip(reversed(view.shape), reversed(view.strides)):
        if n > 1 and s != run:
            break
        run *= n
    return run


def row_axis(view: View, row: int) -> int | None:
    """The view's axis whose every index is one row of the stored tensor (`row` elements): its
    stride is `row` and each index's elements lie inside that row (a `Slice` of the last axis of a
    fused `(d, 3d)` weight, reshaped or transposed); None if it has none.

    Example:
        >>> row_axis(View((4, 2), (6, 1), offset=2), 6)  # columns 2:4 of a (4, 6) tensor
        0
    """
    if not view.shape or math.prod(view.shape) == 0:
        return None
    k = outer_axis(view)
    n, stride = view.shape[k], view.strides[k]
    within = _span(view) - (n - 1) * stride  # the elements one index along k spans
    if n < 2 or stride != row or view.offset % row + within > row:
        return None
    return k


def _contiguous(view: View) -> bool:
    return all(s == c or n == 1 for n, s, c in zip(view.shape, view.strides, c_strides(view.shape)))


def _read_through(view: View, span: int, itemsize: int) -> bool:
    size = int(np.prod(view.shape))
    return 2 * size >= span or _run(view) * itemsize < READ_THROUGH_RUN_BYTES


def _fastest(a: np.ndarray) -> int:
    axes = [i for i, n in enumerate(a.shape) if n > 1]
    return min(axes, key=lambda i: abs(a.strides[i])) if axes else 0


def _tiles(shape: tuple[int, ...], wide: tuple[int, int]) -> Iterator[tuple[slice, ...]]:
    """Index blocks covering `shape`: `TILE` along the axes in `wide`, one along the others."""
    ranges = [
        [
            slice(i, i + (TILE if axis in wide else 1))
            for i in range(0, n, TILE if axis in wide else 1)
        ]
        for axis, n in enumerate(shape)
    ]
    return itertools.product(*ranges)


def _copy_one(dst: np.ndarray, block: np.ndarray, scratch_writable: bool) -> None:
    if block.dtype == dst.dtype and dst.dtype.itemsize in (1, 2, 4, 8):
        unsigned = np.dtype(f"u{dst.dtype.itemsize}")  # numpy's integer copy releases the GIL
        np.copyto(dst.view(unsigned), block.view(unsigned))
    else:
        cast_into(dst, block, scratch_writable=scratch_writable and block.flags.c_contiguous)


def copy_strided(dst: np.ndarray, block: np.ndarray, *, scratch_writable: bool = True) -> None:
    """`dst[...] = block` (cast): tile by tile where their fastest axes differ (a transpose).
    `scratch_writable`: no one reads `block`'s scratch after (a cast may overwrite it)."""
    wide = (_fastest(dst), _fastest(block))
    if wide[0] == wide[1] or dst.size <= TILE * TILE:
        _copy_one(dst, block, scratch_writable)
        return
    for index in _tiles(dst.shape, wide):
        _copy_one(dst[index], block[index], scratch_writable)


def fill_view(
    src: Bytes, dtype: np.dtype, view: View, dst: np.ndarray, scratch: np.ndarray
) -> None:
    """Write the elements `view` selects of the stored tensor (`dtype`, in `src`) into `dst`."""
    if dst.size == 0:
        return
    itemsize = dtype.itemsize
    if _contiguous(view) and dst.dtype == dtype and dst.flags.c_contiguous:
        src.read(view.offset * itemsize, dst.reshape(-1).view(np.uint8))
        return
    span = _span(view)
    fits = span * itemsize <= scratch.nbytes
    if fits and _read_through(view, span, itemsize):
        raw = scratch[: span * itemsize]
        src.read(view.offset * itemsize, raw)
        strides = tuple(s * itemsize for s in view.strides)
        copy_strided(dst, as_strided(raw.view(dtype), view.shape, strides))
        return
    k = outer_axis(view)
    n, stride = view.shape[k], view.strides[k]
    rest = span - (n - 1) * stride  # the span of one index along k
    cap = scratch.nbytes // itemsize
    per = 1 if fits or rest > cap else max(1, (cap - rest) // stride + 1)
    whole = [slice(0, m) for m in view.shape]
    for b in range(0, n, per):
        e = min(n, b + per)
        region = (*whole[:k], slice(b, e), *whole[k + 1 :])
        fill_view(src, dtype, view.restrict(region), dst[region], scratch)


def fill_views(
    src: Bytes, dtype: np.dtype, view: View, targets: list[Target], scratch: np.ndarray
) -> None:
    """Write each target's region of the leaf (whose elements `view` selects of the stored
    tensor) into its destination, reading the stretch of the file they span together once
    (the column blocks of a transposed kernel split over devices: each spans every file row).

    The targets hold the same indices along `outer_axis(view)`; they are read a block of those
    indices at a time, each block's joint stretch fitting `scratch`. Where one index's stretch
    does not fit, each target is read on its own (`fill_view`).

    Example:
        >>> fill_views(src, f32, View((4, 8), (1, 4)), [((slice(0, 2), slice(0, 8)), top),
        ...                                             ((slice(2, 4), slice(0, 8)), bottom)], s)
    """
    targets = [(region, dst) for region, dst in targets if dst.size]
    if not targets:
        return
    itemsize, k = dtype.itemsize, outer_axis(view)
    first = targets[0][0][k]
    index = slice(first.start, first.start + 1)
    lo, hi = stretch([view.restrict((*r[:k], index, *r[k + 1 :])) for r, _ in targets])
    if (hi - lo) * itemsize > scratch.nbytes:
        for region, dst in targets:
            fill_view(src, dtype, view.restrict(region), dst, scratch)
        return
    per = max(1, (scratch.nbytes // itemsize - (hi - lo)) // max(view.strides[k], 1) + 1)
    for b in range(first.start, first.stop, per):
        e = min(first.stop, b + per)
        block = [
            (
                view.restrict((*r[:k], slice(b, e), *r[k + 1 :])),
                d[(slice(None),) * k + (slice(b - first.start, e - first.start),)],
            )
            for r, d in targets
        ]
        lo, hi = stretch([v for v, _ in block])
        raw = scratch[: (hi - lo) * itemsize]
        src.read(lo * itemsize, raw)
        elements = raw.view(dtype)
        for i, (v, dst) in enumerate(block):  # the last may overwrite the scratch (a cast)
            strides = tuple(s * itemsize for s in v.strides)
            values = as_strided(elements[v.offset - lo :], v.shape, strides)
            copy_strided(dst, values, scratch_writable=i == len(block) - 1)


def stretch(views: list[View]) -> tuple[int, int]:
    """The elements of the stored tensor from the first to past the last that `views` select."""
    return min(v.offset for v in views), max(v.offset + _span(v) for v in views)
