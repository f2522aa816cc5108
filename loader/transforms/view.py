"""Strided views of a stored C-ordered tensor: what a declared transform's result is in the file.

`View(shape, strides, offset)` (element strides and offset), `c_strides(shape)` and
`reshape_strides` (numpy's no-copy reshape rule: the strides of a new shape over the same
elements, or None when the merged axes are not contiguous).
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
