"""Parameter paths and the file keys they are stored under: `('layers', 0, 'kernel')` <->
`"layers.0.kernel"`.

Keys follow the PyTorch / Hugging Face dotted convention so other tools read our files. Integer
indices of `nnx.List` stacks become their decimal string, which is how a model's integer path
components match a file's string keys. A model's leaves are named with these
(`loader.placement.leaves`), and the plan looks keys up with them (`loader.planning.keys`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from loader.errors import CheckpointError
from loader.format import METADATA_KEY

#: A state path as nnx gives it: attribute names and list indices (flax types the parts as
#: hashables; `key_of` refuses any part that is neither a str nor an int).
Path = tuple[Hashable, ...]


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
