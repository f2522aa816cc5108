"""Deterministic synthetic tensor content: fast to write, exact to regenerate.

A tensor's bytes are a block of random bits repeated to fill it. The block is `min(nbytes,
PERIOD_BYTES)` bytes from a PCG64 stream seeded by (seed, sha256(tensor name)), so each tensor
differs from every other, and the period (8 x 131,071 bytes: a prime number of 8-byte words) does
not line up with row or power-of-two boundaries, so a loader that swaps rows or chunks inside a
tensor still fails verification. Float bit patterns are masked to finite values in ±[0.5, 1) (sign
and mantissa random, exponent fixed); BOOL to 0/1; 64-bit integers to [0, 2**31) (real 64-bit
buffers such as position ids fit in 32 bits, which is what jax holds them as by default, and a
loader checks that they do); other integers keep all bits.

The tensors of a quantized layout (`shapes.quantized`) get what their role needs instead: a scale
is positive and of a quantizer's size, an E8M0 exponent lies near its bias, a packed weight's
`weight_shape` holds its true shape. `fill(name, dtype, shape_of)` says which, given the shapes of
the checkpoint's other tensors.

Only one block per tensor is generated (no per-element Python, at most 1 MiB of RNG output per
tensor), so synthesis runs at the speed of hashing and writing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from loader.errors import HeaderError
from loader.format import DTYPES, dtype_name
from shapes import quantized
from shapes.errors import ShapesError
from shapes.spec import ShapeSpec

PERIOD_BYTES = 8 * 131_071
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "C64"})

# dtype -> (unsigned view, AND mask, OR bits): a float keeps its sign and mantissa and gets a fixed
# exponent; a 64-bit integer keeps its low 31 bits.
_MASKS: dict[str, tuple[type[np.unsignedinteger], int, int]] = {
    "F64": (np.uint64, 0x800F_FFFF_FFFF_FFFF, 0x3FE0_0000_0000_0000),
    "F32": (np.uint32, 0x807F_FFFF, 0x3F00_0000),
    "C64": (np.uint32, 0x807F_FFFF, 0x3F00_0000),
    "F16": (np.uint16, 0x83FF, 0x3800),
    "BF16": (np.uint16, 0x807F, 0x3F00),
    "F8_E4M3": (np.uint8, 0x87, 0x30),
    "F8_E5M2": (np.uint8, 0x83, 0x38),
    "BOOL": (np.uint8, 0x01, 0x00),
    "I64": (np.uint64, 0x7FFF_FFFF, 0x00),
    "U64": (np.uint64, 0x7FFF_FFFF, 0x00),
}
# a scale's float dtype -> the unsigned view its bits are masked through
_UNSIGNED: dict[str, type[np.unsignedinteger]] = {
    "F32": np.uint32,
    "BF16": np.uint16,
    "F16": np.uint16,
}


@dataclass(frozen=True)
class Fill:
    """What a tensor's bytes are: random bits under `mask` (unsigned view, AND mask, OR bits; None:
    all bits kept), or the `fixed` values themselves (a tensor with nothing random in it)."""

    mask: tuple[type[np.unsignedinteger], int, int] | None = None
    fixed: tuple[int, ...] | None = None


def fill(name: str, dtype: str, shape_of: Callable[[str], tuple[int, ...] | None]) -> Fill:
    """How tensor `name`, stored as `dtype`, is synthesised; `shape_of` gives the shape of any
    other tensor of the checkpoint (None: no such tensor), for the roles of `shapes.quantized`.

    Example:
        >>> fill("h.weight", "F32", {}.get).mask == _MASKS["F32"]
        True
    """
    role = quantized.role(name, dtype, lambda n: shape_of(n) is not None)
    if role in quantized.SCALE_EXPONENT:
        return Fill(
            (_UNSIGNED[dtype], *quantized.scale_bits(dtype, quantized.SCALE_EXPONENT[role]))
        )
    if role is quantized.Role.FP8_WEIGHT and dtype == "F8_E4M3":
        return Fill((np.uint8, *quantized.E4M3_FINITE))
    if role is quantized.Role.E8M0_SCALES:
        return Fill((np.uint8, *quantized.e8m0_bits()))
    if role is quantized.Role.WEIGHT_SHAPE:
        return Fill(fixed=quantized.true_shape(name, shape_of))
    return Fill(_MASKS.get(dtype))


def normalize_dtype(dtype: object) -> str:
    """The safetensors name of `dtype` (`"bf16"`, `"bfloat16"`, `jnp.bfloat16` -> `"BF16"`)."""
    if isinstance(dtype, str) and dtype.upper() in DTYPES:
        return dtype.upper()
    try:
        # any object: np.dtype itself refuses what it cannot read (TypeError)
        return dtype_name(np.dtype(dtype))  # type: ignore[call-overload]
    except (TypeError, HeaderError):
        raise ShapesError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}") from None


def effective_dtype(stored: str, override: str | None) -> str:
    """The dtype a tensor stored as `stored` gets under a dtype override (float tensors only)."""
    return override if override is not None and stored in FLOAT_DTYPES else stored


def stored_dtypes(spec: ShapeSpec, dtype: object = None) -> dict[str, str]:
    """Each tensor's dtype in the file `spec` is synthesised into under the `dtype` override."""
    override = None if dtype is None else normalize_dtype(dtype)
    return {t.name: effective_dtype(t.dtype, override) for t in spec.tensors}


