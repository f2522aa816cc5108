"""Declared key_map transforms: `Transpose(axes)`, `Reshape(shape)`, `Slice(axis, start, stop)`,
and `Stack(keys, axis, transform)` (one leaf from N file tensors).

`declared` holds the transforms and their composition (`Chain`); `view` the strided view of the
file tensor each one's result is (what `pipelined`'s reader threads fill in place); `stack` the
stacking of per-layer file tensors into one leaf (each layer through its own `Chain`); `part`
the block of the file tensor a leaf goes back to (what `save_model` writes the source layout
from).
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
from loader.transforms.stack import Stack, StackError, as_stack
from loader.transforms.view import View, c_strides, reshape_strides

__all__ = [
    "DECLARED",
    "Chain",
    "Declared",
    "Part",
    "Region",
    "Reshape",
    "Slice",
    "Stack",
    "StackError",
    "TransformError",
    "Transpose",
    "View",
    "as_chain",
    "as_stack",
    "c_strides",
    "reshape_strides",
    "tile_check",
]
