"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This was `loader.load_model`'s default before `pipelined` (still `strategy="hostcast"`). A URL
(`loader.remote`) is read one tensor at a time, its chunks `concurrency` range requests at once.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from loader.format.source import CheckpointSource
from loader.phases import Probe
from loader.remote import RemoteOptions, is_url, remote_opener
from loader.remote.source import RemoteSource
from loader.report import LoadReport
from loader.sequence import LoadArgs, Recipe, run_load
from loader.stream import Stream

#: For a URL only: range requests in flight, a folder to download the files to first, and what
#: the bytes are checked against and how long a load waits (`INTEGRITY_OPTIONS`).
OPTIONS = ("concurrency", "cache_dir", "digest", "unvalidated", "idle_timeout", "timeout")
REMOTE = True
RECIPE = Recipe(Stream)  # the default reader and host cast


def load(
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe,
    args: LoadArgs,
    options: Mapping[str, Any],
) -> tuple[Any, LoadReport]:
    """`run_load(RECIPE, ...)`; a URL read through `loader.remote` (`concurrency`, `cache_dir`)."""
    remote = RemoteOptions.of(options)
    if not is_url(path):
        remote.refuse_local(path)
    opener = remote_opener(remote, RemoteSource, CheckpointSource)
    recipe = dataclasses.replace(RECIPE, open_remote=opener)
    return run_load(recipe, target, path, probe, args)
