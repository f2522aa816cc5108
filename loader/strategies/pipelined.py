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

A leaf made from a quantized layout (`loader.Dequantize`, ...) travels as its file tensors, as
stored, and is dequantized on its device (`loader.planning.quantized.dequantize_on_device`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from loader.errors import CheckpointError
from loader.pipeline import Pipeline, PipelineOptions
from loader.pipeline.sources import ByteSource
from loader.pipeline.sources.local import LocalFiles
from loader.pipeline.sources.remote import RemoteFiles
from loader.planning.quantized import dequantize_on_device
from loader.remote import RemoteOptions, is_url, remote_opener
from loader.report import LoadReport
from loader.sequence import LoadRequest, Recipe
from loader.strategies._engine_options import pipeline_options, remote_options

#: The option groups this strategy takes (`loader.options`): `reading` and `placement` (its
#: `PipelineOptions`), and for a URL `remote` (`concurrency`: range requests in flight, one
#: reader thread each; `cache_dir`: download the files there first, then read them locally) and
#: `checking` (what the bytes are checked against and how long a load waits).
OPTIONS = ("reading", "placement", "remote", "checking")
REMOTE = True


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """Build the target abstractly while reader threads fill host buffers; then place every leaf.

    `request.options`: `reading` and `placement` make its `PipelineOptions` (`budget`,
    `staging`, `threads`, `cache_policy`), `remote` and `checking` its `RemoteOptions`
    (`loader.strategies._engine_options`), each
    checked once when it is made; `request.args.on_built` gets the abstract model while the
    readers run (start compiling the forward there).
    """
    options = request.options
    return load_with(request, pipeline_options(options), remote_options(options, request.path))


def load_with(
    request: LoadRequest, pipeline: PipelineOptions, remote: RemoteOptions
) -> tuple[Any, LoadReport]:
    """`load` with its engine's options made: the byte source chosen here, once (a local
    checkpoint: `LocalFiles`; a URL: `RemoteFiles`, one reader thread a request in flight, or
    with `cache_dir` the downloaded copy as `LocalFiles`)."""
    if is_url(request.path) and remote.cache_dir is None and pipeline.threads is not None:
        raise CheckpointError(
            f"threads={pipeline.threads!r} with a URL: give concurrency= (requests in "
            "flight; one reader thread each) instead"
        )
    local = partial(LocalFiles, cache_policy=pipeline.cache_policy)
    recipe = Recipe[ByteSource](
        lambda: Pipeline(pipeline, strict=request.args.strict, key_map=request.args.key_map),
        open_source=local,
        open_remote=remote_opener(remote, RemoteFiles, local),
        adjust_plan=dequantize_on_device,
    )
    return recipe.run(request)
