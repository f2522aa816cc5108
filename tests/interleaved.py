"""Shape sets of large tensors with runs of small ones between them, for the tests of reading in
file order: a load that reads the runs first, or a large tensor whole on one reader while the
others go on, takes a file's bytes out of order."""

from __future__ import annotations

import shapes

FILE = "model.safetensors"


def interleaved(
    groups: int, big_shape: tuple[int, ...], smalls: int, small_shape: tuple[int, ...]
) -> shapes.ShapeSpec:
    """`groups` times: one F32 tensor `big{i}.weight` of `big_shape` (too large to join a run),
    then `smalls` F32 tensors `small{i}.b{j}` of `small_shape`, in one file."""
    return shapes.ShapeSpec(
        "interleaved",
        "",
        (FILE,),
        tuple(
            spec
            for i in range(groups)
            for spec in (
                shapes.TensorSpec(f"big{i}.weight", "F32", big_shape, FILE),
                *(
                    shapes.TensorSpec(f"small{i}.b{j}", "F32", small_shape, FILE)
                    for j in range(smalls)
                ),
            )
        ),
    )
