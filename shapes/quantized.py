"""The tensors of a quantized checkpoint by their role, and what synthesis writes into each.

A quantized layout stores a weight together with the tensors it is read with, named after it:

- compressed-tensors FP8 ("float-quantized"): `x.weight` F8_E4M3 + `x.weight_scale` (+
  `x.input_scale` for static activations);
- compressed-tensors int4 ("pack-quantized"): `x.weight_packed` I32 (eight nibbles to a word) +
  `x.weight_scale` (one per group of 128) + `x.weight_shape` I32 `[out, in]`;
- DeepSeek-V3 block FP8: `x.weight` F8_E4M3 + `x.weight_scale_inv` F32, one per 128x128 block;
- gpt-oss MXFP4: `x_blocks` U8 (two FP4 values to a byte) + `x_scales` U8 (E8M0 exponents, one
  per 32 values).

`role` names each such tensor from its name, its dtype and the names beside it, and
`shapes.content.fill` says what `shapes synth` writes into it so that the synthetic file
dequantizes to plausible weights: a scale positive and of the size a quantizer gives (the weight's
amax over the format's largest value), an E8M0 exponent near the bias (127), `weight_shape` the
true shape, an FP8 weight any finite E4M3 value (up to 448, the amax its scale maps to). Packed
ints and FP4 blocks keep all their random bits (every pattern is a valid value).
`dequantized_bytes` is the size of the model once every quantized weight is dequantized.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from loader.format import DTYPES
from shapes.errors import ShapesError
from shapes.spec import ShapeSpec

#: float dtypes a scale is stored in
SCALE_DTYPES = frozenset({"F32", "F16", "BF16"})
#: dequantized values per stored element of a packed tensor (I32: eight int4; U8: two FP4)
VALUES_PER_ELEMENT = {"I32": 8, "U8": 2}
#: (AND mask, OR bits) that keep any byte a finite E4M3FN value: its one NaN pattern per sign,
#: S.1111.111, becomes S.1111.110 (448), so a quantized weight spans the format's whole range
E4M3_FINITE = (0xFE, 0x00)
#: the exponent the synthetic E8M0 scales of an MXFP4 block take: 2**(e - 127), e in this range
E8M0_RANGE = (120, 123)


class Role(enum.Enum):
    """What a tensor of a quantized layout is (a tensor with none is a plain weight)."""

    FP8_WEIGHT = "fp8 weight"  # F8 values with a scale beside them
    WEIGHT_SCALE = "fp8 weight scale"  # per tensor, channel or 128x128 block; amax / 448
    INPUT_SCALE = "input scale"  # a static activation scale
    GROUP_SCALE = "int4 group scale"  # a pack-quantized weight's scale per group; amax / 7
    PACKED = "packed int4"
    WEIGHT_SHAPE = "weight shape"  # the true [out, in] of a packed weight
    FP4_BLOCKS = "fp4 blocks"
    E8M0_SCALES = "e8m0 scales"


#: Each scale role's binary exponent: the synthetic scale lies in [2**e, 2**(e + 1)), so the
#: dequantized weights reach an amax of 448 x that (FP8: 0.11 to 0.22), 7 x that (int4: 0.05 to
#: 0.11), and activations 448 x that (7 to 14).
SCALE_EXPONENT = {Role.WEIGHT_SCALE: -12, Role.GROUP_SCALE: -7, Role.INPUT_SCALE: -6}


def _stem(name: str, suffix: str) -> str | None:
    return name[: -len(suffix)] if name.endswith(suffix) else None


def role(name: str, dtype: str, has: Callable[[str], bool]) -> Role | None:
    """The role of tensor `name` stored as `dtype` in a checkpoint whose other names `has` answers.

    Example:
        >>> names = {"l.weight", "l.weight_scale"}
        >>> role("l.weight_scale", "F32", names.__contains__)
        <Role.WEIGHT_SCALE: 'fp8 weight scale'>
    """
    return _scale_role(name, has) if dtype in SCALE_DTYPES else _stored_role(name, dtype, has)


def _scale_role(name: str, has: Callable[[str], bool]) -> Role | None:
    for suffix in (".weight_scale", ".weight_scale_inv"):
        stem = _stem(name, suffix)
        if stem is not None:
            if has(f"{stem}.weight_packed"):
                return Role.GROUP_SCALE
            return Role.WEIGHT_SCALE if has(f"{stem}.weight") else None
    stem = _stem(name, ".input_scale")
    return Role.INPUT_SCALE if stem is not None and has(f"{stem}.weight") else None


#: (suffix, the dtypes it is stored in, the tensor beside it: the stem + this suffix, its role)
_BESIDE = (
    (".weight_packed", frozenset(VALUES_PER_ELEMENT), ".weight_scale", Role.PACKED),
    (".weight_shape", frozenset({"I32", "I64"}), ".weight_packed", Role.WEIGHT_SHAPE),
    ("_blocks", frozenset({"U8"}), "_scales", Role.FP4_BLOCKS),
    ("_scales", frozenset({"U8"}), "_blocks", Role.E8M0_SCALES),
)


def _stored_role(name: str, dtype: str, has: Callable[[str], bool]) -> Role | None:
    for suffix, dtypes, beside, kind in _BESIDE:
        stem = _stem(name, suffix)
        if stem is not None and dtype in dtypes and has(stem + beside):
            return kind
    if dtype.startswith("F8_") and (has(f"{name}_scale") or has(f"{name}_scale_inv")):
        return Role.FP8_WEIGHT
    return None


def scale_bits(dtype: str, exponent: int) -> tuple[int, int]:
    """(AND mask, OR bits) that make random bits of a float `dtype` a positive value in
    [2**exponent, 2**(exponent + 1)): sign cleared, exponent fixed, mantissa random.

    Example:
        >>> [hex(b) for b in scale_bits("F32", -12)]
        ['0x7fffff', '0x39800000']
    """
    mantissa, bias = {"F32": (23, 127), "BF16": (7, 127), "F16": (10, 15)}[dtype]
    return (1 << mantissa) - 1, (bias + exponent) << mantissa


def e8m0_bits() -> tuple[int, int]:
    """(AND mask, OR bits) that make a random byte an exponent in `E8M0_RANGE`."""
    low, high = E8M0_RANGE
    assert high - low == 3 and low % 4 == 0, "the range must be one aligned 2-bit span"
    return 0x03, low


def true_shape(name: str, shape_of: Callable[[str], tuple[int, ...] | None]) -> tuple[int, ...]:
    """The dequantized `[out, in]` of the packed weight whose `weight_shape` is `name`.

    Example:
        >>> true_shape("l.weight_shape", {"l.weight_packed": (4, 2)}.get)
        (4, 16)
    """
    stem = name[: -len(".weight_shape")]
    packed = shape_of(f"{stem}.weight_packed")
    if packed is None or len(packed) != 2:
        raise ShapesError(f"{name}: no 2-D {stem}.weight_packed beside it to take its shape from")
    return packed[0], packed[1] * VALUES_PER_ELEMENT["I32"]


def dequantized_bytes(
    spec: ShapeSpec, stored: Mapping[str, str] | None = None, itemsize: int = 2
) -> int | None:
    """The bytes of `spec`'s model once every quantized weight is dequantized to `itemsize` bytes
    a value (bfloat16 by default): scales, shapes and exponents fold into their weights, other
    tensors keep their stored size. None where no tensor is quantized.

    Args:
        spec: the shape spec.
        stored: each tensor's dtype in the file where a synthesis override changed it
            (`shapes.content.stored_dtypes`): an FP8 weight stored as a float is not quantized.
        itemsize: bytes of one dequantized value.

    Example:
        >>> from shapes import load_spec
        >>> dequantized_bytes(load_spec("tiny-gpt2")) is None
        True
    """
    dtypes = {t.name: t.dtype for t in spec.tensors} | dict(stored or {})
    total, quantized = 0, False
    for t in spec.tensors:
        dtype = dtypes[t.name]
        kind = role(t.name, dtype, dtypes.__contains__)
        if kind in (Role.FP8_WEIGHT, Role.PACKED, Role.FP4_BLOCKS):
            per = VALUES_PER_ELEMENT.get(dtype, 1)
            total, quantized = total + t.numel * per * itemsize, True
        elif kind is None:
            total += t.numel * DTYPES[dtype].itemsize
    return total if quantized else None
