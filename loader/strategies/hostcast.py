"""`builder`, with the cast to the model's declared dtype done on the host before the transfer.

A bf16 model loading an fp32 file then transfers half the bytes, and no fp32 copy reaches a device.
This is what `loader.load_model` does by default.
"""

from __future__ import annotations

from loader.load import stream_load
from loader.phases import NULL_PROBE


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Build `target` abstractly and stream tensors into it, casting on the host."""
    return stream_load(target, path, probe, strict=strict, key_map=key_map, cast_on_device=False)
