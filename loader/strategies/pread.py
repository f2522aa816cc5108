"""Random init, then `safe_open(..., backend="pread")` one tensor at a time into the model.

Streaming bounds the read to one tensor, but the random initialisation still costs a whole model.
"""

from __future__ import annotations

from loader.load import stream_load
from loader.phases import NULL_PROBE


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Randomly initialise `target`, then stream tensors into it with pread."""
    return stream_load(target, path, probe, strict=strict, key_map=key_map, random_init=True)
