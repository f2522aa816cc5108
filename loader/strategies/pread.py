"""Random init, then `safe_open(..., backend="pread")` one tensor at a time into the model.

Streaming bounds the read to one tensor, but the random initialisation still costs a whole model.
"""

from __future__ import annotations

from loader.sequence import Build, Recipe
from loader.stream import Stream

RECIPE = Recipe(Stream, build=Build.INSTANCE)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
