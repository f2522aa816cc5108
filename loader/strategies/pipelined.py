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
from loader.options import LoadOptions
from loader.pipeline import Pipeline
from loader.pipeline.sources import ByteSource
from loader.pipeline.sources.local import LocalFiles
from loader.pipeline.sources.remote import RemoteFiles
from loader.planning.quantized import dequantize_on_device
from loader.remote import is_url, remote_opener
from loader.report import LoadReport
from loader.sequence import LoadRequest, Recipe

#: The option groups this strategy takes (`loader.options`): `reading` and `placement`, and for
#: a URL `remote` (`concurrency`: range requests in flight, one reader thread each; `cache_dir`:
#: download the files there first, then read them locally) and `checking` (what the bytes are
#: checked against and how long a load waits).
OPTIONS = ("reading", "placement", "remote", "checking")
REMOTE = True


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """Build the target abstractly while reader threads fill host buffers; then place every leaf.

    `request.options`: the groups it declares, as they are: `reading` and `placement` for the
    engine (`Pipeline`), `reading` for a local file's readers (`LocalFiles`), `remote` and
    `checking` for a URL's (each value checked when the groups were made);
    `request.args.on_built` gets the abstract model while the readers run (start compiling the
    forward there).
    """
    return load_with(request, request.options)


def load_with(request: LoadRequest, options: LoadOptions) -> tuple[Any, LoadReport]:
    """`load` with `options` (`download` passes its own): the byte source chosen here, once (a
    local checkpoint: `LocalFiles`; a URL: `RemoteFiles`, one reader thread a request in flight,
    or with `cache_dir` the downloaded copy as `LocalFiles`)."""
    reading, remote = options.reading, options.remote
    if is_url(request.path) and remote.cache_dir is None and reading.threads is not None:
        raise CheckpointError(
            f"threads={reading.threads!r} with a URL: give concurrency= (requests in "
            "flight; one reader thread each) instead"
        )
    local = partial(LocalFiles, reading=reading)
    args = request.args
    recipe = Recipe[ByteSource](
        lambda: Pipeline(reading, options.placement, strict=args.strict, key_map=args.key_map),
        open_source=local,
        open_remote=remote_opener(remote, options.checking, RemoteFiles, local),
        adjust_plan=dequantize_on_device,
    )
    return recipe.run(request)
