"""A directory of per-process shard files plus a manifest; each process reads only its own slices.

`prepare(src, dst, builder)` lays the single-file checkpoint out with `loader.convert_to_sharded`:
call it on every process of the run (as `bench.child.prepare convert` does under
`LOADBENCH_NUM_PROCESSES`), each writing `shard-<i>-of-<N>.safetensors` with the slices its devices
own under the sharding rule; process 0 writes `manifest.json` last. `load` is `loader.load_sharded`:
phase `build` (abstract model), then one `stream` phase with `read` / `cast` / `transfer` sub-steps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loader.sharded.directory import convert_to_sharded
from loader.sharded.load import DIRECTORY_RECIPE
from loader.vocabulary import SHARDED_DIR

CHECKPOINT = SHARDED_DIR
MULTIPROCESS = True


def prepare(src: str | os.PathLike[str], dst: str | os.PathLike[str], builder: Any = None) -> Path:
    """Convert the checkpoint at `src` to a sharded directory `dst` (on every process)."""
    return convert_to_sharded(src, dst)


load = DIRECTORY_RECIPE.load  # the Strategy: `run_load(DIRECTORY_RECIPE, target, path, probe, ...)`
