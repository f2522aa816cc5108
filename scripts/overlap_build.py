"""Can a checkpoint's transfers overlap the model's abstract build? One answer per fresh process,
for docs/results.md's table "Can transfers overlap the build?".

    python scripts/overlap_build.py SHAPES CHECKPOINT MODE

The shape set's model is built with `loader.target.abstract.abstract_build` (what every strategy
that builds abstractly pays), and the file's tensors, as views of its whole-file mapping (the zoos'
pattern), are put onto the first device:

- `build-only`: the build alone;
- `seq`: the build, then one `jax.device_put` per tensor; `seq-list`: then one put of the list;
- `before`: one put per tensor, then the build (do the transfers go on while it runs?);
  `before-list`: one put of the list, then the build;
- `thread`: one put per tensor from a thread started before the build; `thread-list`: one put of
  the list from that thread; `thread-fast`, `thread-list-fast`: the same with the interpreter's
  switch interval at 0.1 ms (`sys.setswitchinterval`) while both run.

Prints one JSON line: the build's seconds, the puts' seconds (as their thread saw them) and the
wall until every transfer has completed. Run each mode in its own process (a second build in one
process reuses jax's caches), interleaved.
"""

from __future__ import annotations

import json
import mmap
import sys
import threading
import time
import warnings
from typing import Any

import jax
import numpy as np

import shapes
from loader.format.header import read_header
from loader.target.abstract import abstract_build
from shapes.catalog import load_spec

MODES = (
    "build-only",
    "seq",
    "seq-list",
    "before",
    "before-list",
    "thread",
    "thread-list",
    "thread-fast",
    "thread-list-fast",
)
FAST_SWITCH_S = 1e-4


def mapped_tensors(path: str) -> list[np.ndarray]:
    """Every tensor of a `.safetensors` file as a view of the file mapped whole, in file order."""
    with open(path, "rb") as fh:
        pages = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
    return tensor_views(pages, path)


def tensor_views(pages: mmap.mmap, path: str) -> list[np.ndarray]:
    """Every tensor of the `.safetensors` file at `path` as a view of `pages` (the file mapped
    whole), in file order."""
    header = read_header(path)
    return [
        np.frombuffer(
            pages, dtype=info.np_dtype, count=info.numel, offset=header.data_start + info.begin
        ).reshape(info.shape)
        for info in sorted(header.tensors.values(), key=lambda info: info.begin)
    ]


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    name, checkpoint, mode = argv[0], argv[1], argv[2]
    if mode not in MODES:
        raise SystemExit(f"overlap_build: mode {mode!r}: give one of {', '.join(MODES)}")
    build = shapes.model_builder(load_spec(name))
    device = jax.devices()[0]
    t0 = time.perf_counter()
    views = mapped_tensors(checkpoint)
    arrays: list[Any] = []
    result: dict[str, Any] = {"shapes": name, "mode": mode}

    def put() -> None:
        began = time.perf_counter()
        if "list" in mode:
            arrays.extend(jax.device_put(views, [device] * len(views)))
        else:
            arrays.extend(jax.device_put(view, device) for view in views)
        result["puts_s"] = round(time.perf_counter() - began, 3)

    switch = sys.getswitchinterval()
    if mode.endswith("fast"):
        sys.setswitchinterval(FAST_SWITCH_S)
    sender = threading.Thread(target=put) if mode.startswith("thread") else None
    if sender is not None:
        sender.start()
    elif mode.startswith("before"):
        put()
    began = time.perf_counter()
    abstract_build(build)
    result["build_s"] = round(time.perf_counter() - began, 3)
    if sender is not None:
        sender.join()
    elif mode.startswith("seq"):
        put()
    sys.setswitchinterval(switch)
    jax.block_until_ready(arrays)
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
