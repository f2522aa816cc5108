"""Declared key_map transforms: `Transpose(axes)`, `Reshape(shape)`, `Slice(axis, start, stop)`,
and `Stack(keys, axis, transform)` (one leaf from N file tensors).

`declared` holds the transforms and their composition (`Chain`); `view` the strided view of the
file tensor each one's result is (what `pipelined`'s reader threads fill in place); `stack` the
stacking of per-layer file tensors into one leaf (each layer through its own `Chain`); `part`
the block of the file tensor a leaf goes back to (what `save_model` writes the source layout
from); `quant` the quantized layouts (`Dequantize`, `Unpack`, `DequantizeMXFP4`: one leaf from a
weight and its scales), whose device side is `device_quant` (imported where jax is).
"""

from loader.transforms.declared import (
    DECLARED,
    Chain,
    Declared,
    Reshape,
    Slice,
    TransformError,
    Transpose,
    as_chain,
)
from loader.transforms.part import Part, Region, tile_check
from loader.transforms.quant import (
    QUANTIZED,
    Dequantize,
    DequantizeMXFP4,
    QuantError,
    Quantized,
    Unpack,
    as_quantized,
)
from loader.transforms.stack import Stack, StackError, as_stack
from loader.transforms.view import View, c_strides, reshape_strides

__all__ = [
    "DECLARED",
    "QUANTIZED",
    "Chain",
    "Declared",
    "Dequantize",
    "DequantizeMXFP4",
    "Part",
    "QuantError",
    "Quantized",
    "Region",
    "Reshape",
    "Slice",
    "Stack",
    "StackError",
    "TransformError",
    "Transpose",
    "Unpack",
    "View",
    "as_chain",
    "as_quantized",
    "as_stack",
    "c_strides",
    "reshape_strides",
    "tile_check",
]
