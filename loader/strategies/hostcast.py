"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This was `loader.load_model`'s default before `pipelined` (still `strategy="hostcast"`).
"""

from __future__ import annotations

import os
from typing import Any

from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.report import LoadReport
from loader.sequence import Recipe, run_load
from loader.stream import Stream

RECIPE = Recipe(Stream)  # the default reader and host cast


def load(
    target: Any,
    path: str | os.PathLike,
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly and stream tensors into it, casting on the host."""
    return run_load(RECIPE, target, path, probe, strict=strict, key_map=key_map)
