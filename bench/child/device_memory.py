"""Device memory where the backend reports it: `jax.Device.memory_stats()`, per device and summed.

GPU and TPU backends report `bytes_in_use` and `peak_bytes_in_use` (the allocator's peak, never
reset); the CPU backend reports nothing (None). The phase probe (`bench.child.phase_probe`) reads
this at the end of each phase through a provider: `jax_device_memory_by_device` (the default: per
device, keyed by `str(device)`), or any callable returning `(bytes_in_use, peak_bytes_in_use)`
summed (tests pass fakes of either form). `jax_device_limits` reads each device's memory limit
(`bytes_limit`), the figure a row's device headroom is taken from. Reads jax only once it is
imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

#: One reading: (bytes_in_use, peak_bytes_in_use) summed, per device keyed by `str(device)`, or
#: None where the backend reports nothing.
Reading = tuple[int, int] | dict[str, tuple[int, int]] | None
DeviceMemory = Callable[[], Reading]


def _device_stats() -> dict[str, dict] | None:
    """{str(device): its memory_stats()} for this process's devices; None where jax is not
    imported yet or the backend has no such call."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        return {str(d): d.memory_stats() for d in jax.local_devices()}
    except Exception:  # noqa: BLE001 - a backend without the call reports nothing
        return None


def jax_device_memory_by_device() -> dict[str, tuple[int, int]] | None:
    """{str(device): (bytes_in_use, peak_bytes_in_use)} for this process's devices; None where
    jax is not imported yet or the backend reports nothing (the CPU backend)."""
    stats = _device_stats()
    if stats is None:
        return None
    out = {
        d: (
            int(s.get("bytes_in_use", 0)),
            int(s.get("peak_bytes_in_use", s.get("bytes_in_use", 0))),
        )
        for d, s in stats.items()
        if s
    }
    return out or None


def jax_device_memory() -> tuple[int, int] | None:
    """(bytes_in_use, peak_bytes_in_use) summed over this process's devices; None on CPU."""
    return summed(jax_device_memory_by_device())


def summed(reading: Reading) -> tuple[int, int] | None:
    """A reading of either form as one (bytes_in_use, peak_bytes_in_use) pair."""
    if reading is None or isinstance(reading, tuple):
        return reading
    return sum(u for u, _ in reading.values()), sum(p for _, p in reading.values())


def jax_device_limits() -> dict[str, int] | None:
    """{str(device): bytes_limit} for this process's devices; None where jax is not imported,
    the backend reports nothing (the CPU backend) or no device reports a limit."""
    stats = _device_stats()
    if stats is None:
        return None
    out = {d: int(s["bytes_limit"]) for d, s in stats.items() if s and "bytes_limit" in s}
    return out or None
