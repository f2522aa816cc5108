"""Device memory where the backend reports it: `jax.Device.memory_stats()` summed over devices.

GPU and TPU backends report `bytes_in_use` and `peak_bytes_in_use` (the allocator's peak, never
reset); the CPU backend reports nothing (None). The probe (`bench.child.probe`) reads this at the
end of each phase; tests pass a fake provider instead. Reads jax only once it is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

DeviceMemory = Callable[[], "tuple[int, int] | None"]


def jax_device_memory() -> tuple[int, int] | None:
    """(bytes_in_use, peak_bytes_in_use) summed over this process's devices; None where jax is not
    imported yet or the backend reports nothing (the CPU backend)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        stats = [d.memory_stats() for d in jax.local_devices()]
    except Exception:  # noqa: BLE001 - a backend without the call reports nothing
        return None
    stats = [s for s in stats if s]
    if not stats:
        return None
    in_use = sum(int(s.get("bytes_in_use", 0)) for s in stats)
    return in_use, sum(int(s.get("peak_bytes_in_use", s.get("bytes_in_use", 0))) for s in stats)
