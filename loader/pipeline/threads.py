"""How many reader threads a load gets: from the CPUs this process may use and the page cache.

A warm read (the file's pages already cached) is a memory copy: it is CPU-bound, so one reader per
usable CPU, never more (on a 1-CPU host a second reader only takes turns with the first and with
the model build). A cold read waits on the disk: more requests in flight keep the device busy, so
twice the CPUs, at least 2 and at most `MAX_COLD_THREADS`. "Usable CPUs" is the smallest of the
CPU affinity mask and the CPU quota of this process's cgroups (`cpu.max`, or v1's CFS quota:
what `docker --cpus` or `loadbench bench run --cpus` sets), since `os.cpu_count()` sees neither.
`threads=` on `load_model` / `Pipeline` overrides all of it (e.g. the queue depth that
`loadbench probe` found best for the disk: its `cold_read_threads`).

Measured on the 2-core VM while other work shared it (sa3, 2.27 GB, fresh process per load,
file evicted first; single runs, so indicative only): 2 readers 3.4-5.3 s, 4 readers 1.9-2.6 s.
Warm, 2 readers is what the fixed rule gave here already.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import mmap
import os
from pathlib import Path

MAX_WARM_THREADS = 8  # memory bandwidth, not cores, bounds a copy beyond this
MAX_COLD_THREADS = 16
COLD_BELOW = 0.5  # a file with less than this fraction of its pages cached reads as cold
SAMPLES = 32
WINDOW_BYTES = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def cgroup_cpus(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float | None:
    """The tightest CPU quota over this process's cgroups and their parents, in CPUs (v2
    `cpu.max` `"50000 100000"` -> 0.5; v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`); None: none."""
    found: list[float | None] = []
    for line in _text(self_cgroup).splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            found += [_quota(d / "cpu.max") for d in _upwards(root, path)]
        elif "cpu" in controllers.split(","):
            found += [_quota(d / "cpu.cfs_quota_us") for d in _upwards(root / controllers, path)]
    return min((f for f in found if f), default=None)


def _upwards(base: Path, path: str) -> list[Path]:
    """The cgroup folder of `path` under `base`, then each parent up to `base`."""
    here = base / path.strip("/")
    return [here, *[p for p in here.parents if p.is_relative_to(base)]]


def _quota(knob: Path) -> float | None:
    """CPUs from a v2 `cpu.max` ("max" or "QUOTA PERIOD") or a v1 `cpu.cfs_quota_us` (beside
    its `cpu.cfs_period_us`; -1: none)."""
    words = _text(knob).split()
    if knob.name == "cpu.cfs_quota_us":
        words += _text(knob.with_name("cpu.cfs_period_us")).split()
    try:
        quota, period = int(words[0]), int(words[1])
    except (IndexError, ValueError):  # absent, "max", or unreadable
        return None
    return quota / period if quota > 0 and period > 0 else None


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def usable_cpus(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float:
    """The CPUs this process may use: the affinity mask, capped by the cgroup quota."""
    try:
        cpus: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = cgroup_cpus(root, self_cgroup)
    return min(cpus, quota) if quota is not None else cpus


def reader_threads(cpus: float, *, cold: bool) -> int:
    """Readers for `cpus` usable CPUs: one per whole CPU warm; twice the CPUs (2-16) cold."""
    if cold:
        return max(2, min(MAX_COLD_THREADS, 2 * math.ceil(cpus)))
    return max(1, min(MAX_WARM_THREADS, math.floor(cpus)))


def file_threads(fds: list[int]) -> int:
    """Readers for these open files: the cold count where under `COLD_BELOW` of them is cached."""
    cached = cached_fraction(fds)
    return reader_threads(usable_cpus(), cold=cached is not None and cached < COLD_BELOW)


def cached_fraction(fds: list[int]) -> float | None:
    """The fraction of the open files' pages in the page cache, None if unknown.

    Sampled (`SAMPLES` windows of `WINDOW_BYTES` spread over each file, `mincore`): the whole of a
    16 GB file would take ~0.1 s, and only warm or cold is asked.
    """
    resident = total = 0
    for fd in fds:
        size = os.fstat(fd).st_size
        step = max(WINDOW_BYTES, size // SAMPLES) // mmap.PAGESIZE * mmap.PAGESIZE
        for offset in range(0, size, step):
            vec = _mincore(fd, offset, min(WINDOW_BYTES, size - offset))
            if vec is None:
                return None
            resident, total = resident + len(vec) - vec.count(0), total + len(vec)  # bit 0 only
    return resident / total if total else None


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        c_int, c_long = ctypes.c_int, ctypes.c_long
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, c_int, c_int, c_int, c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def _mincore(fd: int, offset: int, size: int) -> bytes | None:
    """mincore(2) over a read-only shared mapping of part of the file (which faults nothing in)."""
    if _LIBC is None:
        return None
    addr = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr in (None, ctypes.c_void_p(-1).value):
        return None
    try:
        vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
        return vec.raw if _LIBC.mincore(addr, size, vec) == 0 else None
    finally:
        _LIBC.munmap(addr, size)
