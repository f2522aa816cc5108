"""An exclusive, blocking `flock` on a folder: one writer at a time, released when it exits or dies.

Locks the folder's own descriptor (Linux allows `flock` on directories), so no lock file is left
behind; the kernel drops the lock with the process, a `kill -9` included.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from loader.errors import CheckpointError


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (created if missing) for the block; waits for others."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise CheckpointError(
            f"{path}: cannot create or open the folder ({e.strerror or e})"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
