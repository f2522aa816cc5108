"""Device memory where the backend reports it: `jax.Device.memory_stats()`, per device and summed.

GPU and TPU backends report `bytes_in_use` and `peak_bytes_in_use` (the allocator's peak, never
reset); the CPU backend reports nothing (None). The probe (`bench.child.probe`) reads this at the
end of each phase through a provider: `jax_device_memory_by_device` (the default: per device,
keyed by `str(device)`), or any callable returning `(bytes_in_use, peak_bytes_in_use)` summed
(tests pass fakes of either form). Reads jax only once it is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Reading = "tuple[int, int] | dict[str, tuple[int, int]] | None"
DeviceMemory = Callable[[], Any]  # () -> Reading


def jax_device_memory_by_device() -> dict[str, tuple[int, int]] | None:
    """{str(device): (bytes_in_use, peak_bytes_in_use)} for this process's devices; None where
    jax is not imported yet or the backend reports nothing (the CPU backend)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        stats = {str(d): d.memory_stats() for d in jax.local_devices()}
    except Exception:  # noqa: BLE001 - a backend without the call reports nothing
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


def summed(reading: Any) -> tuple[int, int] | None:
    """A reading of either form as one (bytes_in_use, peak_bytes_in_use) pair."""
    if reading is None or isinstance(reading, tuple):
        return reading
    return sum(u for u, _ in reading.values()), sum(p for _, p in reading.values())


def record(stats: Any, reading: Any) -> None:
    """Put a reading into a probe's `PhaseStats` at a phase end (peaks keep their maximum)."""
    total = summed(reading)
    if total is None:
        return
    stats.device_bytes_in_use = total[0]
    stats.device_peak_bytes_in_use = max(stats.device_peak_bytes_in_use or 0, total[1])
    for device, (in_use, peak) in (reading if isinstance(reading, dict) else {}).items():
        stats.device_bytes_in_use_by_device[device] = in_use
        old = stats.device_peak_bytes_by_device.get(device, 0)
        stats.device_peak_bytes_by_device[device] = max(old, peak)
