"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This was `loader.load_model`'s default before `pipelined` (still `strategy="hostcast"`). A URL
(`loader.remote`) is read one tensor at a time, its chunks `concurrency` range requests at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loader.format.source import CheckpointSource
from loader.remote import remote_opener
from loader.remote.source import RemoteSource
from loader.report import LoadReport
from loader.sequence import LoadRequest, Recipe
from loader.stream import Stream

#: For a URL only (`loader.options`): range requests in flight and a folder to download the
#: files to first (`remote`), what the bytes are checked against and how long a load waits.
OPTIONS = ("remote", "checking")
REMOTE = True
RECIPE = Recipe(Stream)  # the default reader and host cast


def load(request: LoadRequest) -> tuple[Any, LoadReport]:
    """`run_load(RECIPE, ...)`; a URL read through `loader.remote` (`concurrency`, `cache_dir`)."""
    options = request.options
    opener = remote_opener(options.remote, options.checking, RemoteSource, CheckpointSource)
    return dataclasses.replace(RECIPE, open_remote=opener).run(request)
