"""The pipelined engine's options (`PipelineOptions`, checked once), its reader threads, stats
and errors.

`PipelineOptions` holds what `pipelined` takes beyond what every strategy does, under the names
`loader.load_model` gives them (`budget`, `staging`, `threads`, `cache_policy`): one frozen object,
each value checked where it is made, so the engine never meets a bad one.

`cache_policy=` (`loader.pipeline.cache_fit`): `"auto"` (default) drops ranges from the page cache
once read (`posix_fadvise(POSIX_FADV_DONTNEED)` behind the reader) only where files and model do
not fit in memory together; `"keep"` leaves the page cache as it is (a cold load leaves the file
cached: RAM then holds model and file); `"dontneed"` drops every range. The read-ahead hint at
open, given only where the files will fit, is `cache_fit.read_ahead`.

Reader threads (`threads=`, default from the CPUs this process may use and the page cache): a
warm read (the file's pages already cached) is a memory copy: it is CPU-bound, so one reader per
usable CPU, never more (on a 1-CPU host a second reader only takes turns with the first and with
the model build). A cold read waits on the disk: more requests in flight keep the device busy, so
twice the CPUs, at least 2 and at most `MAX_COLD_THREADS`. "Usable CPUs" and "cached" are the
host's answers (`loader.host`: the affinity mask capped by the cgroup CPU quota; `mincore`).
`threads=` on `load_model` / `PipelineOptions` overrides all of it (e.g. the queue depth that
`loadbench probe` found best for the disk: its `cold_read_threads`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path

from loader.errors import CheckpointError
from loader.host import cached_fraction, usable_cpus
from loader.pipeline.budget import DEFAULT_BUDGET_BYTES
from loader.pipeline.regions import drop_cached
from loader.planning.casts import CastValueError
from loader.vocabulary import AUTO, CACHE_POLICIES, DONTNEED

__all__ = ["PipelineOptions", "PipelineStats", "reader_error"]

MAX_WARM_THREADS = 8  # memory bandwidth, not cores, bounds a copy beyond this
MAX_COLD_THREADS = 16
COLD_BELOW = 0.5  # a file with less than this fraction of its pages cached reads as cold


@dataclass(frozen=True)
class PipelineOptions:
    """What `pipelined` takes beyond every strategy's arguments, each value checked once, here.

    The field names are `loader.load_model`'s keywords (and `pipelined`'s `OPTIONS`).

    Attributes:
        budget: bound in bytes on the host memory in flight beyond the model's own: the
            readers' scratch, speculative reads, host copies of transformed leaves and the
            staging ring (`loader.pipeline.budget`; default `DEFAULT_BUDGET_BYTES`, 256 MiB).
        staging: read through the staging ring onto the devices (`loader.pipeline.ring_job`):
            None (default) where the backend does not adopt host buffers (a GPU, a TPU); True
            forces it on the CPU backend (where it is tested); False never.
        threads: reader threads; None (default) sizes them from the CPUs this process may use
            and whether the files are cached (see the module docstring).
        cache_policy: `"auto"` (default: drop a range from the page cache once read only where
            the files and the model do not fit in memory together), `"keep"` or `"dontneed"`
            (drop every range once read; `loader.pipeline.cache_fit`).

    Raises:
        CheckpointError: a value of the wrong type or out of range, in one line naming it.

    Example:
        >>> PipelineOptions(budget=64 << 20, threads=2).cache_policy
        'auto'
    """

    budget: int = DEFAULT_BUDGET_BYTES
    staging: bool | None = None
    threads: int | None = None
    cache_policy: str = AUTO

    def __post_init__(self) -> None:
        if isinstance(self.budget, bool) or not isinstance(self.budget, Integral):
            raise CheckpointError(f"budget={self.budget!r}: give a whole number of bytes")
        if self.budget <= 0:
            raise CheckpointError(f"budget={self.budget!r}: give a positive number of bytes")
        object.__setattr__(self, "budget", int(self.budget))
        if self.staging is not None and not isinstance(self.staging, bool):
            raise CheckpointError(f"staging={self.staging!r}: give True, False or None")
        if self.threads is not None and (
            isinstance(self.threads, bool)
            or not isinstance(self.threads, Integral)
            or self.threads < 1
        ):
            raise CheckpointError(
                f"threads={self.threads!r}: give a whole number of reader threads, >= 1"
            )
        if self.cache_policy not in CACHE_POLICIES:
            raise CheckpointError(
                f"cache_policy={self.cache_policy!r} is not one of "
                f"{', '.join(map(repr, CACHE_POLICIES))}"
            )


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


def open_files(paths: Iterable[Path]) -> dict[str, int]:
    """Each file opened for reading (path -> fd)."""
    return {str(p): os.open(p, os.O_RDONLY) for p in paths}


def close_files(fds: dict[str, int], cache_policy: str) -> None:
    """Close the files (with `"dontneed"`, first dropping what read-ahead left cached)."""
    for fd in fds.values():
        if cache_policy == DONTNEED:
            drop_cached(fd, 0, 0)
        os.close(fd)
    fds.clear()


def reader_error(where: str, exc: BaseException) -> CheckpointError:
    """The error to raise on the main thread for a failure in a reader thread."""
    if isinstance(exc, CastValueError):  # a value check in the cast: name the tensor
        return exc.at(where)
    if isinstance(exc, CheckpointError):  # already names the file and tensor (`FileBytes`)
        return exc
    err = CheckpointError(f"{where}: reading failed ({type(exc).__name__}: {exc})")
    err.__cause__ = exc
    return err


def reader_threads(cpus: float, *, cold: bool) -> int:
    """Readers for `cpus` usable CPUs: one per whole CPU warm; twice the CPUs (2-16) cold."""
    if cold:
        return max(2, min(MAX_COLD_THREADS, 2 * math.ceil(cpus)))
    return max(1, min(MAX_WARM_THREADS, math.floor(cpus)))


def warm_threads() -> int:
    """Readers for warm files on the CPUs this process may use: the count before any file is
    opened (`file_threads` may raise it once they are)."""
    return reader_threads(usable_cpus(), cold=False)


def file_threads(fds: list[int]) -> int:
    """Readers for these open files: the cold count where under `COLD_BELOW` of them is cached."""
    cached = cached_fraction(fds)
    return reader_threads(usable_cpus(), cold=cached is not None and cached < COLD_BELOW)
