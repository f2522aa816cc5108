"""One file; each addressable device reads only its own index range (`os.preadv`), then assembled.

Each tensor is placed with the model's sharding, or, where the model declares none, with the rule of
`loader.sharded.rule` (largest axis divisible by the device count, the rest replicated), exactly as
`sharded-dir` places it (`loader.sharded.load.apply_rule`), and read by the same slice reader
(`loader.sharded.slices.SliceReader`, `os.preadv` of the range's contiguous runs) over the file seen
as a layout of whole-tensor slices; identical slices (replicated tensors) are read once per process.
Runs in one process or as several cooperating `jax.distributed` processes.
"""

from __future__ import annotations

from loader.sharded.load import FILE_RECIPE

MULTIPROCESS = True


load = FILE_RECIPE.load  # the Strategy: `run_load(FILE_RECIPE, target, path, probe, ...)`
