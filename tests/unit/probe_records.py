"""A hand-made probe record for tests: round figures, so the arithmetic on it can be checked; and
runs whose times follow `recommend --probe`'s time model exactly on it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.machine.record import PROBE_VERSION, ProbeRecord, from_dict
from bench.records.schema import PhaseRecord
from loader.vocabulary import BUILD
from tests.records import total_row

GB = 1e9
# the time model's terms (bench/analysis/time_model.py) the runs of `timed_rows` are made of
K_BYTE, K_TENSOR, P, OVERLAP = 1e-9, 1e-3, 1.5, 0.5


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


def timed_rows(
    ckpt: int, tensors: int, cache: str, here: ProbeRecord, **fields: Any
) -> list[PhaseRecord]:
    """One run's total and build rows on the host `here` probed: CPU time K_BYTE per byte,
    K_TENSOR per tensor (its build phase) and the first touch at here's rate, over P CPUs; cold,
    here's disk too, OVERLAP of the shorter part hidden. Held against here's ceiling."""
    cpu = K_BYTE * ckpt + K_TENSOR * tensors + ckpt / here.first_touch_bytes_per_s
    wall = cpu / P
    if cache == "cold":
        disk = ckpt / (here.cold_read_bytes_per_s or GB)
        wall = wall + disk - OVERLAP * min(wall, disk)
    ceiling = ckpt / (here.bandwidth(cache) or 1.0)
    total = total_row(
        checkpoint_bytes=ckpt,
        largest_tensor_bytes=ckpt // 10,
        tensors=tensors,
        wall_s=wall,
        cpu_s=cpu,
        cache=cache,
        ceiling_s=ceiling,
        ceiling_ratio=wall / ceiling,
        ceiling_probe_id=here.probe_id,
        **fields,
    )
    return [total, replace(total, phase=BUILD, phase_order=1, phase_cpu_s=K_TENSOR * tensors)]


def slow_target(**overrides: Any) -> ProbeRecord:
    """The target of the prediction tests: one CPU's quota of two, half `hand_probe`'s per-thread
    copy speed (1 against 2 GB/s) and interpreter speed, and a 250 MB/s disk."""
    slow: dict[str, Any] = {
        "cpu_quota_cpus": 1.0,
        "effective_cpus": 1,
        "warm_copy": {"1": 1 * GB, "2": 1 * GB},
        "warm_copy_bytes_per_s": 1 * GB,
        "warm_copy_threads": 1,
        "single_core_ops_per_s": 1e7,
        "cold_read_bytes_per_s": 0.25 * GB,
    }
    return hand_probe(**{**slow, **overrides})
