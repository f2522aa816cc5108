"""Child cgroups the bench makes for the processes it starts: find where, make, fill, remove.

Shared by `bench.limits.memory` (a memory limit) and `bench.limits.disk_read` (a read-speed limit).
A cgroup made here is named `loadbench-<creator pid>-<hex>` under this process's own cgroup of the
controller's hierarchy (v2: where that cgroup delegates the controller in `cgroup.subtree_control`;
v1: the controller's own mount). Only PIDs the caller started are written to it; one left by a
killed bench (its creator gone) is swept away the next time one is made beside it. Never imports
jax.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Self

import psutil

PREFIX = "loadbench-"
V2, V1 = "cgroup-v2", "cgroup-v1"  # the mechanisms, as rows record them


def mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fstype, _, opts = (right.split() + ["", "", ""])[:3]
            if fstype in ("cgroup", "cgroup2"):
                out.append((left.split()[4], fstype, set(opts.split(","))))
    return out


def own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    return out


def v2_parent(controller: str) -> Path | None:
    """This process's v2 cgroup, where it delegates `controller` to children; else None."""
    path = own_paths().get("")
    for mount, fstype, _ in mounts():
        if fstype == "cgroup2" and path is not None:
            here = Path(mount + path.rstrip("/"))
            with contextlib.suppress(OSError):
                if controller in (here / "cgroup.subtree_control").read_text().split():
                    return here
    return None


def v1_parent(controller: str, knob: str) -> Path | None:
    """This process's cgroup in the v1 hierarchy of `controller`, if it has the file `knob`."""
    path = own_paths().get(controller)
    for mount, fstype, opts in mounts():
        if fstype == "cgroup" and controller in opts and path is not None:
            here = Path(mount + path.rstrip("/"))
            if (here / knob).is_file():
                return here
    return None


def sweep(parent: Path) -> None:
    """Remove empty cgroups a killed bench left here (their creator's PID is gone)."""
    for stale in parent.glob(f"{PREFIX}*-*"):
        pid = stale.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                stale.rmdir()


def make_child(parent: Path) -> Path:
    """A new, empty cgroup of ours under `parent` (stale ones of killed benches swept first)."""
    sweep(parent)
    path = parent / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


def read_int(path: Path) -> int | None:
    """An integer knob's value; None where it cannot be read, or reads "max"."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def remove(path: Path, wait_s: float = 5.0) -> None:
    """Remove a cgroup made here once its processes have ended (a killed child leaves its cgroup
    a moment after it is reaped, so this retries for up to `wait_s`)."""
    deadline = time.monotonic() + wait_s
    while path.exists():
        try:
            path.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class ChildCgroup:
    """What a limit made of a cgroup shares: try its mechanisms in order, fall back with a note,
    remove what it made on `close` (also as a `with` block, on failure and Ctrl-C alike).

    A subclass sets `mechanisms` and `fallback` (the mechanism when none works), and defines
    `_try(mech) -> bool` (make it; False: not available here), `_remove()` and
    `_fallback_note(tried)`.
    """

    mechanisms: tuple[str, ...]
    fallback: str
    path: Path | None
    note: str

    def open(self) -> Self:
        """Make the cgroup with the first mechanism that works here; else keep `fallback`."""
        errors = []
        for mech in self.mechanisms:
            try:
                if self._try(mech):
                    self.mechanism = mech
                    return self
            except OSError as exc:
                errors.append(f"{mech}: {exc.strerror or exc}")
                self._remove()
        self.mechanism = self.fallback
        self.note = self._fallback_note("; ".join(errors))
        return self

    def _try(self, mech: str) -> bool:
        raise NotImplementedError

    def _remove(self) -> None:
        raise NotImplementedError

    def _fallback_note(self, tried: str) -> str:
        raise NotImplementedError

    def close(self) -> None:
        """Remove the cgroup made here (its processes must have ended: the bench killed them)."""
        self._remove()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
