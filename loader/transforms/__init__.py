"""Declared key_map transforms: `Transpose(axes)`, `Reshape(shape)`, `Slice(axis, start, stop)`.

`declared` holds the transforms and their composition (`Chain`); `view` the strided view of the
file tensor each one's result is (what `pipelined`'s reader threads fill in place).
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
from loader.transforms.view import View, c_strides, reshape_strides

__all__ = [
    "DECLARED",
    "Chain",
    "Declared",
    "Reshape",
    "Slice",
    "TransformError",
    "Transpose",
    "View",
    "as_chain",
    "c_strides",
    "reshape_strides",
]
