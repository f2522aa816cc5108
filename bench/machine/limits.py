"""The limits in force on this process, read from the kernel: CPUs, memory, disk reads.

The CPUs and memory are the loader's reading of the host (`loader.host`: affinity, `cpu.max` or
v1's CFS quota, `memory.max` or `memory.limit_in_bytes`), so the probe and the loader agree. The
disk read caps are read here, from the same cgroups (v2 `io.max`, v1
`blkio.throttle.read_bps_device`), walking up to the hierarchy's root so a limit set on a parent
counts too (the tightest wins). A value that cannot be read is None. Never imports jax.
"""

from __future__ import annotations

from dataclasses import dataclass

from loader import host


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
        return host.busy_cpus(host.allowed_cpus(self.affinity_cpus, self.cpu_quota_cpus))


def io_read_caps() -> dict[str, int]:
    """MAJ:MIN -> the tightest read bytes/s cap over this process's cgroups."""
    caps: dict[str, int] = {}

    def keep(dev: str, value: str) -> None:
        if value.isdigit():
            caps[dev] = min(int(value), caps.get(dev, int(value)))

    for folder, v2 in host.cgroup_folders("blkio"):
        if v2:
            for line in host.knob_text(folder / "io.max").splitlines():
                dev, *kv = line.split()
                for item in kv:
                    if item.startswith("rbps="):
                        keep(dev, item.removeprefix("rbps="))
        else:
            for line in host.knob_text(folder / "blkio.throttle.read_bps_device").splitlines():
                dev, _, value = line.partition(" ")
                keep(dev, value.strip())
    return caps


def read() -> KernelLimits:
    """The limits in force on this process now."""
    cpus = len(host.affinity_cpus())
    return KernelLimits(cpus, host.cpu_quota(), host.memory_limit(), io_read_caps())
