"""pread streaming into an abstract model (`nnx.eval_shape`): no random init; casts on the device.

Each tensor is read in its file dtype, transferred, then cast by the device (compare `hostcast`).
"""

from __future__ import annotations

from loader.sequence import Recipe
from loader.stream import Stream

RECIPE = Recipe(lambda: Stream(cast_on_device=True))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
