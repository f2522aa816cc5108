"""pread streaming into an abstract model (`nnx.eval_shape`): no random init; casts on the device.

Each tensor is read in its file dtype, transferred, then cast by the device (compare `hostcast`).
"""

from __future__ import annotations

from loader.load import stream_load
from loader.phases import NULL_PROBE


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Build `target` abstractly and stream tensors into it, casting after the transfer."""
    return stream_load(target, path, probe, strict=strict, key_map=key_map, cast_on_device=True)
