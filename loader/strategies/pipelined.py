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
from functools import partial
from typing import Any

from loader.errors import CheckpointError
from loader.phases import Probe
from loader.pipeline import Pipeline, PipelineOptions
from loader.pipeline.sources import ByteSource
from loader.pipeline.sources.local import LocalFiles
from loader.pipeline.sources.remote import RemoteFiles
from loader.remote import RemoteOptions, is_url, remote_opener
from loader.report import LoadReport
from loader.sequence import LoadArgs, Recipe, run_load

#: `loader.load_model`'s options this strategy takes: `PipelineOptions`' fields, and for a URL
#: `RemoteOptions`' `concurrency` (range requests in flight; one reader thread each),
#: `cache_dir` (download the files there first, then read them locally; `loader.remote`) and
#: what the bytes are checked against and how long a load waits (`INTEGRITY_OPTIONS`).
OPTIONS = (
    "budget",
    "staging",
    "threads",
    "cache_policy",
    "concurrency",
    "cache_dir",
    "digest",
    "unvalidated",
    "idle_timeout",
    "timeout",
)
REMOTE = True


def load(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    options: Mapping[str, Any],
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly while reader threads fill host buffers; then place every leaf.

    `options`: `PipelineOptions`' (`budget`, `staging`, `threads`, `cache_policy`) and
    `RemoteOptions`' (`concurrency`, `cache_dir`, `INTEGRITY_OPTIONS`), each group checked once
    when it is made;
    `args.on_built` gets the abstract model while the readers run (start compiling the forward
    there).
    """
    pipeline, remote = PipelineOptions.of(options), RemoteOptions.of(options)
    return load_with(target, path, probe, args, pipeline, remote)


def load_with(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    pipeline: PipelineOptions,
    remote: RemoteOptions,
) -> tuple[Any, LoadReport]:
    """`load` with its option groups made: the byte source chosen here, once (a local checkpoint:
    `LocalFiles`; a URL: `RemoteFiles`, one reader thread a request in flight, or with
    `cache_dir` the downloaded copy as `LocalFiles`)."""
    if not is_url(path):
        remote.refuse_local(path)
    elif remote.cache_dir is None and pipeline.threads is not None:
        raise CheckpointError(
            f"threads={pipeline.threads!r} with a URL: give concurrency= (requests in "
            "flight; one reader thread each) instead"
        )
    local = partial(LocalFiles, cache_policy=pipeline.cache_policy)
    recipe = Recipe[ByteSource](
        lambda: Pipeline(pipeline, strict=args.strict),
        open_source=local,
        open_remote=remote_opener(remote, RemoteFiles, local),
    )
    return run_load(recipe, target, path, probe, args)
