"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This was `loader.load_model`'s default before `pipelined` (still `strategy="hostcast"`). A URL
(`loader.remote`) is read one tensor at a time, its chunks `concurrency` range requests at once.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from loader.keys import KeyMap
from loader.phases import NULL_PROBE, Probe
from loader.policy import DEFAULT_POLICY, LoadPolicy
from loader.remote import remote_opener
from loader.report import LoadReport
from loader.sequence import OnBuilt, Recipe, run_load
from loader.stream import Stream

REMOTE = True
RECIPE = Recipe(Stream)  # the default reader and host cast


def load(  # noqa: PLR0913  the load keywords plus the remote ones, keyword-only
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe = NULL_PROBE,
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    on_built: OnBuilt | None = None,
    concurrency: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    policy: LoadPolicy = DEFAULT_POLICY,
    **options: Any,
) -> tuple[Any, LoadReport]:
    """`run_load(RECIPE, ...)`; a URL read through `loader.remote` (`concurrency`, `cache_dir`)."""
    recipe = dataclasses.replace(RECIPE, open_remote=remote_opener(path, concurrency, cache_dir))
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
