"""Dtype conversion of one chunk, from a scratch buffer straight into the destination buffer.

Bit-exact with numpy's / ml_dtypes' own `astype` (round to nearest, ties to even). Fast paths, all
made of numpy integer ufuncs that release the GIL (ml_dtypes' cast loops hold it, so reader
threads casting with them take turns instead of running side by side):

- fp32 -> bf16: `(u + 0x7FFF + ((u >> 16) & 1)) >> 16` on the float's bits, in place in the scratch
  (a chunk holding a NaN falls back to ml_dtypes, which keeps NaN's sign and quiets it);
- bf16 -> fp32: the 16 bits shifted into the high half (exact by construction);
- anything else: `np.copyto(..., casting="unsafe")`, numpy's own conversion; an integer
  narrowing (I64 -> I32) is checked value by value first (`loader.placement.casts.check_fits`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from loader.placement.casts import check_fits

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _contiguous(*arrays: np.ndarray) -> bool:
    return all(a.flags.c_contiguous for a in arrays)


def _f32_to_bf16(dst: np.ndarray, src: np.ndarray) -> None:
    """`src` (fp32, writable scratch: overwritten) rounded into `dst` (bf16)."""
    if np.isnan(np.max(src)):  # NaN propagates through max: one pass, no allocation
        np.copyto(dst, src, casting="unsafe")
        return
    u = src.reshape(-1).view(np.uint32)
    out = dst.reshape(-1).view(np.uint16)
    np.right_shift(u, 16, out=out, casting="unsafe")  # the bits that stay
    np.bitwise_and(out, 1, out=out)  # ties go to even
    np.add(u, out, out=u)
    np.add(u, 0x7FFF, out=u)
    np.right_shift(u, 16, out=out, casting="unsafe")


def _bf16_to_f32(dst: np.ndarray, src: np.ndarray) -> None:
    out = dst.reshape(-1).view(np.uint32)
    np.copyto(out, src.reshape(-1).view(np.uint16), casting="unsafe")
    np.left_shift(out, 16, out=out)


def cast_into(dst: np.ndarray, src: np.ndarray, *, scratch_writable: bool = False) -> None:
    """Write `src` converted to `dst.dtype` into `dst` (same shape).

    Args:
        dst: the destination (a slice of the leaf's own buffer).
        src: the values read from the file.
        scratch_writable: `src` is scratch the caller may lose (enables the in-place fp32 path).
    """
    if src.size == 0:
        return
    if src.dtype == dst.dtype:
        np.copyto(dst, src)
    elif src.dtype == F32 and dst.dtype == BF16 and scratch_writable and _contiguous(dst, src):
        _f32_to_bf16(dst, src)
    elif src.dtype == BF16 and dst.dtype == F32 and _contiguous(dst, src):
        _bf16_to_f32(dst, src)
    else:
        check_fits(src, dst.dtype)  # the reader names the tensor (`reader_error`)
        np.copyto(dst, src, casting="unsafe")
