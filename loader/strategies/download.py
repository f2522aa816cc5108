"""Download, then load: a URL's files fetched whole to a local folder with the same client, then
loaded by `pipelined` (the reference a remote load is compared against; both phases timed).

The download is the `download` phase: checked range requests, `concurrency` in flight, each
chunk written at its offset (`loader.remote.cache`), so it costs what a user's own download with
a good client costs; the folder (under `LOADBENCH_DOWNLOAD_DIR`, else the system's temporary
folder) is removed once the model is loaded. It takes a URL only (`CHECKPOINT = URL`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from loader.errors import CheckpointError
from loader.phases import Probe
from loader.pipeline.options import PipelineOptions
from loader.remote import RemoteOptions, is_url
from loader.report import LoadReport
from loader.sequence import LoadArgs
from loader.vocabulary import DOWNLOAD, URL

CHECKPOINT = URL
REMOTE = True
#: range requests in flight for the download and what it checks (`INTEGRITY_OPTIONS`);
#: `pipelined`'s budget for the load that follows
OPTIONS = ("concurrency", "budget", "digest", "unvalidated", "idle_timeout", "timeout")


def load(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    options: Mapping[str, Any],
) -> tuple[Any, LoadReport]:
    """Download `path` (a URL) to a temporary folder, then `pipelined` from there.

    Example:
        >>> model, report = loader.load_model(
        ...     builder, "s3://bucket/model.safetensors", strategy="download", concurrency=16)
    """
    from loader.remote.cache import cached_copy
    from loader.remote.registry import schemes_text
    from loader.remote.source import RemoteSource
    from loader.strategies import pipelined

    if not is_url(path):
        raise CheckpointError(
            f"{path}: `download` loads a URL ({schemes_text()}); for a local file use pipelined"
        )
    remote = RemoteOptions.of(options)
    pipeline = PipelineOptions.of(options)  # its budget: the pipelined load's
    folder = os.environ.get("LOADBENCH_DOWNLOAD_DIR") or None
    with tempfile.TemporaryDirectory(prefix="loadbench-download-", dir=folder) as tmp:
        with probe.phase(DOWNLOAD), RemoteSource(str(path), remote) as source:
            local = cached_copy(source, tmp)
            stats = source.stats()
        model, report = pipelined.load_with(target, local, probe, args, pipeline, RemoteOptions())
    report.remote = stats
    return model, report
