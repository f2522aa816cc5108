"""`Stack(keys, axis, transform)`: one model leaf from N file tensors, stacked along a new axis.

JAX models often hold their layers stacked (`nnx.vmap` / `nnx.scan` over layers: one leaf per
parameter with a leading layer axis), where the file holds one tensor per layer. A key_map entry
names the N file keys in layer order::

    >>> L = 32
    >>> key_map = {
    ...     "model.layers.mlp.up_proj.kernel": (
    ...         Stack([f"model.layers.{i}.mlp.up_proj.weight" for i in range(L)], axis=0),
    ...         Transpose((1, 0)),
    ...     )
    ... }

Semantics (what `load_model` does and what `save_model` inverts), for `Stack(keys, axis, t)`:

    leaf[(slice(None),) * axis + (i,)] == t(file[keys[i]])      for every i in range(len(keys))

- `t` is the per-layer transform: a declared transform (`Transpose`, `Reshape`, `Slice`) or a
  tuple of them, applied to each file tensor on its own, exactly as in a plain
  `(file_key, t)` entry, before the results are stacked. It can be given inside the Stack
  (`Stack(keys, axis, transform=t)`) or after it in a tuple (`(Stack(keys, axis), t)`, the
  same form as `(file_key, t)`); both give the same `Stack`. There is no transform of the
  stacked whole: the Transpose above swaps the two axes of each layer's `(out, in)` weight,
  and the leaf is `(L, in, out)`.
- `axis` is where the new axis sits in the leaf (`0 <= axis <= ndim` of a layer; negative
  counts from the end of the leaf, as `np.stack`).
- the inverse, for `save_model`: `file[keys[i]] = inverse(t)(np.take(leaf, i, axis=axis))`.

Before any byte is read, the load checks from the headers that every file tensor has the same
shape and dtype, that there are as many keys as the leaf's `axis` holds, and that `t` of one
layer's shape is the leaf's shape without `axis`; every key counts as used. `pipelined` reads
each file tensor straight into its slice of the leaf's own buffer; the other strategies assemble
the leaf on the host (`LoadReport.stacked` lists the stacked leaves either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loader.transforms.declared import Chain, TransformError, as_chain


class StackError(TransformError):
    """A `Stack` that cannot fill its leaf: bad keys, or file tensors that do not stack."""


@dataclass(frozen=True, init=False)
class Stack:
    """One leaf from the file tensors `keys` (in order), stacked along a new axis `axis`.

    Args:
        keys: the file keys, one per index along `axis` (at least one, no repeats).
        axis: the leaf's new axis (negative: counted from the end of the stacked leaf).
        transform: the per-layer declared transform (or tuple of them), applied to each file
            tensor before stacking; None for none.

    Example:
        >>> s = Stack(["h.0.w", "h.1.w"], axis=0, transform=Transpose((1, 0)))
        >>> s.out_shape((3, 2))
        (2, 2, 3)
        >>> s([np.zeros((3, 2)), np.ones((3, 2))]).shape  # numpy's own, for checks
        (2, 2, 3)
    """

    keys: tuple[str, ...]
    axis: int
    transform: Chain | None

    def __init__(self, keys: Sequence[str], axis: int = 0, transform: object = None) -> None:
        if isinstance(keys, str) or not keys or not all(isinstance(k, str) for k in keys):
            raise StackError(f"Stack: keys must be a non-empty list of file keys, got {keys!r}")
        repeated = sorted({k for k in keys if list(keys).count(k) > 1})
        if repeated:
            raise StackError(f"Stack: file key(s) {repeated} listed more than once")
        chain = None if transform is None else as_chain(transform, f"Stack({keys[0]!r}, ...)")
        if chain is not None and not isinstance(chain, Chain):
            raise StackError(
                f"Stack({keys[0]!r}, ...): the per-layer transform must be declared "
                f"(loader.Transpose, Reshape, Slice or a tuple of them), got {transform!r}: it is "
                "read in place and inverted by save_model, which an opaque callable cannot be"
            )
        object.__setattr__(self, "keys", tuple(keys))
        object.__setattr__(self, "axis", int(axis))
        object.__setattr__(self, "transform", chain)

    def then(self, transform: object) -> Stack:
        """This Stack with `transform` applied to each layer after its own (the tuple form)."""
        if self.transform is None:
            return Stack(self.keys, self.axis, transform)
        added = as_chain(transform, f"Stack({self.keys[0]!r}, ...)")
        steps = added.steps if isinstance(added, Chain) else (added,)
        return Stack(self.keys, self.axis, (*self.transform.steps, *steps))

    def layer_shape(self, file_shape: tuple[int, ...]) -> tuple[int, ...]:
        """One layer's shape in the leaf: the per-layer transform of a file tensor's shape."""
        shape = tuple(file_shape)
        return shape if self.transform is None else self.transform.out_shape(shape)

    def leaf_axis(self, layer_ndim: int) -> int:
        """`axis` as a non-negative index into the stacked leaf (of `layer_ndim + 1` axes)."""
        ndim = layer_ndim + 1
        if not -ndim <= self.axis < ndim:
            raise StackError(f"{self}: a stack of {layer_ndim}-d layers has no axis {self.axis}")
        return self.axis % ndim

    def out_shape(self, file_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The stacked leaf's shape, from one file tensor's shape."""
        layer = self.layer_shape(file_shape)
        axis = self.leaf_axis(len(layer))
        return (*layer[:axis], len(self.keys), *layer[axis:])

    def index(self, i: int, layer_ndim: int) -> tuple[slice | int, ...]:
        """The index of layer `i` in the stacked leaf: `leaf[stack.index(i, n)]` is one layer."""
        return (slice(None),) * self.leaf_axis(layer_ndim) + (i,)

    def unstack(self, leaf_shape: tuple[int, ...]) -> list[tuple[str, tuple[slice | int, ...]]]:
        """The inverse: (file key, index of its layer in the leaf) for each key, in order; each
        layer, `leaf[index]`, goes back through the per-layer transform's inverse (`Chain.invert`).

        Example:
            >>> Stack(["h.0.w", "h.1.w"], axis=1).unstack((3, 2))
            [('h.0.w', (slice(None, None, None), 0)), ('h.1.w', (slice(None, None, None), 1))]
        """
        layer_ndim = len(leaf_shape) - 1
        axis = self.leaf_axis(layer_ndim)
        if leaf_shape[axis] != len(self.keys):
            raise StackError(
                f"{self}: the leaf {tuple(leaf_shape)} holds {leaf_shape[axis]} layers along axis "
                f"{axis}, not {len(self.keys)}"
            )
        return [(key, self.index(i, layer_ndim)) for i, key in enumerate(self.keys)]

    def __call__(self, tensors: Sequence[np.ndarray]) -> np.ndarray:
        """The stacked leaf from the file tensors, with numpy (a reference: not how it loads)."""
        layers = [np.asarray(x if self.transform is None else self.transform(x)) for x in tensors]
        return np.stack(layers, axis=self.leaf_axis(layers[0].ndim))

    def __str__(self) -> str:
        keys = self.keys[0] if len(self.keys) == 1 else f"{self.keys[0]} .. {self.keys[-1]}"
        per_layer = f", each {self.transform}" if self.transform is not None else ""
        return f"Stack({len(self.keys)} keys {keys}, axis={self.axis}{per_layer})"


def as_stack(entry: object) -> Stack | None:
    """A key_map entry as a `Stack` (`Stack(...)` or `(Stack(...), transform)`), else None."""
    if isinstance(entry, Stack):
        return entry
    if isinstance(entry, tuple) and entry and isinstance(entry[0], Stack):
        if len(entry) != 2:
            raise StackError(
                f"key_map entry {entry!r}: write (Stack(...), transform) with the transform (or a "
                "tuple of transforms) as its second item"
            )
        return entry[0].then(entry[1])
    return None
