"""Declared transforms: `Transpose(axes)`, `Reshape(shape)`, `Slice(axis, start, stop)`, composed.

A `key_map` entry `(file_key, transform)` may name one of these, or a tuple of them applied left
to right, instead of an opaque callable. Unlike a callable they say what they do, so:

- the shape after the transform is known from the header alone (`Chain.out_shape`), and a strict
  load refuses a wrong one before any byte is read;
- the result is a strided view of the file tensor (`Chain.view`: element strides and an offset
  into the stored C-ordered tensor), which `pipelined`'s reader threads fill chunk by chunk
  straight into the destination buffer (`loader.pipeline.views`). A Reshape is a view when the
  axes it merges are contiguous (numpy's no-copy rule); otherwise the chain is applied on the
  host like a callable.

Each one is also a plain numpy function (`Transpose((1, 0))(x)`), which is how the other
strategies apply them, and each has an inverse (`invert`: from the leaf back to the block of the
stored tensor it came from, a `Part`), which is how `save_model` writes the source layout back.
Example, GPT-2's fused q/k/v (a Conv1D weight, `(in, 3 * out)`):

    >>> key_map = {"h.0.attn.q.kernel": ("h.0.attn.c_attn.weight", Slice(1, 0, 768))}
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from loader.errors import CheckpointError
from loader.transforms.part import Part
from loader.transforms.view import View, reshape_strides


class TransformError(CheckpointError):
    """A declared transform cannot apply to a tensor of that shape (rank, range or size)."""


@dataclass(frozen=True)
class Transpose:
    """`np.transpose(x, axes)`: a permutation of the axes."""

    axes: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(int(a) for a in self.axes))

    def _axes(self, ndim: int) -> tuple[int, ...]:
        axes = tuple(a % ndim if -ndim <= a < ndim else a for a in self.axes) if ndim else ()
        if sorted(axes) != list(range(ndim)):
            raise TransformError(f"{self}: axes are not a permutation of a {ndim}-d tensor's")
        return axes

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[a] for a in self._axes(len(shape)))

    def view(self, v: View) -> View | None:
        axes = self._axes(len(v.shape))
        return View(tuple(v.shape[a] for a in axes), tuple(v.strides[a] for a in axes), v.offset)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.transpose(x, self._axes(np.ndim(x)))

    def in_shape(self, out_shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The input shape that gives `out_shape` (a permutation's inverse)."""
        shape = [0] * len(out_shape)
        for i, a in enumerate(self._axes(len(out_shape))):
            shape[a] = out_shape[i]
        return tuple(shape)

    def invert(self, part: Part, in_shape: tuple[int, ...]) -> Part:
        """The inverse permutation: output axis `i` is input axis `axes[i]`, block and values."""
        axes = self._axes(len(in_shape))
        region = [slice(0, 0)] * len(axes)
        for i, a in enumerate(axes):
            region[a] = part.region[i]
        values = None if part.values is None else np.transpose(part.values, np.argsort(axes))
        return Part(tuple(in_shape), tuple(region), values)

    def __str__(self) -> str:
        return f"Transpose({self.axes})"


