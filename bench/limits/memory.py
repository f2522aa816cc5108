"""A real memory limit for one child group: a memory cgroup the size of the target host's RAM.

`MemoryLimit(limit_bytes)` picks the first mechanism that works here:

1. **cgroup v2**, where this process's own cgroup delegates the `memory` controller to children
   (`+memory` in its `cgroup.subtree_control`): a child cgroup with `memory.max` (and
   `memory.swap.max = 0`).
2. **cgroup v1**, a child of this process's own `memory` cgroup: `memory.limit_in_bytes` (and
   `memory.memsw.limit_in_bytes` where swap accounting exists).
3. **`systemd-run --scope -p MemoryMax=N`**, where systemd runs the machine: the child's command
   line is wrapped, and the scope's cgroup is found from `/proc/PID/cgroup` and read back.
4. Otherwise **the bench's RSS watchdog** alone, and `mechanism == "watchdog"` says so in the row.

Only the PIDs handed to `attach` (children the bench started) are put in a cgroup made here
(`bench.limits.cgroups`); nothing else is ever moved. `close()` removes the cgroup (after the group
was killed: on success, failure and Ctrl-C alike, through the `with` block). A cgroup left by a
killed bench (named `loadbench-<pid>-<hex>`, its creator gone) is removed the next time one is made
beside it. "Enforced" means the limit file read back holds the requested size (to the page);
`oom_kills` counts the cgroup's OOM kills (`memory.events` in v2, `memory.oom_control` in v1). Never
imports jax.
"""

from __future__ import annotations

import contextlib
import mmap
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.limits import cgroups
from bench.limits.cgroups import V1, V2

SYSTEMD, WATCHDOG = "systemd-run", "watchdog"


@dataclass(frozen=True)
class LimitOutcome:
    """What a row records of the memory limit a child ran under (`host_ram_bytes` = `limit_bytes`,
    `memory_limit` = `mechanism`, `memory_limit_enforced`, `cgroup_peak_bytes`)."""

    mechanism: str
    enforced: bool
    limit_bytes: int
    oom_kills: int | None = None
    cgroup_peak_bytes: int | None = None
    note: str = ""

    def row_fields(self) -> dict[str, Any]:
        """The row's fields that say this limit."""
        return {
            "host_ram_bytes": self.limit_bytes,
            "memory_limit": self.mechanism,
            "memory_limit_enforced": self.enforced,
            "cgroup_peak_bytes": self.cgroup_peak_bytes,
        }


def _v2_parent() -> Path | None:
    return cgroups.v2_parent("memory")


def _v1_parent() -> Path | None:
    return cgroups.v1_parent("memory", "memory.limit_in_bytes")


def _page(n: int) -> int:
    return n // mmap.PAGESIZE * mmap.PAGESIZE


class MemoryLimit(cgroups.ChildCgroup):
    """A memory cgroup of `limit_bytes` for one child group (see the module docstring).

    Example:
        >>> with MemoryLimit(4 << 30) as limit:
        ...     proc = subprocess.Popen(limit.wrap(argv))
        ...     limit.attach(proc.pid)
        ...     proc.wait()
        >>> limit.outcome().oom_kills
    """

    def __init__(self, limit_bytes: int, *, mechanisms: tuple[str, ...] = (V2, V1, SYSTEMD)):
        self.limit_bytes = int(limit_bytes)
        self.mechanisms = mechanisms
        self.fallback = self.mechanism = WATCHDOG
        self.path: Path | None = None
        self.note = ""
        self._pids: list[int] = []

    # -- making it (`open`, `close` and the `with` block: `bench.limits.cgroups.ChildCgroup`) ---
    def _fallback_note(self, tried: str) -> str:
        tried = tried or "no memory cgroup hierarchy or systemd here"
        return f"no cgroup could be made ({tried}); the RSS watchdog enforces the limit"

    def _try(self, mech: str) -> bool:
        if mech == SYSTEMD:
            return bool(shutil.which("systemd-run")) and Path("/run/systemd/system").is_dir()
        parent = _v2_parent() if mech == V2 else _v1_parent()
        if parent is None:
            return False
        self.path = cgroups.make_child(parent)
        if mech == V2:
            (self.path / "memory.max").write_text(str(self.limit_bytes))
            with contextlib.suppress(OSError):
                (self.path / "memory.swap.max").write_text("0")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(self.limit_bytes))
            with contextlib.suppress(OSError):
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(self.limit_bytes))
        return True

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line to start (prefixed with systemd-run for that mechanism)."""
        if self.mechanism != SYSTEMD:
            return list(argv)
        return [
            "systemd-run",
            "--scope",
            "--quiet",
            "--collect",
            "-p",
            f"MemoryMax={self.limit_bytes}",
            "-p",
            "MemorySwapMax=0",
            "--",
            *argv,
        ]

    def attach(self, pid: int) -> None:
        """Put one child the bench started (and only it) into the cgroup."""
        self._pids.append(pid)
        if self.mechanism in (V1, V2) and self.path is not None:
            (self.path / "cgroup.procs").write_text(str(pid))
        elif self.mechanism == SYSTEMD and self.path is None:
            self.path = self._scope_of(pid)

    def _scope_of(self, pid: int, wait_s: float = 2.0) -> Path | None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                rel = (
                    Path(f"/proc/{pid}/cgroup")
                    .read_text()
                    .strip()
                    .splitlines()[-1]
                    .split(":", 2)[2]
                )
                if rel.endswith(".scope"):
                    return Path("/sys/fs/cgroup" + rel)
            time.sleep(0.01)
        return None

    # -- reading it back --------------------------------------------------------------------
    def _limit_file(self) -> Path | None:
        if self.path is None:
            return None
        return self.path / ("memory.limit_in_bytes" if self.mechanism == V1 else "memory.max")

    def oom_kills(self) -> int | None:
        """How many processes the cgroup's limit killed (None where it cannot be read)."""
        if self.path is None or self.mechanism == WATCHDOG:
            return None
        name = "memory.oom_control" if self.mechanism == V1 else "memory.events"
        with contextlib.suppress(OSError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return None

    def outcome(self) -> LimitOutcome:
        """The limit as read back now (call before `close`)."""
        file = self._limit_file()
        got = cgroups.read_int(file) if file is not None else None
        enforced = got is not None and _page(got) == _page(self.limit_bytes)
        peak_name = "memory.max_usage_in_bytes" if self.mechanism == V1 else "memory.peak"
        peak = cgroups.read_int(self.path / peak_name) if self.path is not None else None
        note = self.note
        if self.mechanism != WATCHDOG and not enforced:
            note = f"the limit read back as {got!r}, not {self.limit_bytes}; not enforced"
        return LimitOutcome(
            self.mechanism, enforced, self.limit_bytes, self.oom_kills(), peak, note
        )

    # -- removing it ------------------------------------------------------------------------
    def _remove(self) -> None:
        if self.path is None or self.mechanism == SYSTEMD:
            return  # systemd collects its own scope (--collect)
        cgroups.remove(self.path)
        self.path = None
