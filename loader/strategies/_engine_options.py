"""The engines' own options, made from a load's option groups (`loader.options.LoadOptions`).

Each engine checks its values where its options are made, once: `pipelined`'s
`loader.pipeline.PipelineOptions` from `reading` and `placement`, a URL's
`loader.remote.options.RemoteOptions` from `remote`, `checking` and `sharing.max_over_read`. The
strategies that take those groups make them here, so no strategy spells an option's name.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from loader.options import LoadOptions
from loader.remote import is_url
from loader.remote.options import RemoteOptions

if TYPE_CHECKING:  # imported where it is made: `sharded` runs no file of `loader.pipeline`
    from loader.pipeline.options import PipelineOptions


def pipeline_options(options: LoadOptions) -> PipelineOptions:
    """`pipelined`'s engine options, from `reading` and `placement`.

    Example:
        >>> pipeline_options(LoadOptions.of(budget=64 << 20)).budget
        67108864
    """
    from loader.pipeline.options import PipelineOptions

    return PipelineOptions(**options.reading.given(), **options.placement.given())


def remote_options(
    options: LoadOptions, path: str | os.PathLike[str] | None = None
) -> RemoteOptions:
    """A URL's options from `remote`, `checking` and `sharing.max_over_read`; given a local
    `path`, any of them is refused in one line (it would do nothing there).

    Example:
        >>> remote_options(LoadOptions.of(concurrency=8)).requests
        8
    """
    given = {**options.remote.given(), **options.checking.given()}
    remote = RemoteOptions(**given, max_over_read=options.sharing.max_over_read)
    if path is not None and not is_url(path):
        remote.refuse_local(path)
    return remote
