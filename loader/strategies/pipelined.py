"""Reads start before the build, on several threads, into buffers the device adopts;
casts in chunks.

The reads need only the header, so reader threads start at once while the model is built
abstractly, and each leaf gets its buffer when both are ready (`loader.pipeline.Pipeline`, the
executor this strategy passes `loader.sequence.run_load`). With `strict=True` nothing is read
before the plan check passes: during the build the threads only allocate and prefault buffers.
Host bytes in flight beyond the model's own stay within `budget` (default
`loader.pipeline.DEFAULT_BUDGET_BYTES`, 256 MiB); the high-water mark is reported in
`LoadReport.inflight_peak_bytes`.

On a backend that does not adopt host buffers (a GPU, a TPU) the reads go through a bounded ring
of host staging buffers straight onto each device's region (`loader.pipeline.ring_job`), so host
memory stays within the budget while the model lands on the devices; `staging=True` forces that
path on the CPU backend (where it is tested), `staging=False` keeps the adopting path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from loader.errors import CheckpointError
from loader.phases import Probe
from loader.pipeline import Pipeline, PipelineOptions
from loader.remote import FileSource, is_url, remote_opener
from loader.remote.source import check_concurrency
from loader.report import LoadReport
from loader.sequence import LoadArgs, Recipe, run_load

#: `loader.load_model`'s options this strategy takes: `PipelineOptions`' fields, and for a URL
#: `concurrency` (range requests in flight, one reader thread each) and `cache_dir` (download the
#: files there first, then read them locally; `loader.remote`).
OPTIONS = ("budget", "staging", "threads", "cache_policy", "concurrency", "cache_dir")
REMOTE = True


def load(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    options: Mapping[str, Any],
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly while reader threads fill host buffers; then place every leaf.

    `options`: `PipelineOptions`' (`budget`, `staging`, `threads`, `cache_policy`), checked once
    when it is made, and a URL's `concurrency` and `cache_dir`; `args.on_built` gets the abstract
    model while the readers run (start compiling the forward there).
    """
    pipeline = dict(options)
    concurrency = pipeline.pop("concurrency", None)
    cache_dir = pipeline.pop("cache_dir", None)
    if is_url(path) and cache_dir is None:  # one reader thread per request in flight
        if "threads" in pipeline:
            raise CheckpointError(
                f"threads={pipeline['threads']!r} with a URL: give concurrency= (requests in "
                "flight; one reader thread each) instead"
            )
        pipeline["threads"] = check_concurrency(concurrency)
    settings = PipelineOptions(**pipeline)
    recipe = Recipe[FileSource](
        lambda: Pipeline(settings, strict=args.strict),
        open_remote=remote_opener(path, concurrency, cache_dir),
    )
    return run_load(recipe, target, path, probe, args)
