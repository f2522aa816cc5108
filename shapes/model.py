"""An NNX model whose state paths are exactly a spec's tensor names.

Dotted names become nested modules: `"transformer.h.0.attn.c_attn.weight"` becomes
`model.transformer.h[0].attn.c_attn.weight`, an `nnx.Param`. A level whose children are all decimal
numbers becomes an `nnx.List` (so state paths hold integers, `('transformer', 'h', 0, ...)`);
missing indices (a PyTorch `Sequential` whose parameter-free layers store nothing, e.g. children 1
and 3 only) are `None` holes that hold no state. A level that mixes numbers and names is a plain
module whose numeric children are string attributes (`'0'`); the dotted key is the same either way.
64-bit tensors (I64, F64) become 32-bit unless `jax.enable_x64` is on, as everywhere in JAX; a
strict load then reports the cast. A name that is both a tensor and a prefix of another tensor
cannot nest and raises `ShapesError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

from loader.format import DTYPES
from shapes.catalog import load_spec
from shapes.content import FLOAT_DTYPES, effective_dtype, normalize_dtype
from shapes.errors import ShapesError
from shapes.spec import ShapeSpec, TensorSpec

Tree = dict[str, "Tree | TensorSpec"]


def nesting(spec: ShapeSpec) -> Tree:
    """The spec's names as a nested dict of name components, with `TensorSpec` leaves."""
    root: Tree = {}
    for t in spec.tensors:
        node = root
        parts = t.name.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if isinstance(child, TensorSpec):
                raise ShapesError(
                    f"spec {spec.label}: {'.'.join(parts[: i + 1])!r} is a tensor "
                    f"and also a prefix of {t.name!r}; "
                    "a module tree cannot hold both (rename one with a key_map)"
                )
            node = child
        if parts[-1] in node or "" in parts:
            raise ShapesError(
                f"spec {spec.label}: tensor {t.name!r} has an empty component or is also a prefix "
                "of another tensor; a module tree cannot hold it"
            )
        node[parts[-1]] = t
    return root


def _is_index(key: str) -> bool:
    return key.isdigit() and str(int(key)) == key


@partial(jax.jit, static_argnums=(1, 2))
def _init(key: jax.Array, shape: tuple[int, ...], dtype: str) -> jax.Array:
    """Cheap random init: a per-tensor 32-bit salt from `key`, mixed into a counter hash.

    A few integer ops per element (no threefry per element), so building even sa3 eagerly costs
    little more than allocating it. Floats are uniform in [-0.02, 0.02).
    """
    np_dtype = jax.dtypes.canonicalize_dtype(DTYPES[dtype])  # I64 is int32 unless x64 is on
    n = math.prod(shape)
    if n == 0:
        return jnp.zeros(shape, np_dtype)
    x = lax.iota(jnp.uint32, n) * jnp.uint32(0x9E3779B1) + jax.random.bits(key, (), jnp.uint32)
    x = (x ^ (x >> 15)) * jnp.uint32(0x2C1B3C6D)
    x = (x ^ (x >> 12)).reshape(shape)
    if dtype == "BOOL":
        return (x & 1) == 1
    if dtype not in FLOAT_DTYPES:
        return (x % 127).astype(np_dtype)
    unit = lax.bitcast_convert_type((x >> 9) | jnp.uint32(0x3F800000), jnp.float32)
    return ((unit - 1.5) * 0.04).astype(np_dtype)


def _build(tree: Tree, override: str | None, keys: Callable[[], jax.Array]) -> nnx.Module:
    children: dict[str, nnx.Module | nnx.Param[jax.Array]] = {}
    for k, v in tree.items():
        if isinstance(v, TensorSpec):
            children[k] = nnx.Param(_init(keys(), v.shape, effective_dtype(v.dtype, override)))
        else:
            children[k] = _build(v, override, keys)
    if children and all(_is_index(k) for k in children):
        items: list[nnx.Module | nnx.Param[jax.Array] | None] = [None] * (
            max(int(k) for k in children) + 1
        )
        for k, child in children.items():
            items[int(k)] = child
        return nnx.List(items)
    node = SpecModule()
    for k, child in children.items():
        setattr(node, k, child)
    return node


class SpecModule(nnx.Module):
    """One level of a spec-shaped model; its attributes are set from the spec's names."""


def model_builder(spec: ShapeSpec | str, *, dtype: object = None, seed: int = 0) -> Callable:
    """A zero-argument builder of an NNX model whose state keys are the spec's tensor names.

    Args:
        spec: a `ShapeSpec` or anything `load_spec` accepts.
        dtype: build every float parameter in this dtype instead of the spec's.
        seed: seed of the random init (floats uniform in [-0.02, 0.02)).

    Returns:
        `builder()` -> `nnx.Module`; works under `nnx.eval_shape(builder)` too.

    Example:
        >>> model = model_builder("tiny-gpt2")()
        >>> model.transformer.h[0].attn.c_attn.weight.shape
        (32, 96)
    """
    spec = load_spec(spec)
    override = None if dtype is None else normalize_dtype(dtype)
    tree = nesting(spec)

    def build() -> nnx.Module:
        root = jax.random.key(seed)
        counter = iter(range(len(spec.tensors)))
        return _build(tree, override, lambda: jax.random.fold_in(root, next(counter)))

    build.__name__ = f"build_{(spec.name or 'spec').replace('-', '_')}"
    return build
