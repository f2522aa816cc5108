"""The pipelined engine's options (checked once), the record of what it did, and its reader error.

`cache_policy=`: `"keep"` (default) reads through the page cache and leaves it as it is (a cold
load leaves the file cached: RAM then holds the model and the file); `"dontneed"` drops each range
from the page cache once it is read (`posix_fadvise(POSIX_FADV_DONTNEED)` behind the reader; the
prefetch hint at open is skipped too), for a host whose RAM is tight. It drops the pages whether
or not they were cached before the load.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from loader.errors import CheckpointError
from loader.pipeline.regions import drop_cached
from loader.pipeline.threads import reader_threads, usable_cpus
from loader.vocabulary import CACHE_POLICIES, DONTNEED, KEEP

__all__ = ["CACHE_POLICIES", "DONTNEED", "KEEP", "PipelineStats", "check_options", "reader_error"]


@dataclass
class PipelineStats:
    """What the engine did: for reports and the bench."""

    budget_bytes: int = 0
    inflight_peak_bytes: int = 0  # high-water mark of budgeted bytes (scratch included)
    speculative_bytes: int = 0  # read (or prefaulted, strict) before the plan was known
    threads: int = 0
    read_s: float = 0.0  # summed over threads
    cast_s: float = 0.0
    coalesced: int = 0  # tensors read in runs of adjacent small tensors (`coalesce`)


def check_options(threads: int | None, cache_policy: str) -> int:
    """The reader thread count (`threads`, or the warm default); one-line errors for bad values."""
    if cache_policy not in CACHE_POLICIES:
        raise CheckpointError(
            f"cache_policy={cache_policy!r} is not one of {', '.join(map(repr, CACHE_POLICIES))}"
        )
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise CheckpointError(f"threads={threads!r}: give a whole number of reader threads, >= 1")
    return threads or reader_threads(usable_cpus(), cold=False)


def check_budget(limit: int, threads: int) -> int:
    """`limit`, or a one-line error where it cannot hold two pages per reader thread."""
    if limit < 4096 * threads * 2:
        raise CheckpointError(
            f"budget of {limit} bytes is too small; give at least {8192 * threads}"
        )
    return limit


def open_files(paths: Iterable[Path], cache_policy: str) -> dict[str, int]:
    """Each file opened for reading (path -> fd); with `"keep"`, the kernel asked to read ahead
    (`POSIX_FADV_WILLNEED`: with `"dontneed"` that would only fill the cache)."""
    fds = {str(p): os.open(p, os.O_RDONLY) for p in paths}
    for fd in fds.values() if cache_policy == KEEP else ():
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    return fds


def close_files(fds: dict[str, int], cache_policy: str) -> None:
    """Close the files (with `"dontneed"`, first dropping what read-ahead left cached)."""
    for fd in fds.values():
        if cache_policy == DONTNEED:
            drop_cached(fd, 0, 0)
        os.close(fd)
    fds.clear()


def reader_error(where: str, exc: BaseException) -> CheckpointError:
    """The error to raise on the main thread for a failure in a reader thread."""
    if isinstance(exc, CheckpointError):  # already names the file and tensor (`FileBytes`)
        return exc
    err = CheckpointError(f"{where}: reading failed ({type(exc).__name__}: {exc})")
    err.__cause__ = exc
    return err
