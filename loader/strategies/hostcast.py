"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This was `loader.load_model`'s default before `pipelined` (still `strategy="hostcast"`).
"""

from __future__ import annotations

from loader.sequence import Recipe
from loader.stream import Stream

RECIPE = Recipe(Stream)  # the default reader and host cast


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
