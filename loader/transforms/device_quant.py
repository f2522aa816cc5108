"""The quantized layouts on the device: the arithmetic of `loader.transforms.quant`, in jax.

A staged load (`pipelined`) sends a quantized layer's file tensors to the device as they are (an
FP8 weight is half the bytes of its bfloat16 leaf, a packed int4 one a quarter) and makes the leaf
there, so the host never holds the dequantized model. `dequantize` runs one compiled program per
layout, shapes, dtypes and placement (`program_key`): never per tensor, so a model whose 32
layers share 7 shapes compiles 7 programs. `compiled()` counts the programs made so far (a test
holds it to the shapes).

The arithmetic is the host's step for step (float32 products, rounded to the scale's dtype where
narrower, then to the leaf's), with only exact operations: integer shifts and masks, exact
conversions of FP8 / int4 / FP4 values to float32, and E8M0 exponents built from their bits
rather than by `exp2`. So the device gives the host's bits, on any backend that keeps float32
subnormals (a TPU flushes them: an MXFP4 exponent byte of 0 or 1, or a product below 2**-126,
reads as zero there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Sharding

from loader.transforms.declared import Chain, Reshape, Slice, Transpose
from loader.transforms.quant import (
    FP4_VALUES,
    Dequantize,
    DequantizeMXFP4,
    Packing,
    Quantized,
    Unpack,
    _run,
)

_lock = threading.Lock()
_programs: dict[tuple[object, ...], Callable[..., Any]] = {}
_compiles = [0]


def compiled() -> int:
    """Programs traced and compiled so far in this process (one per `program_key`)."""
    return _compiles[0]


def _finish(product: jax.Array, scale_dtype: np.dtype, dtype: np.dtype) -> jax.Array:
    if np.dtype(scale_dtype).itemsize < 4:
        product = product.astype(scale_dtype)
    return product.astype(dtype)


def _then(chain: Chain | None, x: jax.Array) -> jax.Array:
    for step in chain.steps if chain is not None else ():
        if isinstance(step, Transpose):
            x = jnp.transpose(x, step._axes(x.ndim))
        elif isinstance(step, Reshape):
            x = jnp.reshape(x, step.out_shape(tuple(x.shape)))
        elif isinstance(step, Slice):
            axis = step._axis(tuple(x.shape))
            x = jax.lax.slice_in_dim(x, step.start, step.stop, axis=axis)
    return x


def _unpack(packed: jax.Array, packing: Packing, size: int) -> jax.Array:
    per = packed.dtype.itemsize * 2
    raw = packed.astype(jnp.int32) if per == 2 else packed
    shifts = 4 * jnp.asarray(_run(packing.order, per), jnp.int32)
    moved = jnp.moveaxis(raw, packing.axis, -1)
    nibbles = (moved[..., None] >> shifts) & 15
    out = nibbles.reshape(*moved.shape[:-1], moved.shape[-1] * per)[..., :size]
    return jnp.moveaxis(out, -1, packing.axis)


def _fp8(q: Dequantize, a: Mapping[str, jax.Array], dtype: np.dtype) -> jax.Array:
    weight, scale = a["weight"], a["scale"]
    s = scale.astype(jnp.float32)
    if q.block is None:
        flat = s.reshape(-1)
        full = flat.reshape(()) if flat.size == 1 else flat.reshape(weight.shape[0], 1)
    else:
        rows = jnp.repeat(s, q.block[0], axis=0)[: weight.shape[0]]
        full = jnp.repeat(rows, q.block[1], axis=1)[:, : weight.shape[1]]
    return _finish(weight.astype(jnp.float32) * full, np.dtype(scale.dtype), dtype)


def _int4(q: Unpack, a: Mapping[str, jax.Array], dtype: np.dtype) -> jax.Array:
    weight, scale = a["weight"], a["scale"]
    out_shape = q.unpacked_shape(tuple(weight.shape), np.dtype(weight.dtype))
    axis = q.input_axis
    values = _unpack(weight, q.weight_packing, out_shape[q.weight_packing.axis])
    values = values[: out_shape[0], : out_shape[1]] - q.weight_offset
    if "g_idx" in a:
        g = a["g_idx"].astype(jnp.int32)
    else:
        g = jnp.arange(out_shape[axis], dtype=jnp.int32) // q.group_size
    if "zero" in a:
        zsize = scale.shape[q.zero_packing.axis]
        zeros = _unpack(a["zero"], q.zero_packing, zsize) + q.zero_offset
        values = values - jnp.take(zeros, g, axis=axis)
    full = jnp.take(scale.astype(jnp.float32), g, axis=axis)
    return _finish(values.astype(jnp.float32) * full, np.dtype(scale.dtype), dtype)


def _e8m0(exps: jax.Array) -> jax.Array:
    bits = exps.astype(jnp.uint32)
    bits = jnp.where(bits == 0, jnp.uint32(0x00400000), bits << 23)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _mxfp4(q: DequantizeMXFP4, a: Mapping[str, jax.Array], dtype: np.dtype) -> jax.Array:
    blocks, scales = a["blocks"], a["scales"]
    if scales.dtype != jnp.uint8:
        scales = jax.lax.bitcast_convert_type(scales, jnp.uint8)
    lut = jnp.asarray(FP4_VALUES)
    pairs = jnp.stack([lut[blocks & 15], lut[blocks >> 4]], axis=-1)
    values = pairs.reshape(*blocks.shape[:-1], 32)
    out = values * _e8m0(scales)[..., None]
    return out.reshape(*blocks.shape[:-2], -1).astype(dtype)


_KERNELS: dict[type, Callable[..., jax.Array]] = {
    Dequantize: _fp8,
    Unpack: _int4,
    DequantizeMXFP4: _mxfp4,
}


def program_key(
    q: Quantized, arrays: Mapping[str, Any], dtype: np.dtype, sharding: Sharding | None
) -> tuple[object, ...]:
    """What one compiled program serves: the layout (not its file keys), the parts' shapes and
    dtypes, the leaf's dtype and placement."""
    parts = tuple(
        (role, tuple(a.shape), str(a.dtype), str(getattr(a, "sharding", "")))
        for role, a in sorted(arrays.items())
    )
    return (q.program_key(), parts, str(np.dtype(dtype)), str(sharding))


def dequantize(
    q: Quantized, arrays: Mapping[str, jax.Array], dtype: np.dtype, sharding: Sharding | None
) -> jax.Array:
    """The leaf from its parts already on the device(s), placed with `sharding` (its own)."""
    key = program_key(q, arrays, dtype, sharding)
    with _lock:
        program = _programs.get(key)
        if program is None:
            kernel, roles = _KERNELS[type(q)], tuple(sorted(arrays))
            out_dtype = np.dtype(dtype)

            def run(*parts: jax.Array) -> jax.Array:
                _compiles[0] += 1  # runs once, when jax traces the program
                return _then(q.then, kernel(q, dict(zip(roles, parts)), out_dtype))

            program = jax.jit(run, out_shardings=sharding)
            _programs[key] = program
    out: jax.Array = program(*(arrays[role] for role in sorted(arrays)))
    return out
