"""The safetensors dtype names and their numpy dtypes (bf16 and fp8 through `ml_dtypes`)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import numpy.typing as npt

from loader.errors import HeaderError

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U64": np.dtype(np.uint64),
    "U32": np.dtype(np.uint32),
    "U16": np.dtype(np.uint16),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
    "C64": np.dtype(np.complex64),
}
_NAMES_BY_DTYPE = {dt: name for name, dt in DTYPES.items()}


def dtype_name(dtype: npt.DTypeLike) -> str:
    """The safetensors name (`"F32"`) of a numpy/jax dtype; `HeaderError` if it has none."""
    dt = np.dtype(dtype)
    try:
        return _NAMES_BY_DTYPE[dt]
    except KeyError:
        raise HeaderError(
            f"dtype {dt} has no safetensors equivalent; expected one of {sorted(DTYPES)}"
        ) from None


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a safetensors dtype name (`"BF16"` → ml_dtypes.bfloat16)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise HeaderError(
            f"unknown safetensors dtype {name!r}; expected one of {sorted(DTYPES)}"
        ) from None
