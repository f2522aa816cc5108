"""The page cache of a checkpoint's files: how much of it is resident, and evicting it (cold runs).

`evict(paths)` asks the kernel to drop every page of each file from the page cache: an `fsync`
first (DONTNEED leaves dirty pages alone; a checkpoint read for a bench has none, so it writes
nothing), then `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file. It returns what is still
resident afterwards, measured, never assumed: `resident_fraction(paths)` asks `mincore(2)` which
of each file's pages are in memory (`loader.host.resident_pages`, which faults nothing in),
weighted by bytes over all files. `set_cache(paths, cache)` puts the files in the state a run asks
for (evicted, or read until cached) and gives the `CacheOutcome` a row records.

Limits: pages another process holds mapped (or locked) are not dropped, and a file on a
filesystem without a page cache of its own (some FUSE or network mounts) may report nothing
resident while a cache below it stays warm. Both show up here as a fraction above 0, or as a
cold run that reads as fast as a warm one; `vmtouch -v FILE` cross-checks from outside. Linux only;
never imports jax.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.vocabulary import COLD
from loader.host import resident_pages

WARM_FRACTION = 0.99  # a warm run starts with at least this much of its files cached


@dataclass(frozen=True)
class CacheOutcome:
    """What a row records of the page cache its child started from (`cache`,
    `resident_fraction`: of the checkpoint's pages, measured just before the child ran), and how
    much of the checkpoint the load left cached (`growth_bytes`, `with_growth`)."""

    cache: str  # bench.vocabulary.CACHE_STATES
    resident_fraction: float | None = None
    growth_bytes: int | None = None  # the checkpoint's cached bytes after the child, less before

    def row_fields(self) -> dict[str, Any]:
        """The row's fields that say the page cache."""
        return {
            "cache": self.cache,
            "resident_fraction": self.resident_fraction,
            "pagecache_growth_bytes": self.growth_bytes,
        }


def checkpoint_files(path: str | os.PathLike) -> list[Path]:
    """Every regular file of a checkpoint: the file itself, or everything under a folder.

    An `*.index.json` path stands for its folder (the index and the shards it names are there).
    """
    p = Path(path)
    if p.name.endswith(".index.json"):
        p = p.parent
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and not f.is_symlink())
    raise BenchError(f"{p}: no such checkpoint file or folder to read the page cache of")


def resident_fraction(paths: Iterable[str | os.PathLike]) -> float | None:
    """The fraction of the files' pages in the page cache now (None for no pages at all)."""
    resident = total = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                r, n = resident_pages(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise BenchError(f"{path}: cannot read its page-cache residency ({exc})") from None
        resident, total = resident + r, total + n
    return resident / total if total else None


def evict(paths: Iterable[str | os.PathLike]) -> float | None:
    """Drop the files from the page cache; the fraction still resident afterwards (measured)."""
    paths = [Path(p) for p in paths]
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise BenchError(
                f"{path}: cannot open it to evict it from the page cache ({exc})"
            ) from None
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident_fraction(paths)


def warm(paths: Iterable[str | os.PathLike], block: int = 8 << 20) -> float | None:
    """Read the files once so they are cached (a warm run's precondition); the fraction resident."""
    paths = [Path(p) for p in paths]
    buf = bytearray(block)
    for path in paths:
        with open(path, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    return resident_fraction(paths)


def with_growth(outcome: CacheOutcome, paths: Iterable[str | os.PathLike]) -> CacheOutcome:
    """`outcome` with the growth of the files' cached bytes over the child's run (mincore after,
    less before, times the files' size; page-granular); unchanged where either is unknown."""
    files = [Path(p) for p in paths]
    after = resident_fraction(files)
    if outcome.resident_fraction is None or after is None:
        return outcome
    size = sum(f.stat().st_size for f in files)
    return replace(outcome, growth_bytes=round((after - outcome.resident_fraction) * size))


def set_cache(paths: Iterable[str | os.PathLike], cache: str) -> CacheOutcome:
    """Evict the files (`cold`), or read them where less than `WARM_FRACTION` is cached (`warm`);
    the resident fraction measured afterwards."""
    paths = list(paths)
    if cache == COLD:
        return CacheOutcome(cache, evict(paths))
    fraction = resident_fraction(paths)
    if fraction is not None and fraction < WARM_FRACTION:
        fraction = warm(paths)
    return CacheOutcome(cache, fraction)
