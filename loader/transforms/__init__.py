"""Declared key_map transforms: `Transpose(axes)`, `Reshape(shape)`, `Slice(axis, start, stop)`,
and `Stack(keys, axis, transform)` (one leaf from N file tensors).

`declared` holds the transforms and their composition (`Chain`); `view` the strided view of the
file tensor each one's result is (what `pipelined`'s reader threads fill in place); `stack` the
stacking of per-layer file tensors into one leaf (each layer through its own `Chain`).
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
from loader.transforms.stack import Stack, StackError, as_stack
from loader.transforms.view import View, c_strides, reshape_strides

__all__ = [
    "DECLARED",
    "Chain",
    "Declared",
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
]
