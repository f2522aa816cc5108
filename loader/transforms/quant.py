"""Quantized layouts as declared transforms: one model leaf from a weight and the tensors it needs.

A quantized checkpoint stores a layer as several tensors (the packed or low-precision weight, its
scale, maybe a zero point, a shape, a group index). A key_map entry names them, as a `Stack` names
its layers, and the transform makes the model's float leaf (its dtype: the leaf's):

- `Dequantize(weight, scale, block=None)`: FP8 (any F8_*) times a per-tensor, per-channel
  (`[out, 1]` or `[out]`) or block scale (`[ceil(out / bo), ceil(in / bi)]`, `block=(bo, bi)`
  declared). compressed-tensors' `weight_scale` and DeepSeek-V3's `weight_scale_inv` are both
  multiplied (DeepSeek's `weight_dequant` kernel computes `x * s` despite the name).
- `Unpack`: int4 packed eight to an I32 (or two to a U8), with group-wise scales and zero points,
  in the three orders checkpoints use (`Unpack.compressed_tensors`, `Unpack.gptq`, `Unpack.awq`).
- `DequantizeMXFP4(blocks, scales)`: gpt-oss's MXFP4: U8 blocks of two FP4 E2M1 values a byte
  (low nibble first) and one E8M0 exponent (U8 or F8_E8M0) per 32 values.

Each may carry declared transforms applied after it (`then`, or the tuple form
`(Dequantize(...), Transpose((1, 0)))`, as with `Stack`), e.g. to a Flax `(in, out)` kernel.

The arithmetic is the reference's, to the bit: the integer (or fp8) value and the scale are
multiplied in float32 (exact for int4 and FP4 values; for FP8 by a float32 scale, rounded once,
as a float32 multiply is), rounded to the scale's dtype where it is narrower (compressed-tensors
and GPTQ multiply in the scale's dtype), then cast to the leaf's dtype. This module is the host
(numpy) implementation, which every non-staged strategy runs; `loader.transforms.device_quant`
is the same arithmetic as one jax program per layout and shape, which `pipelined` runs on the
device after sending the file's bytes. Both are checked against an independent numpy reference
in the tests, bit for bit.

Before any byte is read, `check` proves from the headers that every tensor has the shape and
dtype its weight needs (a scale of the wrong shape or block, a packed length that does not match
the declared shape): a `QuantError` naming the tensor, a mismatch a strict load refuses.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from loader.format.records import TensorMeta
from loader.transforms.declared import Chain, TransformError, as_chain

#: FP4 E2M1's 16 values, by nibble (sign bit high): the OCP microscaling table.
FP4_VALUES = np.array(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    np.float32,
)
#: AWQ's interleave: output column 8k + p holds the nibble at position AWQ_ORDER[p] of its int32.
AWQ_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)
SEQUENTIAL = tuple(range(8))
_FP8 = ("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ")
_FLOAT_SCALES = ("F32", "BF16", "F16")

Infos = Mapping[str, TensorMeta]


class QuantError(TransformError):
    """A quantized layout's tensors do not fit together (shape, block, dtype), named."""


def _then(then: object, where: str) -> Chain | None:
    if then is None:
        return None
    chain = as_chain(then, where)
    if not isinstance(chain, Chain):
        raise QuantError(f"{where}: `then` must be declared transforms, got {then!r}")
    return chain


def _refuse(info: TensorMeta, what: str) -> QuantError:
    return QuantError(f"tensor {info.name!r} ({info.dtype} {list(info.shape)}): {what}")


def _want_dtype(info: TensorMeta, allowed: tuple[str, ...], role: str) -> None:
    if info.dtype not in allowed:
        raise _refuse(info, f"a {role} must be one of {', '.join(allowed)}")


def _scale_dtype(scale: np.dtype) -> np.dtype:
    """The dtype a product is rounded to before the leaf's cast: the scale's, where narrower."""
    return scale if scale.itemsize < 4 else np.dtype(np.float32)


def finish_host(product: np.ndarray, scale_dtype: np.dtype, dtype: np.dtype) -> np.ndarray:
    """A float32 product rounded to the scale's dtype (where narrower), then to the leaf's."""
    return product.astype(_scale_dtype(np.dtype(scale_dtype))).astype(dtype)


