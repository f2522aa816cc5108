"""Reference line, not a model load: read the whole file into one preallocated buffer.

This is the least a load can cost on a CPU host: 1.0x the checkpoint in RAM and one sequential read
(into a `loader.format.buffers` mapping, so no huge-page compaction stall is charged to it). Every
strategy's time and peak are read against it.
"""

from __future__ import annotations

import os

import numpy as np

from loader.format.buffers import host_buffer
from loader.format.source import checkpoint_files, pread_exact
from loader.phases import READ
from loader.sequence import LoadRequest
from loader.vocabulary import REFERENCE

KIND = REFERENCE


def load(request: LoadRequest) -> tuple[None, None]:
    """Read every byte of the checkpoint into one buffer; returns (None, None) (it loads no
    model, so what every strategy takes, `request.args`, has nothing to act on)."""
    files = checkpoint_files(request.path)
    with request.probe.phase(READ):
        buffer = host_buffer((sum(os.path.getsize(f) for f in files),), np.uint8)
        cursor = 0
        for f in files:
            size = os.path.getsize(f)
            fd = os.open(f, os.O_RDONLY)
            try:
                pread_exact(fd, buffer[cursor : cursor + size], 0, where=str(f))
            finally:
                os.close(fd)
            cursor += size
        del buffer
    return None, None
