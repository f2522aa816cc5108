"""A read-speed limit for one child group: the checkpoint's disk as slow as the target host's.

`bench run --disk-read-speed 300MB/s` runs each child inside a cgroup whose block-I/O throttle
caps reads from the disk that holds the checkpoint at that speed, so a cold load is measured as
the target's disk would serve it, and at the same speed every time (a VM's virtual disk can serve
one file several times faster or slower from one read to the next; a throttle below its slowest
makes it steady). `ReadThrottle(bytes_per_s, files)` uses:

1. **cgroup v2**, where this process's cgroup delegates `io`: `io.max` = `MAJ:MIN rbps=N`
   (written into the memory limit's cgroup when `--host-ram` made one in v2: a process is in one
   v2 cgroup only; and never tried when that limit is a systemd scope, which moving the child
   out of would undo);
2. **cgroup v1**, the `blkio` hierarchy: `blkio.throttle.read_bps_device` = `MAJ:MIN N`.

The device is each file's `st_dev`, taken up to its whole disk (the throttle acts on disks, not
partitions). Files on no block device (tmpfs, overlay, network mounts) cannot be throttled; then,
as where no cgroup can be made, the children run at full speed and `note` says why, in the row.
"Enforced" means the knob read back holds the asked rate for every device. Pages already in the
page cache are not read from the disk at all: use it with `--cache cold`. Only PIDs handed to
`attach` (children the bench started) are moved; `close()` removes the cgroup. Never imports jax.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.limits import cgroups
from bench.limits.cgroups import V1, V2

NONE = "none"
V1_KNOB = "blkio.throttle.read_bps_device"


@dataclass(frozen=True)
class ThrottleOutcome:
    """What a row records of the read-speed limit its child ran under (`disk_read_bytes_per_s` =
    `bytes_per_s`, `disk_read_limit` = `mechanism`, `disk_read_limit_enforced`)."""

    mechanism: str
    enforced: bool
    bytes_per_s: int
    devices: tuple[str, ...]
    note: str = ""

    def row_fields(self) -> dict[str, Any]:
        """The row's fields that say this limit."""
        return {
            "disk_read_bytes_per_s": self.bytes_per_s,
            "disk_read_limit": self.mechanism,
            "disk_read_limit_enforced": self.enforced,
        }


def whole_disk(dev: int) -> str | None:
    """`MAJ:MIN` of the disk holding device `dev` (a partition's parent disk); None if `dev` is
    no block device (tmpfs, overlay and other filesystems without one)."""
    node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.major(dev) == 0 or not node.exists():
        return None
    if (node / "partition").exists():
        return (node.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


def disks_of(files: Iterable[str | os.PathLike]) -> tuple[list[str], list[str]]:
    """(the disks holding `files`, the files that sit on no block device)."""
    disks, loose = [], []
    for f in files:
        disk = whole_disk(os.stat(f).st_dev)
        if disk is None:
            loose.append(str(f))
        elif disk not in disks:
            disks.append(disk)
    return disks, loose


class ReadThrottle(cgroups.ChildCgroup):
    """A block-I/O read limit of `bytes_per_s` on the disks holding `files` (module docstring).

    Example:
        >>> with ReadThrottle(300_000_000, ["model.safetensors"]) as throttle:
        ...     proc = subprocess.Popen(argv)
        ...     throttle.attach(proc.pid)
        ...     proc.wait()
        >>> throttle.outcome().enforced
    """

    def __init__(
        self,
        bytes_per_s: int,
        files: Iterable[str | os.PathLike],
        *,
        v2_cgroup: Path | None = None,
        mechanisms: tuple[str, ...] = (V2, V1),
    ):
        self.bytes_per_s = int(bytes_per_s)
        self.disks, self._loose = disks_of(files)
        self.mechanisms = mechanisms
        self.fallback = self.mechanism = NONE
        self.path: Path | None = None
        self._shared = v2_cgroup  # the memory limit's v2 cgroup: written into, never removed
        self.note = ""

    def open(self) -> ReadThrottle:
        if self._loose:
            self.note = (
                f"{self._loose[0]} is on no block device, so no read limit applies; "
                "the children ran at full speed"
            )
            return self
        return super().open()

    def _fallback_note(self, tried: str) -> str:
        tried = tried or "no such cgroup hierarchy here"
        how = " or ".join(self.mechanisms) or "no mechanism"
        return f"no read limit could be set with {how} ({tried}); the children ran at full speed"

    def _try(self, mech: str) -> bool:
        if mech == V2:
            parent = cgroups.v2_parent("io")
            if parent is None:
                return False
            self.path = self._shared or cgroups.make_child(parent)
            rules = [f"{d} rbps={self.bytes_per_s}" for d in self.disks]
            knob = "io.max"
        else:
            parent = cgroups.v1_parent("blkio", V1_KNOB)
            if parent is None:
                return False
            self.path = cgroups.make_child(parent)
            rules, knob = [f"{d} {self.bytes_per_s}" for d in self.disks], V1_KNOB
        for rule in rules:
            (self.path / knob).write_text(rule)
        return True

    def attach(self, pid: int) -> None:
        """Put one child the bench started (and only it) into the cgroup."""
        if self.path is not None and self.path != self._shared:
            (self.path / "cgroup.procs").write_text(str(pid))

    def outcome(self) -> ThrottleOutcome:
        """The limit as read back now (call before `close`)."""
        got = self._read_back()
        enforced = self.mechanism != NONE and all(
            got.get(d) == self.bytes_per_s for d in self.disks
        )
        note = self.note
        if self.mechanism != NONE and not enforced:
            note = f"the read limit read back as {got!r}, not {self.bytes_per_s} on {self.disks}"
        return ThrottleOutcome(self.mechanism, enforced, self.bytes_per_s, tuple(self.disks), note)

    def _read_back(self) -> dict[str, int]:
        """device -> read bytes/s, as the cgroup's knob lists them."""
        if self.path is None:
            return {}
        knob = "io.max" if self.mechanism == V2 else V1_KNOB
        try:
            lines = (self.path / knob).read_text().split("\n")
        except OSError:
            return {}
        out = {}
        for line in filter(None, lines):
            dev, *values = (
                line.split()
            )  # v1: "8:0 300000000"; v2: "8:0 rbps=300000000 wbps=max ..."
            if self.mechanism == V2:
                values = [v.removeprefix("rbps=") for v in values if v.startswith("rbps=")]
            if values and values[0] != "max":
                out[dev] = int(values[0])
        return out

    def _remove(self) -> None:
        if self.path is not None and self.path != self._shared:
            cgroups.remove(self.path)
        self.path = None
