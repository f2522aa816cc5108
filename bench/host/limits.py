"""The limits in force on this process, read from the kernel: CPUs, memory, disk reads.

Each is read from the cgroup this process is in (v2: `cpu.max`, `memory.max`, `io.max`; v1:
`cpu.cfs_quota_us` / `cpu.cfs_period_us`, `cpuset.cpus`, `memory.limit_in_bytes`,
`blkio.throttle.read_bps_device`), walking up to the hierarchy's root so a limit set on a parent
counts too (the tightest wins). A value that cannot be read is None. Never imports jax.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from bench.limits import cgroups

UNLIMITED_V1 = 1 << 60  # v1 reports "no memory limit" as a huge page-rounded number


@dataclass(frozen=True)
class KernelLimits:
    """What the kernel allows this process (None: no such limit, or it cannot be read)."""

    affinity_cpus: int  # the CPUs this process may run on
    cpu_quota_cpus: float | None  # a CFS quota / cpu.max in CPUs
    memory_max_bytes: int | None
    io_read_bytes_per_s: dict[str, int]  # MAJ:MIN -> read bytes/s cap

    @property
    def effective_cpus(self) -> int:
        """The CPUs' worth of time this process can use: affinity, cut by a quota."""
        if self.cpu_quota_cpus is None:
            return self.affinity_cpus
        return max(1, min(self.affinity_cpus, math.ceil(self.cpu_quota_cpus - 1e-9)))


def _dirs(controller: str) -> list[Path]:
    """This process's cgroup folder in `controller`'s hierarchy ("" for v2), then its parents."""
    path = cgroups.own_paths().get(controller)
    for mount, fstype, opts in cgroups.mounts():
        v2 = controller == "" and fstype == "cgroup2"
        if path is not None and (v2 or (fstype == "cgroup" and controller in opts)):
            here = Path(mount + path.rstrip("/"))
            if here.is_dir():
                return [here, *[p for p in here.parents if p.is_relative_to(mount)]]
    return []


def _text(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text().strip()
    return None


def cpu_quota() -> float | None:
    """The tightest CPU quota over this process's cgroups, in CPUs."""
    found = []
    for d in _dirs(""):
        text = _text(d / "cpu.max")
        if text and not text.startswith("max"):
            limit, span = text.split()
            found.append(int(limit) / int(span))
    for d in _dirs("cpu"):
        quota, period = (cgroups.read_int(d / f"cpu.cfs_{k}_us") for k in ("quota", "period"))
        if quota and quota > 0 and period:
            found.append(quota / period)
    return min(found, default=None)


def memory_max() -> int | None:
    """The tightest memory limit over this process's cgroups, in bytes."""
    found = [cgroups.read_int(d / "memory.max") for d in _dirs("")]
    found += [cgroups.read_int(d / "memory.limit_in_bytes") for d in _dirs("memory")]
    return min((v for v in found if v is not None and v < UNLIMITED_V1), default=None)


def io_read_caps() -> dict[str, int]:
    """MAJ:MIN -> the tightest read bytes/s cap over this process's cgroups."""
    caps: dict[str, int] = {}

    def keep(dev: str, value: str) -> None:
        if value.isdigit():
            caps[dev] = min(int(value), caps.get(dev, int(value)))

    for d in _dirs(""):
        for line in (_text(d / "io.max") or "").splitlines():
            dev, *kv = line.split()
            for item in kv:
                if item.startswith("rbps="):
                    keep(dev, item.removeprefix("rbps="))
    for d in _dirs("blkio"):
        for line in (_text(d / "blkio.throttle.read_bps_device") or "").splitlines():
            dev, _, value = line.partition(" ")
            keep(dev, value.strip())
    return caps


def read() -> KernelLimits:
    """The limits in force on this process now."""
    return KernelLimits(len(os.sched_getaffinity(0)), cpu_quota(), memory_max(), io_read_caps())
