"""A hand-made probe record for tests: round figures, so the arithmetic on it can be checked."""

from __future__ import annotations

from typing import Any

from bench.host.record import PROBE_VERSION, ProbeRecord, from_dict

GB = 1e9


def hand_probe(**overrides: Any) -> ProbeRecord:
    """A probe of a 2-CPU host: warm copy 4 GB/s on 2 threads, its disk 1 GB/s on 4."""
    data: dict[str, Any] = {
        "probe_version": PROBE_VERSION,
        "probe_id": "20260101T000000Z-abcdef",
        "machine": "target",
        "started_utc": "2026-01-01T00:00:00Z",
        "duration_s": 30.0,
        "host": {"cpu_count": 2, "ram_bytes": 16 << 30},
        "warm_copy_bytes_per_s": 4 * GB,
        "warm_copy_threads": 2,
        "cold_read_bytes_per_s": 1 * GB,
        "cold_read_threads": 4,
        "warm_copy": {"1": 2.5 * GB, "2": 4 * GB, "3": 3.9 * GB, "4": 3.8 * GB},
        "cold_read": {"1": 0.5 * GB, "2": 0.8 * GB, "4": 1 * GB},
        "cold_read_method": "O_DIRECT",
        "disk_path": "/data",
        "disk_device": "8:0",
        "probe_file_bytes": 2 << 30,
        "first_touch_bytes_per_s": 5 * GB,
        "memcpy_bytes_per_s": 10 * GB,
        "single_core_ops_per_s": 2e7,
        "cpu_count": 2,
        "affinity_cpus": 2,
        "effective_cpus": 2,
        "cpu_quota_cpus": None,
        "ram_bytes": 16 << 30,
        "memory_max_bytes": None,
        "io_read_bytes_per_s": {},
        "accelerator": "none",
        "device_kind": "none",
        "device_count": 0,
        "device_memory_bytes": None,
        "h2d_pageable_bytes_per_s": None,
        "h2d_pinned_bytes_per_s": None,
    }
    return from_dict({**data, **overrides}, "hand_probe")
