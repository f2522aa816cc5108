"""The probe's accelerator fields: what jax sees, and host -> device bandwidth where it sees one.

Runs in the probe child only (it imports jax). Where jax's backend is the CPU (or
`JAX_PLATFORMS=cpu`, which is then known without importing jax) every field says "none" / null.
Otherwise: the device count and memory (`memory_stats()["bytes_limit"]`), and the bandwidth of
`jax.device_put` onto device 0 from ordinary (pageable) numpy memory and from jax's `pinned_host`
memory kind (where the backend has it).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

NONE = "none"


@dataclass(frozen=True)
class AcceleratorFacts:
    """What the probe records of the accelerator (NONE / None on a CPU-only host)."""

    accelerator: str = NONE  # the jax platform ("gpu", "tpu") or "none"
    device_kind: str = NONE
    device_count: int = 0
    device_memory_bytes: int | None = None
    h2d_pageable_bytes_per_s: float | None = None
    h2d_pinned_bytes_per_s: float | None = None
    note: str = ""


def _put_rate(put, nbytes: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        put().block_until_ready()
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times)


def _pinned_rate(jax, device, host: np.ndarray, repeats: int) -> tuple[float | None, str]:
    try:
        pinned = jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host")
        on_device = jax.sharding.SingleDeviceSharding(device, memory_kind="device")
        staged = jax.device_put(host, pinned).block_until_ready()
    except Exception as exc:  # a backend without pinned_host raises its own error types
        return None, f"no pinned_host memory here ({type(exc).__name__}: {exc})"
    return _put_rate(lambda: jax.device_put(staged, on_device), host.nbytes, repeats), ""


def probe(nbytes: int = 256 << 20, repeats: int = 3) -> AcceleratorFacts:
    """The accelerator jax sees (device 0's transfers measured with `nbytes`), or NONE."""
    if os.environ.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return AcceleratorFacts(note="JAX_PLATFORMS=cpu")
    try:
        import jax
    except ImportError:
        return AcceleratorFacts(note="jax is not installed")
    devices = jax.devices()
    if devices[0].platform == "cpu":
        return AcceleratorFacts(note="jax sees only the CPU")
    device = devices[0]
    stats = device.memory_stats() or {}
    host = np.ones(nbytes, np.uint8)
    pageable = _put_rate(lambda: jax.device_put(host, device), nbytes, repeats)
    pinned, note = _pinned_rate(jax, device, host, repeats)
    return AcceleratorFacts(
        accelerator=device.platform,
        device_kind=device.device_kind,
        device_count=len(devices),
        device_memory_bytes=stats.get("bytes_limit"),
        h2d_pageable_bytes_per_s=pageable,
        h2d_pinned_bytes_per_s=pinned,
        note=note,
    )