def stored_sizes(spec: ShapeSpec, dtype: object = None) -> list[int]:
    """Each tensor's bytes in the file `spec` is synthesised into under the `dtype` override."""
    override = None if dtype is None else normalize_dtype(dtype)
    return [t.numel * DTYPES[effective_dtype(t.dtype, override)].itemsize for t in spec.tensors]


def _seed_sequence(name: str, seed: int) -> np.random.SeedSequence:
    if not isinstance(seed, int) or seed < 0:
        raise ShapesError(f"seed must be a non-negative integer, got {seed!r}")
    words = np.frombuffer(hashlib.sha256(name.encode("utf-8")).digest()[:16], dtype=np.uint32)
    return np.random.SeedSequence([seed, *map(int, words)])


def block(name: str, dtype: str, nbytes: int, seed: int, how: Fill | None = None) -> np.ndarray:
    """The repeating block (uint8) of tensor `name` stored as `dtype` with `nbytes` data bytes,
    made as `how` says (default: `dtype`'s mask)."""
    how = how or Fill(_MASKS.get(dtype))
    if how.fixed is not None:
        fixed = np.asarray(how.fixed, DTYPES[dtype]).view(np.uint8)
        if fixed.size != nbytes:
            raise ShapesError(f"tensor {name!r}: {fixed.size} bytes of fixed values, not {nbytes}")
        return fixed
    length = min(nbytes, PERIOD_BYTES)
    raw = np.random.PCG64(_seed_sequence(name, seed)).random_raw(-(-length // 8))
    out = raw.view(np.uint8)[:length]
    if how.mask is not None and length:
        view_type, and_mask, or_bits = how.mask
        bits = out.view(view_type)
        bits &= view_type(and_mask)
        bits |= view_type(or_bits)
    return out


def chunks(
    name: str, dtype: str, nbytes: int, seed: int, how: Fill | None = None
) -> Iterator[memoryview]:
    """The tensor's bytes as a sequence of buffers (the block repeated, then a partial tail)."""
    if nbytes == 0:
        return
    # memoryview: numpy types it a buffer from 3.12
    data = block(name, dtype, nbytes, seed, how).data
    full, tail = divmod(nbytes, len(data))
    for _ in range(full):
        yield data
    if tail:
        yield data[:tail]


def values(
    name: str, dtype: str, shape: tuple[int, ...], seed: int, how: Fill | None = None
) -> np.ndarray:
    """The synthetic values of one tensor as a numpy array (stored dtype `dtype`)."""
    np_dtype = DTYPES[dtype]
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    if nbytes == 0:
        return np.zeros(shape, np_dtype)
    data = np.resize(block(name, dtype, nbytes, seed, how), nbytes)
    return data.view(np_dtype).reshape(shape)