@dataclass(frozen=True)
class Quantized:
    """What every quantized layout has: its file tensors by role, and the transforms after it."""

    keys: dict[str, str] = field(hash=False)
    then: Chain | None

    @property
    def file_keys(self) -> tuple[str, ...]:
        return tuple(self.keys.values())

    @property
    def layout(self) -> str:  # the layout's name, in the plan
        raise NotImplementedError

    def program_key(self) -> tuple[object, ...]:
        """What the device program depends on besides shapes and dtypes (never the file keys)."""
        return (type(self).__name__, self.layout, str(self.then))

    def dequantized_shape(self, infos: Infos) -> tuple[int, ...]:
        """The dequantized tensor's shape before `then`; `QuantError` naming a tensor that does
        not fit."""
        raise NotImplementedError

    def out_shape(self, infos: Infos) -> tuple[int, ...]:
        shape = self.dequantized_shape(infos)
        return shape if self.then is None else self.then.out_shape(shape)

    #: the roles whose values (not only shapes) must be checked: small tensors, read on the host
    CHECKED_VALUES: ClassVar[tuple[str, ...]] = ()

    def check_values(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Check what the header cannot say (`CHECKED_VALUES`' values): `QuantError` naming the
        tensor."""

    def host(self, arrays: Mapping[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
        """The leaf from the file tensors by role, with numpy (`then` applied)."""
        self.check_values(arrays)
        with np.errstate(over="ignore", invalid="ignore"):  # to inf and NaN, as IEEE says
            out = self.dequantize(arrays, np.dtype(dtype))
        return out if self.then is None else np.ascontiguousarray(self.then(out))

    def dequantize(self, arrays: Mapping[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
        raise NotImplementedError

    def with_then(self, then: object) -> Quantized:
        """This layout with `then` after its own (the tuple form of a key_map entry)."""
        added = _then(then, str(self))
        assert added is not None
        steps = (*(self.then.steps if self.then else ()), *added.steps)
        return _replace(self, Chain(steps))

    def __str__(self) -> str:
        after = f" then {self.then}" if self.then is not None else ""
        return f"{type(self).__name__}({self.layout}: {', '.join(self.file_keys)}){after}"


def _replace(q: Quantized, then: Chain) -> Quantized:
    new = copy.copy(q)
    object.__setattr__(new, "then", then)
    return new


# -- FP8 with a scale ------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class Dequantize(Quantized):
    """An FP8 weight times its scale: per tensor, per output channel, or per declared block.

    Args:
        weight: the file key of the F8_* weight (`...weight`).
        scale: the file key of its scale (`...weight_scale`, or DeepSeek's `...weight_scale_inv`:
            multiplied too), F32, BF16 or F16.
        block: `(rows, cols)` of a block scale (DeepSeek: `(128, 128)`); None: the scale is one
            value or one per row.
        then: declared transforms after it (e.g. `Transpose((1, 0))` for a Flax kernel).

    Example:
        >>> q = Dequantize("l.weight", "l.weight_scale_inv", block=(128, 128))
        >>> q.layout
        'fp8 block 128x128'
    """

    block: tuple[int, int] | None

    def __init__(
        self,
        weight: str,
        scale: str,
        block: tuple[int, int] | None = None,
        then: object = None,
    ) -> None:
        if block is not None and (len(block) != 2 or min(block) < 1):
            raise QuantError(f"Dequantize({weight!r}): block {block!r} must be (rows, cols) >= 1")
        object.__setattr__(self, "keys", {"weight": weight, "scale": scale})
        object.__setattr__(self, "then", _then(then, f"Dequantize({weight!r})"))
        object.__setattr__(self, "block", None if block is None else tuple(map(int, block)))

    @classmethod
    def compressed_tensors(cls, prefix: str, then: object = None) -> Dequantize:
        """compressed-tensors' float-quantized layer: `prefix.weight`, `prefix.weight_scale`."""
        return cls(f"{prefix}.weight", f"{prefix}.weight_scale", then=then)

    @classmethod
    def deepseek(
        cls, prefix: str, block: tuple[int, int] = (128, 128), then: object = None
    ) -> Dequantize:
        """DeepSeek-V3's block-FP8 layer: `prefix.weight`, `prefix.weight_scale_inv`."""
        return cls(f"{prefix}.weight", f"{prefix}.weight_scale_inv", block=block, then=then)

    @property
    def layout(self) -> str:
        return "fp8" if self.block is None else f"fp8 block {self.block[0]}x{self.block[1]}"

    def program_key(self) -> tuple[object, ...]:
        return (*super().program_key(), self.block)

    def scale_kind(self, weight: tuple[int, ...], scale: tuple[int, ...]) -> str | None:
        """'tensor', 'channel' or 'block' for a scale of shape `scale`; None if it fits none."""
        if self.block is not None:
            if len(weight) != 2:
                return None
            want = tuple(math.ceil(n / b) for n, b in zip(weight, self.block))
            return "block" if tuple(scale) == want else None
        if math.prod(scale) == 1 and len(scale) <= max(len(weight), 1):
            return "tensor"
        if weight and tuple(scale) in ((weight[0], 1), (weight[0],)) and len(weight) == 2:
            return "channel"
        return None

    def dequantized_shape(self, infos: Infos) -> tuple[int, ...]:
        weight, scale = infos["weight"], infos["scale"]
        _want_dtype(weight, _FP8, "Dequantize weight")
        _want_dtype(scale, _FLOAT_SCALES, "scale")
        if self.scale_kind(weight.shape, scale.shape) is None:
            if self.block is not None:
                want = [math.ceil(n / b) for n, b in zip(weight.shape, self.block)]
                need = f"{want} for {self.block[0]}x{self.block[1]} blocks"
            else:
                rows = weight.shape[0] if weight.shape else 1
                need = f"[1] (per tensor) or [{rows}, 1] (per channel); declare block= otherwise"
            what = f"does not scale weight {weight.name!r} {list(weight.shape)}"
            raise _refuse(scale, f"{what}: expected {need}")
        return weight.shape

    def full_scale(self, scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """The scale broadcast to the weight's shape."""
        if self.block is None:
            flat = scale.reshape(-1)
            return flat.reshape(()) if flat.size == 1 else flat.reshape(shape[0], 1)
        rows = np.repeat(scale, self.block[0], axis=0)[: shape[0]]
        return np.repeat(rows, self.block[1], axis=1)[:, : shape[1]]

    def dequantize(self, arrays: Mapping[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
        weight, scale = arrays["weight"], arrays["scale"]
        full = self.full_scale(scale.astype(np.float32), weight.shape)
        return finish_host(weight.astype(np.float32) * full, scale.dtype, dtype)


# -- int4 packed in I32 or U8 ----------------------------------------------------------------------


@dataclass(frozen=True)
class Packing:
    """How int4 values sit in a container: along which axis, in what order within one."""

    axis: int  # the axis of the unpacked tensor the values were packed along
    order: tuple[int, ...] = SEQUENTIAL  # position p of a run takes the nibble at order[p]


def _run(order: tuple[int, ...], per: int) -> tuple[int, ...]:
    return order if per == 8 else tuple(range(per))


def unpack_host(packed: np.ndarray, packing: Packing, size: int) -> np.ndarray:
    """The int4 values (0..15, int32) of `packed`, unpacked along `packing.axis` to `size`."""
    per = packed.dtype.itemsize * 2
    raw = packed.astype(np.int64) & ((1 << (4 * per)) - 1)  # the container's bits, unsigned
    shifts = 4 * np.asarray(_run(packing.order, per), np.int64)
    axis = packing.axis
    moved = np.moveaxis(raw, axis, -1)
    nibbles = (moved[..., None] >> shifts) & 15
    out = nibbles.reshape(*moved.shape[:-1], moved.shape[-1] * per)[..., :size]
    return np.moveaxis(out, -1, axis).astype(np.int32)


@dataclass(frozen=True, init=False)
class Unpack(Quantized):
    """int4 values packed in I32 (eight) or U8 (two), times group-wise scales.

    The dequantized value is `(q - zero) * scale[group]`, groups running along the input axis (of
    `group_size` values, or as `g_idx` says), in one of three checkpoint conventions (use the
    constructors):

    - `Unpack.compressed_tensors(prefix, shape=(out, in))`: `weight_packed` I32 `[out, in / 8]`
      (values packed along the input axis, the first in the lowest bits, stored `q + 8`),
      `weight_scale` `[out, in / group]`, optional `weight_zero_point` I32 packed along the output
      axis (`[out / 8, in / group]`, also `+ 8`); the leaf is `[out, in]`. `weight_shape` (I32
      `[2]`, the values `out, in`) is read and checked against `shape`.
    - `Unpack.gptq(prefix)`: `qweight` I32 `[in / 8, out]` packed along the input axis, `qzeros` I32
      `[groups, out / 8]` packed along the output axis and stored `zero - 1`, `scales`
      `[groups, out]`, optional `g_idx` I32 `[in]`; the leaf is `[in, out]`.
    - `Unpack.awq(prefix)`: `qweight` I32 `[in, out / 8]` and `qzeros` `[groups, out / 8]` packed
      along the output axis in AWQ's interleaved order (`AWQ_ORDER`), `scales` `[groups, out]`;
      the leaf is `[in, out]`.

    Example:
        >>> Unpack.compressed_tensors("l", shape=(4096, 4096)).layout
        'int4 compressed-tensors group 128'
    """

    flavor: str
    shape: tuple[int, int] | None
    group_size: int
    weight_packing: Packing
    zero_packing: Packing
    input_axis: int
    weight_offset: int  # subtracted from each weight nibble
    zero_offset: int  # added to each zero-point nibble (GPTQ: +1; compressed-tensors: -8)

    def __init__(self, keys: dict[str, str], then: object = None, **params: object) -> None:
        object.__setattr__(self, "keys", dict(keys))
        object.__setattr__(self, "then", _then(then, f"Unpack({keys.get('weight')!r})"))
        for name, value in params.items():
            object.__setattr__(self, name, value)
        if int(self.group_size) < 1:
            raise QuantError(f"Unpack({keys.get('weight')!r}): group_size must be >= 1")

    @classmethod
    def compressed_tensors(
        cls,
        prefix: str,
        shape: tuple[int, int] | None = None,
        group_size: int = 128,
        zero_point: bool = False,
        then: object = None,
    ) -> Unpack:
        keys = {"weight": f"{prefix}.weight_packed", "scale": f"{prefix}.weight_scale"}
        keys["shape"] = f"{prefix}.weight_shape"
        if zero_point:
            keys["zero"] = f"{prefix}.weight_zero_point"
        return cls(
            keys,
            then,
            flavor="compressed-tensors",
            shape=None if shape is None else (int(shape[0]), int(shape[1])),
            group_size=int(group_size),
            weight_packing=Packing(1),
            zero_packing=Packing(0),
            input_axis=1,
            weight_offset=8,
            zero_offset=-8,
        )

    @classmethod
    def gptq(
        cls, prefix: str, group_size: int = 128, g_idx: bool = False, then: object = None
    ) -> Unpack:
        keys = {"weight": f"{prefix}.qweight", "zero": f"{prefix}.qzeros"}
        keys["scale"] = f"{prefix}.scales"
        if g_idx:
            keys["g_idx"] = f"{prefix}.g_idx"
        return cls(
            keys,
            then,
            flavor="gptq",
            shape=None,
            group_size=int(group_size),
            weight_packing=Packing(0),
            zero_packing=Packing(1),
            input_axis=0,
            weight_offset=0,
            zero_offset=1,
        )

    @classmethod
    def awq(cls, prefix: str, group_size: int = 128, then: object = None) -> Unpack:
        keys = {"weight": f"{prefix}.qweight", "zero": f"{prefix}.qzeros"}
        keys["scale"] = f"{prefix}.scales"
        return cls(
            keys,
            then,
            flavor="awq",
            shape=None,
            group_size=int(group_size),
            weight_packing=Packing(1, AWQ_ORDER),
            zero_packing=Packing(1, AWQ_ORDER),
            input_axis=0,
            weight_offset=0,
            zero_offset=0,
        )

    @property
    def layout(self) -> str:
        return f"int4 {self.flavor} group {self.group_size}"

    def program_key(self) -> tuple[object, ...]:
        return (*super().program_key(), self.shape, tuple(sorted(self.keys)))

    def _checked_shape(self, weight: TensorMeta) -> tuple[int, int]:
        """`unpacked_shape`, where the packed tensor holds it: the declared shape differs from
        the packed one only by the padding of the last container along the packed axis."""
        per, axis = weight.np_dtype.itemsize * 2, self.weight_packing.axis
        full = list(weight.shape)
        full[axis] *= per
        declared = self.unpacked_shape(weight.shape, weight.np_dtype)
        fits = all(declared[a] == full[a] for a in (0, 1) if a != axis) and (
            full[axis] - per < declared[axis] <= full[axis]
        )
        if not fits:
            how = f"{per} int4 values a {weight.dtype} along axis {axis}"
            raise _refuse(weight, f"does not unpack to the declared shape {list(declared)} ({how})")
        return declared

    def dequantized_shape(self, infos: Infos) -> tuple[int, ...]:
        weight, scale = infos["weight"], infos["scale"]
        _want_dtype(weight, ("I32", "U8"), "packed int4 weight")
        _want_dtype(scale, _FLOAT_SCALES, "scale")
        if len(weight.shape) != 2:
            raise _refuse(weight, "a packed int4 weight must be 2-d")
        shape = self._checked_shape(weight)
        inputs, outputs = shape[self.input_axis], shape[1 - self.input_axis]
        groups = math.ceil(inputs / self.group_size)
        want = [0, 0]
        want[self.input_axis], want[1 - self.input_axis] = groups, outputs
        if "g_idx" in infos:
            g_idx = infos["g_idx"]
            _want_dtype(g_idx, ("I32",), "g_idx")
            if g_idx.shape != (inputs,):
                raise _refuse(g_idx, f"g_idx must be [{inputs}] (one group per input)")
            want[self.input_axis] = scale.shape[self.input_axis] if scale.shape else 0
        if list(scale.shape) != want:
            what = f"does not scale {weight.name!r} {list(shape)} in groups of {self.group_size}"
            raise _refuse(scale, f"{what}: expected {want}")
        if "zero" in infos:
            self._check_zero(infos["zero"], want)
        if "shape" in infos and (infos["shape"].dtype, infos["shape"].shape) != ("I32", (2,)):
            raise _refuse(infos["shape"], "weight_shape must be I32 [2]")
        return shape

    def _check_zero(self, zero: TensorMeta, groups_shape: list[int]) -> None:
        _want_dtype(zero, ("I32",), "packed zero point")
        axis = self.zero_packing.axis
        want = list(groups_shape)
        want[axis] = math.ceil(want[axis] / 8)
        if list(zero.shape) != want:
            what = f"zero points for groups {groups_shape} packed eight to an I32 along axis {axis}"
            raise _refuse(zero, f"{what} must be {want}")

    def group_index(self, arrays: Mapping[str, np.ndarray], inputs: int) -> np.ndarray:
        if "g_idx" in arrays:
            return arrays["g_idx"].astype(np.int64)
        return np.arange(inputs) // self.group_size

    CHECKED_VALUES = ("shape", "g_idx")

    def unpacked_shape(self, packed: tuple[int, ...], container: np.dtype) -> tuple[int, int]:
        """The dequantized shape: the declared one, or the packed one unpacked."""
        shape = list(packed)
        shape[self.weight_packing.axis] *= container.itemsize * 2
        return self.shape or (shape[0], shape[1])

    def check_values(self, arrays: Mapping[str, np.ndarray]) -> None:
        """`weight_shape` must hold the planned shape; `g_idx` only groups the scale has."""
        shape = self.unpacked_shape(arrays["weight"].shape, arrays["weight"].dtype)
        if "shape" in arrays and tuple(int(v) for v in arrays["shape"]) != shape:
            raise QuantError(
                f"tensor {self.keys['shape']!r} holds {arrays['shape'].tolist()}, not the shape "
                f"{list(shape)} the layout was planned with"
            )
        groups = arrays["scale"].shape[self.input_axis]
        g = arrays.get("g_idx")
        if g is not None and g.size and (g.min() < 0 or g.max() >= groups):
            raise QuantError(
                f"tensor {self.keys['g_idx']!r}: group indices run {g.min()}..{g.max()}, "
                f"outside the {groups} groups of {self.keys['scale']!r}"
            )

    def dequantize(self, arrays: Mapping[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
        weight, scale = arrays["weight"], arrays["scale"]
        shape = self.unpacked_shape(weight.shape, weight.dtype)
        axis = self.input_axis
        q = unpack_host(weight, self.weight_packing, shape[self.weight_packing.axis])
        q = q[: shape[0], : shape[1]] - self.weight_offset
        g = self.group_index(arrays, shape[axis])
        if "zero" in arrays:
            zsize = scale.shape[self.zero_packing.axis]
            zeros = unpack_host(arrays["zero"], self.zero_packing, zsize) + self.zero_offset
            q = q - np.take(zeros, g, axis=axis)
        full = np.take(scale.astype(np.float32), g, axis=axis)
        return finish_host(q.astype(np.float32) * full, scale.dtype, dtype)


# -- MXFP4 -----------------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class DequantizeMXFP4(Quantized):
    """gpt-oss's MXFP4: FP4 E2M1 pairs in U8 blocks, one E8M0 exponent per block of 32 values.

    `blocks` is U8 `[..., groups, 16]` (value 2i in the low nibble of byte i, 2i + 1 in the high),
    `scales` U8 or F8_E8M0 `[..., groups]` (the value is `FP4 * 2 ** (scale - 127)`); the leaf is
    `[..., groups * 32]` before `then` (gpt-oss's `transformers` port transposes the last two).

    Example:
        >>> DequantizeMXFP4("e.gate_up_proj_blocks", "e.gate_up_proj_scales").layout
        'mxfp4'
    """

    def __init__(self, blocks: str, scales: str, then: object = None) -> None:
        object.__setattr__(self, "keys", {"blocks": blocks, "scales": scales})
        object.__setattr__(self, "then", _then(then, f"DequantizeMXFP4({blocks!r})"))

    @classmethod
    def gpt_oss(cls, prefix: str, then: object = None) -> DequantizeMXFP4:
        """gpt-oss's experts: `prefix_blocks`, `prefix_scales` (`prefix` e.g.
        `model.layers.0.mlp.experts.gate_up_proj`)."""
        return cls(f"{prefix}_blocks", f"{prefix}_scales", then=then)

    @property
    def layout(self) -> str:
        return "mxfp4"

    def dequantized_shape(self, infos: Infos) -> tuple[int, ...]:
        blocks, scales = infos["blocks"], infos["scales"]
        if blocks.dtype == "F4":
            raise _refuse(blocks, "F4 blocks: store them as U8 (two values a byte), as gpt-oss")
        _want_dtype(blocks, ("U8",), "MXFP4 block tensor")
        _want_dtype(scales, ("U8", "F8_E8M0"), "MXFP4 scale")
        if len(blocks.shape) < 2 or blocks.shape[-1] != 16:
            raise _refuse(blocks, "MXFP4 blocks must be [..., groups, 16] (32 values a block)")
        if scales.shape != blocks.shape[:-1]:
            want = list(blocks.shape[:-1])
            raise _refuse(scales, f"must be {want}, one exponent per block of {blocks.name!r}")
        return (*blocks.shape[:-2], blocks.shape[-2] * 32)

    def dequantize(self, arrays: Mapping[str, np.ndarray], dtype: np.dtype) -> np.ndarray:
        blocks = arrays["blocks"]
        exps = arrays["scales"].view(np.uint8).astype(np.uint32)
        values = np.stack([FP4_VALUES[blocks & 15], FP4_VALUES[blocks >> 4]], axis=-1)
        values = values.reshape(*blocks.shape[:-1], 32)
        scale = e8m0_to_float32(exps)[..., None]
        out: np.ndarray = (values * scale).reshape(*blocks.shape[:-2], -1).astype(dtype)
        return out  # 0 * 2**128 is NaN, as in torch


def e8m0_to_float32(exps: np.ndarray) -> np.ndarray:
    """`2 ** (e - 127)` as float32, built from its bits (exact; 0 -> 2**-127, 255 -> inf)."""
    bits = np.where(exps == 0, np.uint32(0x00400000), exps.astype(np.uint32) << 23)
    out: np.ndarray = bits.astype(np.uint32).view(np.float32)
    return out


QUANTIZED = (Dequantize, Unpack, DequantizeMXFP4)


def as_quantized(entry: object) -> Quantized | None:
    """A key_map entry as a quantized layout (`Dequantize(...)` or `(Dequantize(...), then)`)."""
    if isinstance(entry, Quantized):
        return entry
    if isinstance(entry, tuple) and entry and isinstance(entry[0], Quantized):
        if len(entry) != 2:
            raise QuantError(
                f"key_map entry {entry!r}: write (layout, transform) with the declared transform "
                "(or a tuple of them) as its second item"
            )
        return entry[0].with_then(entry[1])
    return None
