"""Temporary files of `loader.format.atomic`: their one naming pattern, a lock that marks them live,
and the removal of the ones a killed writer left behind.

A write to `dir/name` goes through `dir/.name.<8 random chars>.tmp` (`tempfile.mkstemp`), locked
with `flock(LOCK_EX)` for as long as the writer runs. The kernel drops that lock when the writer's
process dies, however it dies (`kill -9` included), so a temporary that can be locked by someone
else is debris: nothing will ever rename it. The next atomic write to the same target removes such
files (only names of exactly that pattern, only when unlocked) and says so in a `StaleTempWarning`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import warnings
from pathlib import Path

_RANDOM = "[a-z0-9_]{8}"  # tempfile's names: 8 characters from this alphabet


class StaleTempWarning(UserWarning):
    """Temporary files of an interrupted write were found and removed."""


def temp_prefix(target: Path) -> str:
    return f".{target.name}."


def temp_pattern(target: Path) -> re.Pattern[str]:
    """The names `atomic_open(target)` gives its temporary files, and nothing else."""
    return re.compile(rf"{re.escape(temp_prefix(target))}{_RANDOM}\.tmp")


def mark_live(fd: int) -> None:
    """Lock a temporary's descriptor so no other writer takes it for debris."""
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _is_abandoned(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False  # a live writer holds it
        raise
    finally:
        os.close(fd)


def remove_stale_temps(target: str | os.PathLike[str]) -> list[Path]:
    """Remove abandoned temporaries of `target`; warn naming them. Returns what was removed."""
    target = Path(target)
    pattern = temp_pattern(target)
    try:
        names = [n for n in os.listdir(target.parent) if pattern.fullmatch(n)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = target.parent / name
        if path.is_file() and not path.is_symlink() and _is_abandoned(path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    if removed:
        warnings.warn(
            f"removed {len(removed)} stale temporary file(s) of an interrupted write of "
            f"{target}: {', '.join(p.name for p in removed)}",
            StaleTempWarning,
            stacklevel=3,
        )
    return removed
