"""The C library's functions that Python's own modules lack (`madvise` with Linux-only advice,
`mincore`, `mmap` at a chosen address), opened once for every module that calls one.

They are looked up in this process's own symbols first (`ctypes.CDLL(None)`: the interpreter is
linked against the C library), and in the library found by name only where those lack one:
`ctypes.util.find_library` runs `ldconfig` in a subprocess, which inside a sandbox such as gVisor
costs tens of milliseconds of the first load's start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _process_symbols() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


@functools.cache
def _named_library() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def libc_function(name: str) -> Any | None:
    """The C library's function `name` (errno kept for `ctypes.get_errno`), or None where there
    is none. One object per name and process: set its `argtypes` and `restype` once."""
    for library in (_process_symbols, _named_library):
        found = library()
        function = getattr(found, name, None) if found is not None else None
        if function is not None:
            return function
    return None
