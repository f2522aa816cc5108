"""The safetensors dtype names: their numpy dtypes (bf16 and the fp8s through `ml_dtypes`), their
sizes in bits, and which of them a model leaf can hold.

safetensors (0.8.0, its Rust `Dtype`) knows 22 dtypes. The whole-byte ones (`DTYPES`) map to a
numpy dtype one element per `itemsize` bytes, as they are stored, and load into a leaf of that
dtype. The sub-byte ones (`PACKED`: F4, F6_E2M3, F6_E3M2) are stored packed, as the reference
sizes them: a tensor of n elements holds n * bits / 8 bytes and is refused when that is not a
whole number (`storage_bytes`); two F4 values share a byte, four F6 values three bytes. jax holds
one F4 or F6 element per byte (`ml_dtypes.float4_e2m1fn`; no XLA type for F6 at all), so no leaf
takes them as stored: a load refuses them by name (`refuse_packed`), pointing to the layout that
reads MXFP4's FP4 pairs as the U8 bytes gpt-oss stores (`loader.DequantizeMXFP4`). Their bytes
still read (as uint8, `storage_dtype`), which is how the differential fuzz compares them.
"""

from __future__ import annotations

import math

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
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
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

#: The sub-byte dtypes: name -> bits per element. Their bytes are read as uint8, as stored.
PACKED: dict[str, int] = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}

#: Every dtype name a header may hold (the reference's list).
ALL_DTYPES: frozenset[str] = frozenset(DTYPES) | frozenset(PACKED)

#: The float dtypes numpy calls kind "V" (ml_dtypes' bfloat16 and float8s): floats all the same.
ML_FLOATS: frozenset[np.dtype] = frozenset(
    DTYPES[n] for n in ("BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ")
)

_NAMES_BY_DTYPE = {dt: name for name, dt in DTYPES.items()}
_PACKED_LEAF = {
    np.dtype(ml_dtypes.float4_e2m1fn): "F4",
    np.dtype(ml_dtypes.float6_e2m3fn): "F6_E2M3",
    np.dtype(ml_dtypes.float6_e3m2fn): "F6_E3M2",
}


def bits(name: str) -> int:
    """Bits per element of the safetensors dtype `name` (F4: 4, BF16: 16).

    Example:
        >>> bits("F6_E3M2"), bits("F8_E8M0")
        (6, 8)
    """
    return PACKED[name] if name in PACKED else numpy_dtype(name).itemsize * 8


def storage_bytes(name: str, shape: tuple[int, ...]) -> int | None:
    """The bytes a tensor of `shape` and dtype `name` takes in a file; None where a packed
    tensor's bits do not end on a byte boundary (the reference refuses it, and so do we).

    Example:
        >>> storage_bytes("F4", (3, 4)), storage_bytes("F4", (3,)), storage_bytes("F6_E2M3", (4,))
        (6, None, 3)
    """
    total = math.prod(shape) * bits(name)
    return None if total % 8 else total // 8


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype a tensor's bytes are read as: its own, or uint8 for a packed one."""
    return np.dtype(np.uint8) if name in PACKED else numpy_dtype(name)


def dtype_name(dtype: npt.DTypeLike) -> str:
    """The safetensors name (`"F32"`) of a numpy/jax dtype; `HeaderError` if it has none."""
    dt = np.dtype(dtype)
    try:
        return _NAMES_BY_DTYPE[dt]
    except KeyError:
        packed = _PACKED_LEAF.get(dt)
        if packed is not None:
            raise HeaderError(
                f"dtype {dt} is stored packed as safetensors {packed} ({PACKED[packed]} bits an "
                "element) and a leaf holds one element a byte: keep such a layer as uint8 "
                "blocks (U8) with its scales, as gpt-oss does, or in a float dtype"
            ) from None
        raise HeaderError(
            f"dtype {dt} has no safetensors equivalent; expected one of {sorted(DTYPES)}"
        ) from None


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a whole-byte safetensors dtype name (`"BF16"` → ml_dtypes.bfloat16).

    A packed name (F4, F6_*) is refused by `refuse_packed`'s message: it has no leaf dtype."""
    try:
        return DTYPES[name]
    except KeyError:
        if name in PACKED:
            raise HeaderError(refuse_packed(name, "a tensor")) from None
        raise HeaderError(
            f"unknown safetensors dtype {name!r}; expected one of {sorted(ALL_DTYPES)}"
        ) from None


def refuse_packed(name: str, where: str) -> str:
    """Why the packed dtype `name` of `where` (a tensor) cannot load into a leaf as stored."""
    return (
        f"{where} is {name}, {PACKED[name]} bits an element packed into bytes, which no jax "
        "leaf holds as stored; keep the layer as U8 blocks read through a quantized layout "
        "(loader.DequantizeMXFP4), or convert the checkpoint"
    )
