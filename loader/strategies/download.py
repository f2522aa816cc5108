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
from typing import Any

from loader.errors import CheckpointError
from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.policy import DEFAULT_POLICY, LoadPolicy
from loader.remote import is_url
from loader.report import LoadReport
from loader.sequence import OnBuilt
from loader.vocabulary import DOWNLOAD, URL

CHECKPOINT = URL
REMOTE = True


def load(  # noqa: PLR0913  the load keywords plus the remote ones, keyword-only
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    on_built: OnBuilt | None = None,
    concurrency: int | None = None,
    budget: int | None = None,
    policy: LoadPolicy = DEFAULT_POLICY,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """Download `path` (a URL) to a temporary folder, then `pipelined` from there.

    Example:
        >>> model, report = load(builder, "s3://bucket/model.safetensors", concurrency=16)
    """
    from loader.remote.cache import cached_copy
    from loader.remote.source import RemoteSource
    from loader.strategies import pipelined

    if not is_url(path):
        raise CheckpointError(
            f"{path}: `download` loads a URL (https://, s3://, hf://); for a "
            "local file use pipelined"
        )
    folder = os.environ.get("LOADBENCH_DOWNLOAD_DIR") or None
    with tempfile.TemporaryDirectory(prefix="loadbench-download-", dir=folder) as tmp:
        with probe.phase(DOWNLOAD), RemoteSource(str(path), concurrency=concurrency) as source:
            local = cached_copy(source, tmp)
            stats = source.stats()
        model, report = pipelined.load(
            target,
            local,
            probe,
            strict=strict,
            key_map=key_map,
            on_built=on_built,
            budget=budget,
            policy=policy,
        )
    report.remote = stats
    return model, report
