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
from typing import Any

from loader.errors import CheckpointError
from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.pipeline import Pipeline, PipelineOptions
from loader.policy import DEFAULT_POLICY, LoadPolicy
from loader.remote import FileSource, is_url, remote_opener
from loader.remote.source import check_concurrency
from loader.report import LoadReport
from loader.sequence import OnBuilt, Recipe, run_load
from loader.vocabulary import AUTO

REMOTE = True


def load(  # noqa: PLR0913  the load keywords plus the pipeline's own, keyword-only
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    budget: int | None = None,
    staging: bool | None = None,
    threads: int | None = None,
    cache_policy: str = AUTO,
    on_built: OnBuilt | None = None,
    policy: LoadPolicy = DEFAULT_POLICY,
    concurrency: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Build `target` abstractly while reader threads fill host buffers; then place every leaf.

    Args:
        budget: bound in bytes on host memory in flight beyond the model's own (default 256 MiB).
        staging: stage through host buffers onto the devices (None: where the backend does not
            adopt host buffers).
        threads: reader threads (default: from the usable CPUs and whether the file is cached).
        cache_policy: `"auto"` (default: drop a range from the page cache once read only where
            the files and the model do not fit in memory together), `"keep"` or `"dontneed"`
            (drop every range; `loader.pipeline.cache_fit`).
        on_built: called with the abstract model once it is built, while the readers run
            (`loader.sequence.run_load`): start compiling the forward there.
        concurrency: a URL's range requests in flight, one reader thread each (`loader.remote`).
        cache_dir: download a URL's files here first, then read them locally.
    """
    if is_url(path) and cache_dir is None:  # one reader thread per request in flight
        if threads is not None:
            raise CheckpointError(
                f"threads={threads!r} with a URL: give concurrency= (requests in flight; one "
                "reader thread each) instead"
            )
        threads = check_concurrency(concurrency)

    given: dict[str, Any] = {
        "budget": budget,
        "staging": staging,
        "threads": threads,
        "cache_policy": cache_policy,
    }
    settings = PipelineOptions(**{k: v for k, v in given.items() if v is not None})
    recipe = Recipe[FileSource](
        lambda: Pipeline(settings, strict=strict),
        open_remote=remote_opener(path, concurrency, cache_dir),
    )
    return run_load(
        recipe,
        target,
        path,
        probe,
        strict=strict,
        key_map=key_map,
        on_built=on_built,
        policy=policy,
    )
