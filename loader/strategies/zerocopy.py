"""pread each tensor into a 64-byte-aligned host buffer that the CPU backend adopts without a copy.

The buffers are page-aligned private anonymous mappings (`loader.format.buffers`).

On the CPU backend, `jax.device_put` of a 64-byte-aligned, C-contiguous numpy array aliases its
memory instead of copying it, so each tensor exists once: the buffer read from the file *is* the
device array. On an accelerator there is no such aliasing: the buffer is a staging copy that is
freed once the host-to-device transfer completes, so the host peak stays one tensor, as in `builder`.
"""

from __future__ import annotations

import numpy as np

from loader.format.buffers import host_buffer
from loader.format.source import CheckpointSource
from loader.load import stream_load
from loader.phases import NULL_PROBE


class _AlignedReader:
    def __init__(self, source: CheckpointSource) -> None:
        self.source = source

    def __call__(self, key: str) -> np.ndarray:
        info = self.source.info(key)
        return self.source.read_into(key, host_buffer(info.shape, info.np_dtype))


def aligned_cast(host: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast into a fresh aligned buffer, so a cast tensor is adopted without a copy too."""
    out = host_buffer(host.shape, dtype)
    np.copyto(out, host, casting="unsafe")
    return out


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Build `target` abstractly and stream tensors into aligned buffers adopted by the device."""
    return stream_load(
        target,
        path,
        probe,
        strict=strict,
        key_map=key_map,
        reader=_AlignedReader,
        caster=aligned_cast,
    )
