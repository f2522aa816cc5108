"""A URL's options (`concurrency=`, `cache_dir=`, `max_over_read=`), as one group checked once.

Every strategy that loads a URL takes them under `loader.load_model`'s names and makes this group
from what it was given (`RemoteOptions.of`), so a bad value is refused in one line however the
strategy reads, and none is given for a local path, where it would do nothing (`refuse_local`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from loader.errors import CheckpointError, RemoteError
from loader.remote.ranges import DEFAULT_CONCURRENCY

#: The most a `sharded` process's read plan may read, over the bytes of its share (the gaps it
#: reads through to save requests: `loader.sharded.read_plan`). 1.5 is the issue's bound on a
#: process's bytes received, and the ratio above which orbax v1's planner warns of heavy over-read.
DEFAULT_MAX_OVER_READ = 1.5


def check_concurrency(concurrency: int | None) -> int:
    """`concurrency` (default `DEFAULT_CONCURRENCY`), or a one-line error for a bad value."""
    if concurrency is None:
        return DEFAULT_CONCURRENCY
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or not 1 <= concurrency:
        raise RemoteError(f"concurrency={concurrency!r}: give a whole number of requests, >= 1")
    return concurrency


def check_max_over_read(max_over_read: float | None) -> float:
    """`max_over_read` (default `DEFAULT_MAX_OVER_READ`), or a one-line error for a bad value.

    Example:
        >>> check_max_over_read(None)
        1.5
    """
    if max_over_read is None:
        return DEFAULT_MAX_OVER_READ
    number = isinstance(max_over_read, int | float) and not isinstance(max_over_read, bool)
    if not number or not 1 <= max_over_read < float("inf"):
        raise RemoteError(
            f"max_over_read={max_over_read!r}: give a ratio of bytes read to bytes needed, "
            ">= 1 (1: read only the share; 1.5: up to half as much again to save requests)"
        )
    return float(max_over_read)


@dataclass(frozen=True)
class RemoteOptions:
    """A URL's options, each checked where the group is made.

    Attributes:
        concurrency: range requests in flight; None: not given (the strategy's default,
            `DEFAULT_CONCURRENCY` for ours: `requests`).
        cache_dir: download the URL's files there once, then load them locally; None: a
            remote load writes no file.
        max_over_read: the most a `sharded` process's read plan reads over its share's bytes
            (`loader.sharded.read_plan`); None: not given (`DEFAULT_MAX_OVER_READ`).

    Raises:
        RemoteError: a concurrency that is not a whole number >= 1, or a max_over_read that is
            not a number >= 1.

    Example:
        >>> RemoteOptions.of({"concurrency": 32, "budget": 1 << 20}).requests
        32
    """

    concurrency: int | None = None
    cache_dir: str | os.PathLike[str] | None = None
    max_over_read: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None:
            check_concurrency(self.concurrency)
        check_max_over_read(self.max_over_read)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RemoteOptions:
        """The group of the remote options among a strategy's `options` (the others left out)."""
        return cls(**{f.name: options[f.name] for f in fields(cls) if f.name in options})

    @property
    def requests(self) -> int:
        """Range requests in flight: `concurrency`, or `DEFAULT_CONCURRENCY`."""
        return check_concurrency(self.concurrency)

    def refuse_local(self, path: str | os.PathLike[str]) -> None:
        """Refuse, in one line, an option given for a local `path` (it would do nothing)."""
        for name in (f.name for f in fields(self)):
            if getattr(self, name) is not None:
                raise CheckpointError(
                    f"{name}= applies to a remote checkpoint (https://, s3://, hf://) only; "
                    f"{os.fspath(path)} is local: drop it"
                )
