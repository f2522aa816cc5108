"""pread streaming into an abstract model (`nnx.eval_shape`): no random init; casts on the device.

Each tensor is read in its file dtype, transferred, then cast by the device (compare `hostcast`).
"""

from __future__ import annotations

import os
from typing import Any

from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.report import LoadReport
from loader.sequence import Recipe, run_load
from loader.stream import Stream

RECIPE = Recipe(lambda: Stream(cast_on_device=True))


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly and stream tensors into it, casting after the transfer."""
    return run_load(RECIPE, target, path, probe, strict=strict, key_map=key_map)
