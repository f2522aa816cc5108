"""Crash-safe file writes: a temp file in the same folder, fsync, then `os.replace`.

A crash at any point leaves either the previous file or none, never a partial one. Every writer in
loadbench (checkpoints, synthetic checkpoints, digests, presets, manifests) goes through here. The
temporary is locked while written, and the next write to the same target removes the temporaries a
killed writer left (`loader.format.stale_temps`). A failed write (full disk, file-size limit,
read-only folder, fsync error) raises one `CheckpointError` naming the target and the errno.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from loader.errors import CheckpointError
from loader.format.stale_temps import mark_live, remove_stale_temps, temp_prefix


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a binary file for writing that appears at `path` only if the block completes.

    Example:
        >>> with atomic_open("model.safetensors") as fh:
        ...     fh.write(b"...")
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(target)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _write_error(target, e) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            mark_live(fh.fileno())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _write_error(target, e) from None
        raise
    _fsync_dir(target.parent)


def _write_error(target: Path, e: OSError) -> CheckpointError:
    code = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "no errno"
    hint = {
        errno.ENOSPC: "free disk space or write elsewhere",
        errno.EFBIG: "the file exceeds a file-size limit (ulimit -f) or the filesystem's maximum",
        errno.EROFS: "the filesystem is read-only; write elsewhere",
        errno.EACCES: "no write permission on the folder; write elsewhere or fix its permissions",
        errno.EDQUOT: "disk quota exceeded",
    }.get(e.errno or 0, "the previous file, if any, is unchanged")
    return CheckpointError(
        f"{target}: write failed ({code}: {e.strerror or e}); nothing was replaced; {hint}"
    )


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_open(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def withdraw(path: str | os.PathLike[str]) -> None:
    """Remove a completion marker (a manifest, a digests file) before rewriting what it vouches
    for; a missing one is fine, a failure raises the same `CheckpointError` as a failed write."""
    try:
        Path(path).unlink(missing_ok=True)
    except OSError as e:
        raise _write_error(Path(path), e) from None
