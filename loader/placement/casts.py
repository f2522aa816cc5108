"""What a dtype change between a file and a model is, and the value check integer narrowing needs.

Three kinds of cast (`CastKind`), judged on the dtype a key_map transform gives (the file's when
there is none) against the dtype the model declares:

- `FLOAT`: float to float (F32 -> BF16, BF16 -> F32, F16 -> BF16). A rounding the caller may ask
  for: `casts="allow"` expects it, `casts="report"` (the default) reports it as a mismatch.
- `INTEGER`: integer to integer. Exact when every value fits, which the read checks
  (`check_fits`): listed, never a mismatch, under either policy (an HF checkpoint's I64 buffers
  meet jax's default 32-bit mode as int32); a value that does not fit stops the load.
- `KIND`: integer <-> float, bool <-> anything, complex: a change of meaning, always a mismatch.

numpy only: the pipeline's reader threads call `check_fits` on each chunk before its cast.
"""

from __future__ import annotations

import numpy as np

from loader.errors import CheckpointError
from loader.format.dtypes import ML_FLOATS
from loader.report import CastKind


class CastValueError(CheckpointError):
    """A value read from the file does not fit the integer dtype the model declares."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.detail = message

    def at(self, where: str) -> CastValueError:
        """The same error naming the tensor (for a caller that knows it and the check did not)."""
        return CastValueError(self.detail, where)


def cast_kind(file_dtype: np.dtype, model_dtype: np.dtype) -> CastKind:
    """The kind of the cast from `file_dtype` to `model_dtype` (which differ)."""
    src, dst = np.dtype(file_dtype), np.dtype(model_dtype)
    if _is_float(src) and _is_float(dst):
        return CastKind.FLOAT
    if _is_int(src) and _is_int(dst):
        return CastKind.INTEGER
    return CastKind.KIND


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in ML_FLOATS  # ml_dtypes' floats are numpy kind "V"


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def narrows(src: np.dtype, dst: np.dtype) -> bool:
    """True for an integer cast that some value of `src` does not survive (I64 -> I32, I8 -> U8)."""
    return _is_int(src) and _is_int(dst) and not np.can_cast(src, dst, casting="safe")


def check_fits(values: np.ndarray, dtype: np.dtype, where: str = "") -> None:
    """Raise `CastValueError` naming the first value of `values` that `dtype` cannot hold.

    Only an integer narrowing is checked (any other cast returns at once), so this is cheap to
    call before every cast.

    Example:
        >>> check_fits(np.array([1, 2**40]), np.dtype(np.int32), "tensor 'ids'")
        Traceback (most recent call last):
        CastValueError: tensor 'ids': value 1099511627776 (at index (1,)) does not ...
    """
    dtype = np.dtype(dtype)
    if values.size == 0 or not narrows(values.dtype, dtype):
        return
    info = np.iinfo(dtype)
    bad = (values < info.min) | (values > info.max)
    if not bad.any():
        return
    index = np.unravel_index(int(np.argmax(bad)), values.shape)
    value = values[index]
    raise CastValueError(
        f"value {value} (at index {tuple(int(i) for i in index)}) does not fit the model's "
        f"{dtype.name} (range {info.min}..{info.max}); declare the leaf as "
        f"{values.dtype.name} (with jax_enable_x64 for 64-bit) or fix the checkpoint",
        where,
    )
