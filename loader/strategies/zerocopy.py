"""pread each tensor into a 64-byte-aligned host buffer that the CPU backend adopts without a copy.

The buffers are page-aligned private anonymous mappings (`loader.format.buffers`).

On the CPU backend, `jax.device_put` of a 64-byte-aligned, C-contiguous numpy array aliases its
memory instead of copying it, so each tensor exists once: the buffer read from the file *is* the
device array. On an accelerator there is no such aliasing: the buffer is a staging copy that is
freed once the host-to-device transfer completes, so the host peak stays one tensor, as in
`builder`.
"""

from __future__ import annotations

import numpy as np

from loader.format.buffers import host_buffer
from loader.remote import FileSource
from loader.sequence import Recipe
from loader.stream import Reader, Stream


def aligned_reader(source: FileSource) -> Reader:
    """Read each tensor with `os.preadv` into a fresh page-aligned buffer."""

    def read(key: str) -> np.ndarray:
        info = source.info(key)
        return source.read_into(key, host_buffer(info.shape, info.np_dtype))

    return read


def aligned_cast(host: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast into a fresh aligned buffer, so a cast tensor is adopted without a copy too."""
    out = host_buffer(host.shape, dtype)
    np.copyto(out, host, casting="unsafe")
    return out


RECIPE = Recipe(lambda: Stream(reader=aligned_reader, caster=aligned_cast))


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
