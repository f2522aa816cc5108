"""A CPU limit for one child group: the target host's core count, as a cgroup the children run in.

`bench run --cpus N` and `loadbench probe --cpus N` run each child inside a cgroup that lets it
use N CPUs. `CpuLimit(cpus)` picks the first mechanism that works here:

1. **cgroup v2**, where this process's cgroup delegates `cpu`: `cpu.max` = `N*100000 100000`;
2. **cgroup v1**, the `cpu` hierarchy: `cpu.cfs_quota_us` = N x `cpu.cfs_period_us`;
3. **a v1 cpuset** of the first N CPUs this process may run on (`cpuset.cpus`, with the parent's
   `cpuset.mems`).

A quota lets the children use N CPUs' worth of time per period, spread over every core; a cpuset
pins them to N cores. Where none can be made, the children run on every CPU and `note` says why,
in the row. "Enforced" means the knob read back holds the asked quota (or CPU list). Only PIDs
handed to `attach` (children the bench started) are moved; `close()` removes the cgroup. Never
imports jax.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.limits import cgroups
from bench.limits.cgroups import V1, V2
from loader.host import affinity_cpus

CPUSET, NONE = "cpuset", "none"
PERIOD_US = 100_000


@dataclass(frozen=True)
class CpuOutcome:
    """What a row records of the CPU limit its child ran under (`cpus`, `cpu_limit` =
    `mechanism`, `cpu_limit_enforced`)."""

    mechanism: str
    enforced: bool
    cpus: int
    note: str = ""

    def row_fields(self) -> dict[str, Any]:
        """The row's fields that say this limit."""
        return {"cpus": self.cpus, "cpu_limit": self.mechanism, "cpu_limit_enforced": self.enforced}


def check_cpus(cpus: int | None, flag: str = "--cpus") -> None:
    """Refuse a CPU count below 1 or above what this host can give a child."""
    if cpus is None:
        return
    have = len(affinity_cpus())
    if cpus < 1 or cpus > have:
        raise BenchError(f"{flag} {cpus}: this host runs children on 1 to {have} CPUs")


class CpuLimit(cgroups.ChildCgroup):
    """A cgroup limiting its processes to `cpus` CPUs (see the module docstring).

    Example:
        >>> with CpuLimit(1) as limit:
        ...     proc = subprocess.Popen(argv)
        ...     limit.attach(proc.pid)
        ...     proc.wait()
        >>> limit.outcome().enforced
    """

    def __init__(self, cpus: int, *, mechanisms: tuple[str, ...] = (V2, V1, CPUSET)):
        check_cpus(cpus)
        self.cpus = int(cpus)
        self.mechanisms = mechanisms
        self.fallback = self.mechanism = NONE
        self.path: Path | None = None
        self.note = ""

    def _fallback_note(self, tried: str) -> str:
        tried = tried or "no cpu or cpuset cgroup hierarchy here"
        return f"no CPU limit could be set ({tried}); the children ran on every CPU"

    def _cpu_list(self) -> str:
        return ",".join(str(c) for c in affinity_cpus()[: self.cpus])

    def _try(self, mech: str) -> bool:
        if mech == V2:
            parent = cgroups.v2_parent("cpu")
        elif mech == V1:
            parent = cgroups.v1_parent("cpu", "cpu.cfs_quota_us")
        else:
            parent = cgroups.v1_parent("cpuset", "cpuset.cpus")
        if parent is None:
            return False
        self.path = cgroups.make_child(parent)
        if mech == V2:
            (self.path / "cpu.max").write_text(f"{self.cpus * PERIOD_US} {PERIOD_US}")
        elif mech == V1:
            period = cgroups.read_int(self.path / "cpu.cfs_period_us") or PERIOD_US
            (self.path / "cpu.cfs_quota_us").write_text(str(self.cpus * period))
        else:
            (self.path / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip())
            (self.path / "cpuset.cpus").write_text(self._cpu_list())
        return True

    def attach(self, pid: int) -> None:
        """Put one child the bench started (and only it) into the cgroup."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(pid))

    def read_back(self) -> float | str | None:
        """The CPUs the knob grants now: a quota in CPUs, a cpuset's list, None if unreadable."""
        if self.path is None:
            return None
        try:
            if self.mechanism == V2:
                text, span = (self.path / "cpu.max").read_text().split()
                return None if text == "max" else int(text) / int(span)
            if self.mechanism == V1:
                quota = cgroups.read_int(self.path / "cpu.cfs_quota_us")
                period = cgroups.read_int(self.path / "cpu.cfs_period_us")
                return None if not quota or quota < 0 or not period else quota / period
            return (self.path / "cpuset.cpus").read_text().strip()
        except (OSError, ValueError):
            return None

    def outcome(self) -> CpuOutcome:
        """The limit as read back now (call before `close`)."""
        got = self.read_back()
        want: float | str = self._cpu_list() if self.mechanism == CPUSET else float(self.cpus)
        enforced = self.mechanism != NONE and _same(got, want)
        note = self.note
        if self.mechanism != NONE and not enforced:
            note = f"the CPU limit read back as {got!r}, not {want!r}; not enforced"
        return CpuOutcome(self.mechanism, enforced, self.cpus, note)

    def _remove(self) -> None:
        if self.path is not None:
            cgroups.remove(self.path)
        self.path = None


def _same(got: float | str | None, want: float | str) -> bool:
    if isinstance(want, str):
        return isinstance(got, str) and _expand(got) == _expand(want)
    return isinstance(got, float) and abs(got - want) < 1e-6


def _expand(cpus: str) -> set[int]:
    """`0-2,5` -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in filter(None, cpus.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
