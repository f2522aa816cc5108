"""Strided views of a stored C-ordered tensor: what a declared transform's result is in the file.

`View(shape, strides, offset)` (element strides and offset), `c_strides(shape)` and
`reshape_strides` (numpy's no-copy reshape rule: the strides of a new shape over the same
elements, or None when the merged axes are not contiguous). `View.permuted_block` says when a view
is a transpose of one contiguous block of the file (a `Transpose`, alone or with a `Reshape` or a
leading `Slice`): such a leaf can travel as the file's contiguous bytes, transposed by its
transfer (a strided view of mapped pages) or on its device (`loader.pipeline.ring_job`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """A strided view of a stored C-ordered tensor: shape, element strides, element offset."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def of(cls, shape: tuple[int, ...]) -> View:
        return cls(tuple(shape), c_strides(shape))

    def restrict(self, region: tuple[slice, ...]) -> View:
        """The view of a sub-block (`slice(start, stop)` per axis)."""
        shape = tuple(s.stop - s.start for s in region)
        offset = self.offset + sum(s.start * st for s, st in zip(region, self.strides))
        return View(shape, self.strides, offset)

    def permuted_block(self) -> PermutedBlock | None:
        """This view as a transpose of one C-ordered block of the stored tensor, or None (its
        elements are not one contiguous block: a Slice of an inner axis, say).

        Example:
            >>> View((4, 3), (1, 4)).permuted_block()  # Transpose((1, 0)) of a (3, 4) tensor
            PermutedBlock(block_shape=(3, 4), perm=(1, 0), offset=0)
        """
        n = len(self.shape)
        # the block's axes are the view's, largest stride first (size-1 axes, strideless, last)
        order = sorted(range(n), key=lambda a: (self.shape[a] == 1, -self.strides[a], a))
        block_shape = tuple(self.shape[a] for a in order)
        want = c_strides(block_shape)
        if any(block_shape[i] > 1 and self.strides[order[i]] != want[i] for i in range(n)):
            return None
        return PermutedBlock(block_shape, tuple(order.index(a) for a in range(n)), self.offset)


@dataclass(frozen=True)
class PermutedBlock:
    """A view that is `block.transpose(perm)`, `block` the `block_shape` C-ordered elements of the
    stored tensor from element `offset` on: leaf axis `a` is block axis `perm[a]`."""

    block_shape: tuple[int, ...]
    perm: tuple[int, ...]
    offset: int = 0

    @property
    def transposes(self) -> bool:
        """Whether the leaf's axes are in another order than the block's."""
        return self.perm != tuple(range(len(self.perm)))

    def block_region(self, region: tuple[slice, ...]) -> tuple[slice, ...]:
        """The block's region holding a region of the leaf."""
        by_block_axis = sorted(range(len(self.perm)), key=lambda a: self.perm[a])
        return tuple(region[a] for a in by_block_axis)

    @property
    def leaf_shape(self) -> tuple[int, ...]:
        """The leaf's shape: the block's axes in the leaf's order."""
        return tuple(self.block_shape[b] for b in self.perm)

    def leaf_region(self, block_region: tuple[slice, ...]) -> tuple[slice, ...]:
        """The leaf's region a region of the block becomes."""
        return tuple(block_region[b] for b in self.perm)


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-ordered array of `shape`."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def reshape_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides of `new` over the same elements without a copy, or None (numpy's no-copy rule).

    Groups of old axes are matched with groups of new axes of equal size; a group of old axes
    must be contiguous among themselves (each stride the next one's times its size).
    """
    if math.prod(shape) == 0:
        return c_strides(new)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = [0] * len(new)
    oi, ni = 0, 0
    while ni < len(new) and oi < len(old):
        oj, nj, op, np_ = oi + 1, ni + 1, old[oi][0], new[ni]
        while op != np_:
            if np_ < op:
                np_, nj = np_ * new[nj], nj + 1
            else:
                op, oj = op * old[oj][0], oj + 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new[k]
        oi, ni = oj, nj
    return tuple(out)  # any size-1 axes left over keep stride 0 (never stepped)
