"""File keys for model paths, and `key_map` lookups (renames, declared transforms, stacks).

A model path's key is `key_of`'s (`loader.placement.paths`: `('layers', 0, 'kernel')` <->
`"layers.0.kernel"`; `Path`, `key_of` and `path_str` are named here too, where the plan's users
look them up). Files written by older NNX tools join with `/`; those load too (`legacy_key`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from loader.placement.paths import Path, key_of, path_str
from loader.transforms import Stack, as_chain, as_stack
from loader.transforms.quant import Quantized, as_quantized

__all__ = [
    "KeyMap",
    "Lookup",
    "Path",
    "Transform",
    "key_of",
    "legacy_key",
    "look_up",
    "path_str",
    "resolve_file_key",
    "resolve_quantized",
    "resolve_stack",
]
Transform = Callable[[np.ndarray], np.ndarray]
#: `key_map`: model key -> file key, or (file key, transform): a declared transform
#: (`loader.Transpose`, `loader.Reshape`, `loader.Slice`), a tuple of them applied in turn (both
#: become a `loader.transforms.Chain`), or any callable of the host array (staged whole); or
#: `loader.Stack(keys, axis)` / `(loader.Stack(keys, axis), transform)`: the leaf stacks N file
#: tensors along a new axis, the (declared) transform applied to each file tensor before
#: stacking (`leaf[(slice(None),) * axis + (i,)] == transform(file[keys[i]])`; see
#: `loader.transforms.stack`); or a quantized layout (`loader.Dequantize`, `loader.Unpack`,
#: `loader.DequantizeMXFP4`, alone or `(layout, transform)`: `loader.transforms.quant`) that
#: makes the leaf from a weight and its scales; or a callable taking the model key and
#: returning any of these (or None to keep the model key).
KeyMap = Mapping[str, str | tuple[str, Transform]] | Callable[[str], object]


def legacy_key(key: str) -> str:
    """The `/`-joined form older NNX tools wrote for a dotted key."""
    return key.replace(".", "/")


def _mapped(model_key: str, key_map: KeyMap | None) -> object:
    if key_map is None:
        return None
    return key_map(model_key) if callable(key_map) else key_map.get(model_key)


def resolve_stack(model_key: str, key_map: KeyMap | None) -> Stack | None:
    """The `loader.Stack` that fills `model_key` (its per-layer transform folded in), or None."""
    return as_stack(_mapped(model_key, key_map))


def resolve_quantized(model_key: str, key_map: KeyMap | None) -> Quantized | None:
    """The quantized layout (`loader.Dequantize`, ...) that makes `model_key`, or None."""
    return as_quantized(_mapped(model_key, key_map))


@dataclass(frozen=True)
class Lookup:
    """Where a model key's value comes from: a file key, an optional transform, and the key_map
    entry that said so (for messages; "" when no entry did)."""

    file_key: str
    transform: Transform | None = None
    entry: str = ""


def look_up(model_key: str, file_keys: set[str], key_map: KeyMap | None) -> Lookup:
    """Which file key feeds `model_key`, with an optional transform and the entry that named it.

    Without a key_map entry the dotted key is used, or its `/` form if only that is in the file.

    Example:
        >>> look_up("fc.kernel", {"fc.weight"}, {"fc.kernel": "fc.weight"})
        Lookup(file_key='fc.weight', transform=None, entry="'fc.kernel' -> 'fc.weight'")
    """
    mapped = _mapped(model_key, key_map)
    if mapped is not None:
        call = "key_map(" if callable(key_map) else ""
        name = f"{call}{model_key!r}{')' if call else ''}"
        if isinstance(mapped, tuple):
            file_key, transform = mapped
            chain = as_chain(transform, model_key)
            return Lookup(str(file_key), chain, f"{name} -> {file_key!r}")  # type: ignore[arg-type]
        return Lookup(str(mapped), None, f"{name} -> {str(mapped)!r}")
    if model_key not in file_keys and legacy_key(model_key) in file_keys:
        return Lookup(legacy_key(model_key))
    return Lookup(model_key)


def resolve_file_key(
    model_key: str, file_keys: set[str], key_map: KeyMap | None
) -> tuple[str, Transform | None]:
    """(file key, transform or None) that feed `model_key` (`look_up` without the entry)."""
    found = look_up(model_key, file_keys, key_map)
    return found.file_key, found.transform
