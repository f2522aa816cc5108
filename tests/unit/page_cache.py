"""The page cache of a test's checkpoint file: how much of it is cached, and evicting it."""

from __future__ import annotations

import os

from loader import host


def evicted(path) -> bool:
    """Drop the file from the page cache; whether this filesystem did (under 5% left cached)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return (host.cached_fraction([fd]) or 0.0) < 0.05
    finally:
        os.close(fd)


def cached(path) -> float:
    """The fraction of the file's pages in the page cache (mincore)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return host.cached_fraction([fd]) or 0.0
    finally:
        os.close(fd)
