"""`Part`: a block of a larger tensor, which is what a declared transform's inverse gives back.

A key map's transforms go from a file tensor to a model leaf. Going back (`loader.save_model`
with a `key_map`), each step is inverted in turn, from the leaf towards the file tensor: a
`Transpose` and a `Reshape` give back the whole of their input, but a `Slice` only its own part,
so the result of an inverse is a `Part`: the values, and the block (`region`) of the file tensor
(`shape`) they fill. The parts of the leaves that share one file tensor (GPT-2's q, k and v in
`c_attn`) tile it; `tile_check` proves they do before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: A block of a tensor: one `slice(start, stop)` per axis (step 1).
Region = tuple[slice, ...]


@dataclass(frozen=True)
class Part:
    """`values` fill `region` of a tensor of `shape`; `values` is None when only shapes are traced.

    Example:
        >>> Part.whole(np.ones((2, 3))).complete
        True
    """

    shape: tuple[int, ...]
    region: Region
    values: np.ndarray | None = None

    @classmethod
    def whole(cls, values: np.ndarray) -> Part:
        """All of a tensor."""
        return cls.of_shape(tuple(values.shape), values)

    @classmethod
    def of_shape(cls, shape: tuple[int, ...], values: np.ndarray | None = None) -> Part:
        """All of a tensor of `shape` (values None: shapes only)."""
        return cls(tuple(shape), tuple(slice(0, n) for n in shape), values)

    @property
    def complete(self) -> bool:
        """Whether the part is the whole tensor."""
        return all(r.start == 0 and r.stop == n for r, n in zip(self.region, self.shape))

    @property
    def size(self) -> int:
        return math.prod(r.stop - r.start for r in self.region)


def _overlap(a: Region, b: Region) -> bool:
    return all(x.start < y.stop and y.start < x.stop for x, y in zip(a, b))


def tile_check(shape: tuple[int, ...], regions: Sequence[Region]) -> str | None:
    """Why `regions` do not tile a tensor of `shape` exactly, or None when they do."""
    for i, a in enumerate(regions):
        for b in regions[i + 1 :]:
            if _overlap(a, b):
                return f"the blocks {_show(a)} and {_show(b)} overlap"
    covered = sum(math.prod(r.stop - r.start for r in region) for region in regions)
    total = math.prod(shape)
    if covered != total:
        return (
            f"the blocks {', '.join(_show(r) for r in regions)} cover {covered} of {total} values"
        )
    return None


def _show(region: Region) -> str:
    return "[" + ", ".join(f"{r.start}:{r.stop}" for r in region) + "]"
