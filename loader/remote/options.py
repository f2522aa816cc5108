"""A URL's options, as one group checked once: `RemoteOptions`.

`concurrency=` and `cache_dir=` say how a URL is read; `digest=`, `unvalidated=`, `idle_timeout=`
and `timeout=` say what a remote load must check and how long it waits (`loader.remote.ranges`).
Every strategy that loads a URL takes them under `loader.load_model`'s names and makes this group
from what it was given (`loader.strategies._engine_options`), so a bad value is refused in one line
however the strategy reads, and none is given for a local path, where it would do nothing
(`refuse_local`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from loader.errors import CheckpointError, RemoteError
from loader.remote.digest import parse_digest
from loader.remote.ranges import DEFAULT_CONCURRENCY, DEFAULT_IDLE_TIMEOUT_S, TimeLimits
from loader.remote.registry import schemes_text

#: What `unvalidated=` takes: "allow" accepts a server with neither ETag nor Last-Modified.
UNVALIDATED_CHOICES = ("refuse", "allow")
#: A digest for each file: one for a one-file checkpoint, or a shard file's name to its digest.
Digests = str | Mapping[str, str]

#: The most a `sharded` process's read plan may read, over the bytes of its share (the gaps it
#: reads through to save requests: `loader.sharded.read_plan`). 1.5: a process receives at most
#: half its share again, the ratio above which orbax v1's planner warns of heavy over-read.
DEFAULT_MAX_OVER_READ = 1.5


def check_concurrency(concurrency: int | None) -> int:
    """`concurrency` (default `DEFAULT_CONCURRENCY`), or a one-line error for a bad value."""
    if concurrency is None:
        return DEFAULT_CONCURRENCY
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or not 1 <= concurrency:
        raise RemoteError(f"concurrency={concurrency!r}: give a whole number of requests, >= 1")
    return concurrency


def _check_seconds(name: str, value: float | None) -> None:
    if value is None:
        return
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise RemoteError(f"{name}={value!r}: give a number of seconds > 0 (or None: no bound)")


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
        digest: the file's sha256 as `"sha256:<hex>"` (a checkpoint of several files: a mapping
            of each file's name to its digest), checked as the bytes arrive; the Hub's LFS
            files carry theirs. A mismatch fails the load.
        unvalidated: `"allow"` loads from a server that sends neither ETag nor Last-Modified
            and no digest is known (a file replaced during the load would go unseen; reported
            in `LoadReport.remote`); None or `"refuse"`: such a load is refused.
        idle_timeout: seconds without a byte before a request fails (default 30); also the
            window over which a body must bring the minimum rate
            (`loader.remote.transport.DEFAULT_MIN_RATE_BPS`), else it fails as too slow.
        timeout: seconds the whole remote load may take (None: no bound).

    Raises:
        RemoteError: a value out of its range (named, with what is expected).

    Example:
        >>> RemoteOptions(concurrency=32).requests
        32
    """

    concurrency: int | None = None
    cache_dir: str | os.PathLike[str] | None = None
    digest: Digests | None = None
    unvalidated: str | None = None
    idle_timeout: float | None = None
    timeout: float | None = None
    max_over_read: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None:
            check_concurrency(self.concurrency)
        if self.unvalidated is not None and self.unvalidated not in UNVALIDATED_CHOICES:
            raise RemoteError(
                f"unvalidated={self.unvalidated!r}: give 'allow' (accept a server without "
                "ETag or Last-Modified) or leave it out"
            )
        _check_seconds("idle_timeout", self.idle_timeout)
        _check_seconds("timeout", self.timeout)
        if isinstance(self.digest, Mapping):
            for name, value in self.digest.items():
                parse_digest(value, where=f"digest[{name!r}]")
        elif self.digest is not None:
            parse_digest(self.digest, where="digest")
        check_max_over_read(self.max_over_read)

    @property
    def requests(self) -> int:
        """Range requests in flight: `concurrency`, or `DEFAULT_CONCURRENCY`."""
        return check_concurrency(self.concurrency)

    @property
    def limits(self) -> TimeLimits:
        """The time limits these options set (`loader.remote.ranges.TimeLimits`)."""
        return TimeLimits(
            idle_s=self.idle_timeout or DEFAULT_IDLE_TIMEOUT_S, deadline_s=self.timeout
        )

    @property
    def allow_unvalidated(self) -> bool:
        return self.unvalidated == "allow"

    def refuse_local(self, path: str | os.PathLike[str]) -> None:
        """Refuse, in one line, an option given for a local `path` (it would do nothing)."""
        for name in (f.name for f in fields(self)):
            if getattr(self, name) is not None:
                raise CheckpointError(
                    f"{name}= applies to a remote checkpoint ({schemes_text()}) only; "
                    f"{os.fspath(path)} is local: drop it"
                )