@dataclass(frozen=True)
class Reshape:
    """`x.reshape(shape)` (one `-1` allowed): free when the merged axes are contiguous."""

    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        size, known = math.prod(shape), [n for n in self.shape if n != -1]
        free = len(self.shape) - len(known)
        if free > 1 or any(n < 0 for n in known):
            raise TransformError(f"{self}: at most one -1 and no other negative size")
        if free:
            rest = math.prod(known)
            if rest == 0 or size % rest:
                raise TransformError(f"{self}: {shape} ({size} elements) does not divide")
            return tuple(size // rest if n == -1 else n for n in self.shape)
        if math.prod(known) != size:
            raise TransformError(f"{self}: {shape} has {size} elements, not {math.prod(known)}")
        return self.shape

    def view(self, v: View) -> View | None:
        new = self.out_shape(v.shape)
        strides = reshape_strides(v.shape, v.strides, new)
        return None if strides is None else View(new, strides, v.offset)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.reshape(x, self.out_shape(np.shape(x)))

    def in_shape(self, out_shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """None: many shapes reshape to `out_shape` (the stored one must be known)."""
        return None

    def invert(self, part: Part, in_shape: tuple[int, ...]) -> Part:
        """The reshape back to `in_shape`; only of a whole tensor (a block of a reshaped tensor
        is not, in general, a block of the original)."""
        if not part.complete:
            raise TransformError(
                f"{self} after a Slice cannot be inverted: the slice is not a block of the "
                f"{in_shape} tensor before the reshape; declare the Slice first"
            )
        values = None if part.values is None else np.reshape(part.values, in_shape)
        return Part.of_shape(tuple(in_shape), values)

    def __str__(self) -> str:
        return f"Reshape({self.shape})"


@dataclass(frozen=True)
class Slice:
    """`x[..., start:stop, ...]` along `axis`: one file tensor feeding several leaves."""

    axis: int
    start: int
    stop: int

    def _axis(self, shape: tuple[int, ...]) -> int:
        ndim = len(shape)
        if not -ndim <= self.axis < ndim:
            raise TransformError(f"{self}: a {ndim}-d tensor has no axis {self.axis}")
        axis = self.axis % ndim
        if not 0 <= self.start <= self.stop <= shape[axis]:
            raise TransformError(f"{self}: axis {axis} has {shape[axis]} entries")
        return axis

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        axis = self._axis(shape)
        return (*shape[:axis], self.stop - self.start, *shape[axis + 1 :])

    def view(self, v: View) -> View | None:
        axis = self._axis(v.shape)
        return View(self.out_shape(v.shape), v.strides, v.offset + self.start * v.strides[axis])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        axis = self._axis(np.shape(x))
        return x[(slice(None),) * axis + (slice(self.start, self.stop),)]

    def in_shape(self, out_shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """None: the output does not say how long the sliced axis was."""
        return None

    def invert(self, part: Part, in_shape: tuple[int, ...]) -> Part:
        """The block `start:stop` along `axis` of the `in_shape` tensor (the values unchanged):
        the other leaves sliced from the same tensor fill the rest."""
        axis = self._axis(in_shape)
        region = list(part.region)
        region[axis] = slice(self.start + region[axis].start, self.start + region[axis].stop)
        return Part(tuple(in_shape), tuple(region), part.values)

    def __str__(self) -> str:
        return f"Slice({self.axis}, {self.start}, {self.stop})"


Declared = Transpose | Reshape | Slice
DECLARED = (Transpose, Reshape, Slice)


@dataclass(frozen=True)
class Chain:
    """Declared transforms applied left to right (what a `key_map` entry's tuple becomes)."""

    steps: tuple[Declared, ...]

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape after every step; `TransformError` naming the step that cannot apply."""
        for step in self.steps:
            shape = step.out_shape(tuple(shape))
        return tuple(shape)

    def view(self, shape: tuple[int, ...]) -> View | None:
        """The result as a strided view of the stored tensor, or None (a non-contiguous Reshape)."""
        v: View | None = View.of(tuple(shape))
        for step in self.steps:
            v = step.view(v) if v is not None else None
        return v

    @property
    def slices(self) -> bool:
        """Whether a step is a `Slice` (a tensor shared by several leaves must be sliced)."""
        return any(isinstance(s, Slice) for s in self.steps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for step in self.steps:
            x = step(x)
        return x

    def in_shape(self, out_shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The stored shape that gives `out_shape`, when the output alone says it (Transposes
        only); None when a step cannot tell (a Reshape, a Slice)."""
        shape: tuple[int, ...] | None = tuple(out_shape)
        for step in reversed(self.steps):
            shape = None if shape is None else step.in_shape(shape)
        return shape

    def invert(self, part: Part, in_shape: tuple[int, ...]) -> Part:
        """The way back: every step's inverse, last step first, from a leaf (`part`, the chain's
        output) to the block of the stored tensor of `in_shape` it came from.

        `TransformError` if the leaf's shape is not what the chain gives from `in_shape`, or if a
        step cannot be inverted there (a Reshape of a Slice's block).

        Example:
            >>> chain = Chain((Slice(1, 2, 4), Transpose((1, 0))))
            >>> chain.invert(Part.of_shape((2, 3)), (3, 6)).region
            (slice(0, 3, None), slice(2, 4, None))
        """
        shapes = [tuple(in_shape)]
        for step in self.steps:
            shapes.append(step.out_shape(shapes[-1]))
        if part.shape != shapes[-1]:
            raise TransformError(
                f"{self}: gives {shapes[-1]} from the stored {tuple(in_shape)}, but the leaf is "
                f"{part.shape}"
            )
        for step, shape in zip(reversed(self.steps), reversed(shapes[:-1])):
            part = step.invert(part, shape)
        return part

    def __str__(self) -> str:
        return " then ".join(str(s) for s in self.steps)


def as_chain(transform: object, where: str) -> Chain | object:
    """A declared transform or a tuple/list of them as a `Chain`; anything else unchanged."""
    if isinstance(transform, Chain):
        return transform
    if isinstance(transform, DECLARED):
        return Chain((transform,))
    if isinstance(transform, tuple | list):
        if not transform or not all(isinstance(t, DECLARED) for t in transform):
            raise CheckpointError(
                f"key_map entry for {where}: a sequence of transforms must hold only "
                f"loader.Transpose, loader.Reshape and loader.Slice, got {transform!r}"
            )
        return Chain(tuple(transform))
    return transform
