"""Parameter paths and file keys: `('layers', 0, 'kernel')` <-> `"layers.0.kernel"`.

Keys follow the PyTorch / Hugging Face dotted convention so other tools read our files. Integer
indices of `nnx.List` stacks become their decimal string, which is how a model's integer path
components match a file's string keys. Files written by older NNX tools join with `/`; those load
too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from loader.errors import CheckpointError
from loader.format import METADATA_KEY
from loader.transforms import Stack, as_chain, as_stack

#: A state path as nnx gives it: attribute names and list indices (flax types the parts as
#: hashables; `key_of` refuses any part that is neither a str nor an int).
Path = tuple[Hashable, ...]
Transform = Callable[[np.ndarray], np.ndarray]
#: `key_map`: model key -> file key, or (file key, transform): a declared transform
#: (`loader.Transpose`, `loader.Reshape`, `loader.Slice`), a tuple of them applied in turn (both
#: become a `loader.transforms.Chain`), or any callable of the host array (staged whole); or
#: `loader.Stack(keys, axis)` / `(loader.Stack(keys, axis), transform)`: the leaf stacks N file
#: tensors along a new axis, the (declared) transform applied to each file tensor before
#: stacking (`leaf[(slice(None),) * axis + (i,)] == transform(file[keys[i]])`; see
#: `loader.transforms.stack`); or a callable taking the model key and returning any of these (or
#: None to keep the model key).
KeyMap = Mapping[str, str | tuple[str, Transform]] | Callable[[str], object]


def path_str(path: Sequence[object]) -> str:
    """A readable path for messages: `layers.0.kernel` (no validation)."""
    return ".".join(str(p) for p in path)


def key_of(path: Sequence[object]) -> str:
    """The file key of a state path; `CheckpointError` naming the path if it cannot be one.

    A name containing `.` or `/`, an empty name, or the reserved `__metadata__` cannot round-trip.
    """
    parts = []
    for part in path:
        if isinstance(part, (int, np.integer)) and not isinstance(part, bool):
            parts.append(str(int(part)))
            continue
        if not isinstance(part, str):
            raise CheckpointError(
                f"parameter {path_str(path)}: path component {part!r} is a {type(part).__name__}; "
                "only attribute names and integer list indices can become a safetensors key"
            )
        if not part or "." in part or "/" in part:
            raise CheckpointError(
                f"parameter {path_str(path)}: attribute name {part!r} cannot be expressed as a "
                "dotted safetensors key (it is empty or contains '.' or '/'); rename the attribute"
            )
        parts.append(part)
    key = ".".join(parts)
    if key == METADATA_KEY:
        raise CheckpointError(
            f"parameter {key}: the name {METADATA_KEY} is reserved by safetensors"
        )
    return key


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
