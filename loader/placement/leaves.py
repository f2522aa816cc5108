"""The leaves of an NNX model as the loader sees them, and how each kind is stored in a file.

Three kinds of leaf (`LeafKind`):
- `ARRAY`: a jax/numpy array (or its abstract `ShapeDtypeStruct`): stored as is.
- `PRNG`: a typed PRNG key array: stored as its uint32 key data; the impl is recorded in the file's
  `__metadata__` and the key is rebuilt with `jax.random.wrap_key_data` on load.
- `SCALAR`: a Python int/float/bool held by a variable: stored as a 0-d I64/F64/BOOL tensor and
  given back as the Python type the model declares.
Anything else (a string, None, an object) cannot be stored and is refused at save time.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Sharding

from loader.errors import CheckpointError
from loader.placement.paths import Path, key_of, path_str
from loader.placement.place import concrete_sharding

META_PRNG = "loadbench.prng_impls"
META_PYTYPES = "loadbench.python_scalars"
META_SHARDINGS = "loadbench.shardings"
_PYTYPES: dict[str, type] = {"bool": bool, "int": int, "float": float}
_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}


class LeafKind(enum.Enum):
    """What a leaf holds, and so how it is stored in a file (see the module docstring)."""

    ARRAY = "array"
    PRNG = "prng"
    SCALAR = "scalar"


@dataclass
class Leaf:
    """One variable of the model: where it is, what it holds, and how it is stored."""

    path: Path
    key: str
    variable: nnx.Variable[Any]
    kind: LeafKind
    shape: tuple[int, ...]
    dtype: Any  # numpy dtype, or a jax PRNG key dtype
    sharding: Any  # the model's sharding (possibly abstract), or None
    pytype: type | None = None

    @property
    def where(self) -> str:
        return f"parameter {path_str(self.path)}"

    def concrete_sharding(self) -> Sharding | None:
        """The sharding to place the leaf with (`loader.placement.place.concrete_sharding`); None
        for a Python scalar, which lives on no device."""
        if self.kind is LeafKind.SCALAR:
            return None
        return concrete_sharding(self.sharding, self.where)

    def stored_shape_dtype(self) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype this leaf has in a file."""
        if self.kind is LeafKind.PRNG:
            data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(self.shape, self.dtype))
            return tuple(data.shape), np.dtype(data.dtype)
        if self.kind is LeafKind.SCALAR:
            assert self.pytype is not None, f"{self.where}: a scalar leaf without its Python type"
            return (), _SCALAR_DTYPES[self.pytype]
        return self.shape, np.dtype(self.dtype)


def is_prng_dtype(dtype: Any) -> bool:
    return jnp.issubdtype(dtype, jax.dtypes.prng_key)


def _leaf(path: Path, var: nnx.Variable[Any], saved_pytypes: dict[str, str]) -> Leaf | None:
    value = var.get_value()
    key = key_of(path)
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        pytype = type(value)
        return Leaf(path, key, var, LeafKind.SCALAR, (), _SCALAR_DTYPES[pytype], None, pytype)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    sharding = getattr(value, "sharding", None)
    if is_prng_dtype(dtype):
        return Leaf(path, key, var, LeafKind.PRNG, tuple(shape), dtype, sharding)
    if isinstance(value, jax.ShapeDtypeStruct) and tuple(shape) == () and key in saved_pytypes:
        pytype = _PYTYPES[saved_pytypes[key]]
        return Leaf(path, key, var, LeafKind.SCALAR, (), _SCALAR_DTYPES[pytype], None, pytype)
    return Leaf(path, key, var, LeafKind.ARRAY, tuple(shape), np.dtype(dtype), sharding)


def iter_variables(model: Any) -> Iterator[tuple[Path, nnx.Variable[Any]]]:
    """(path, variable) for every variable of a module, each shared one once, as `nnx.state` names
    it."""
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Variable):
            yield tuple(path), node


def model_leaves(model: Any, metadata: dict[str, str] | None = None) -> list[Leaf]:
    """The loadable leaves of `model` (a module, maybe abstract); non-array leaves are skipped."""
    saved_pytypes = json.loads((metadata or {}).get(META_PYTYPES, "{}"))
    leaves = []
    for path, var in iter_variables(model):
        leaf = _leaf(path, var, saved_pytypes)
        if leaf is not None:
            leaves.append(leaf)
    return leaves


def refuse_unstorable(path: Path, value: Any) -> None:
    """Raise naming the parameter when a variable holds something no tensor can represent."""
    if isinstance(value, (str, bytes)):
        what = "a string"
    else:
        what = f"a {type(value).__name__}"
    raise CheckpointError(
        f"parameter {path_str(path)}: holds {what} ({value!r:.60}), which cannot be stored as a "
        "safetensors tensor; keep it in the model's constructor arguments or a static attribute"
    )
