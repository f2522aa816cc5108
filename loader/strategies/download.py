"""Download, then load: a URL's files fetched whole to a local folder with the same client, then
loaded by `pipelined` (the reference a remote load is compared against; both phases timed).

The download is the `download` phase: checked range requests, `concurrency` in flight, each
chunk written at its offset (`loader.remote.cache`), so it costs what a user's own download with
a good client costs; the folder (under `LOADBENCH_DOWNLOAD_DIR`, else the system's temporary
folder) is removed once the model is loaded. It takes a URL only (`CHECKPOINT = URL`).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

from loader.errors import CheckpointError
from loader.options import LoadOptions
from loader.remote import is_url
from loader.report import LoadReport
from loader.sequence import LoadRequest
from loader.vocabulary import DOWNLOAD, URL

CHECKPOINT = URL
REMOTE = True
#: range requests in flight for the download and what it checks (`loader.options`);
#: `pipelined`'s budget for the load that follows
OPTIONS = ("remote.concurrency", "reading.budget", "checking")


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """Download `path` (a URL) to a temporary folder, then `pipelined` from there.

    Example:
        >>> model, report = loader.load_model(
        ...     builder, "s3://bucket/model.safetensors", strategy="download", concurrency=16)
    """
    from loader.remote.cache import cached_copy
    from loader.remote.registry import schemes_text
    from loader.remote.source import RemoteSource
    from loader.strategies import pipelined

    path = request.path
    if not is_url(path):
        raise CheckpointError(
            f"{path}: `download` loads a URL ({schemes_text()}); for a local file use pipelined"
        )
    options = request.options
    folder = os.environ.get("LOADBENCH_DOWNLOAD_DIR") or None
    with tempfile.TemporaryDirectory(prefix="loadbench-download-", dir=folder) as tmp:
        source = RemoteSource(str(path), options.remote, options.checking)
        with request.probe.phase(DOWNLOAD), source:
            local = cached_copy(source, tmp)
            stats = source.stats()
        there = dataclasses.replace(request, path=local)
        model, report = pipelined.load_with(there, LoadOptions(reading=options.reading))
    report.remote = stats
    return model, report
