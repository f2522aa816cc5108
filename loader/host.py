"""What this host lets this process use: its CPUs, its memory, and which pages of a file are cached.

The loader sizes its reader threads and its page-cache policy from these, and the bench records
and limits runs with them; both read them here, so the two never disagree about one host.

- CPUs: `affinity_cpus` (the CPUs the scheduler may run this process on) and `cpu_quota` (the
  tightest CPU quota over this process's cgroups and their parents: v2 `cpu.max`, v1's CFS quota,
  what `docker --cpus` or `loadbench bench run --cpus` sets); `usable_cpus` is the smaller of the
  two (`allowed_cpus`, the one rule the loader and the bench both apply), since `os.cpu_count()`
  sees neither; `busy_cpus` rounds it up to the CPUs a process runs on at once.
- Memory: `available_bytes` (the host's `MemAvailable`, capped by what every memory cgroup over
  this process still allows) and `memory_limit` (the tightest memory cgroup limit itself).
- The page cache: `resident_pages` asks `mincore(2)` which pages of part of an open file are in
  memory, over a read-only shared mapping, which faults nothing in; `cached_fraction` samples it
  over whole files.

A cgroup is found from `/proc/self/cgroup` under `/sys/fs/cgroup` (v1: one folder per hierarchy,
named after its controllers; v2: the root, or `unified/` on a hybrid host), walking up to the
hierarchy's root so that a limit on a parent counts too; both paths can be given, so tests build
a fake hierarchy. A value that cannot be read is None, never an error. Linux only for cgroups and
`mincore`; never imports jax.

Example:
    >>> from loader import host
    >>> host.usable_cpus() > 0  # a float: a quota may leave a fraction of a CPU
    True
"""

from __future__ import annotations

import ctypes
import errno
import math
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loader.format.libc import libc_function

__all__ = [
    "affinity_cpus",
    "allowed_cpus",
    "available_bytes",
    "busy_cpus",
    "cached_fraction",
    "cgroup_folders",
    "cpu_quota",
    "knob_text",
    "memory_limit",
    "resident_pages",
    "usable_cpus",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
MEMINFO = Path("/proc/meminfo")
NO_LIMIT = 1 << 60  # a v1 `memory.limit_in_bytes` at least this large means "no limit"
SAMPLES = 32  # windows `cached_fraction` reads per file
WINDOW_BYTES = 1 << 20
_BIT0 = bytes(b & 1 for b in range(256))  # mincore: bit 0 of each page's byte says "resident"


# -- cgroups --------------------------------------------------------------------------------------
def knob_text(path: Path) -> str:
    """A kernel file's text; "" where it cannot be read (absent, or no permission)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def _v2_root(root: Path) -> Path:
    """Where the v2 hierarchy is mounted: `root` itself (unified mode), or `root/unified` beside
    the v1 hierarchies (hybrid mode, where `root` holds no `cgroup.controllers`)."""
    hybrid = root / "unified"
    if not (root / "cgroup.controllers").exists() and hybrid.is_dir():
        return hybrid
    return root


def cgroup_folders(
    controller: str, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> list[tuple[Path, bool]]:
    """(folder, v2) of this process's cgroups holding `controller` (the v2 one always), each
    followed by its parents up to its hierarchy's root."""
    found = []
    for line in knob_text(self_cgroup).splitlines():
        _, controllers, path = line.split(":", 2)
        if (v2 := controllers == "") or controller in controllers.split(","):
            base = _v2_root(root) if v2 else root / controllers
            here = base / path.strip("/")
            found += [(d, v2) for d in [here, *[p for p in here.parents if p.is_relative_to(base)]]]
    return found


def _quota(folder: Path, v2: bool) -> float | None:
    """CPUs from v2 `cpu.max` ("QUOTA PERIOD") or v1 `cpu.cfs_quota_us` / `..._period_us`."""
    if v2:
        words = knob_text(folder / "cpu.max").split()
    else:
        words = knob_text(folder / "cpu.cfs_quota_us").split()
        words += knob_text(folder / "cpu.cfs_period_us").split()
    try:
        quota, period = int(words[0]), int(words[1])
    except (IndexError, ValueError):  # absent, "max", or unreadable
        return None
    return quota / period if quota > 0 and period > 0 else None


# -- CPUs -----------------------------------------------------------------------------------------
def cpu_quota(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float | None:
    """The tightest CPU quota over this process's cgroups and their parents, in CPUs (v2
    `cpu.max` `"50000 100000"` -> 0.5; v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`); None: none.

    Example:
        >>> cpu_quota() is None or cpu_quota() > 0
        True
    """
    found = [_quota(d, v2) for d, v2 in cgroup_folders("cpu", root, self_cgroup)]
    return min((f for f in found if f), default=None)


def affinity_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity mask), in order; every CPU where the
    platform has no affinity call.

    Example:
        >>> len(affinity_cpus()) >= 1
        True
    """
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def allowed_cpus(affinity: int, quota: float | None) -> float:
    """The rule for usable CPUs, in one place: the CPUs of the affinity mask, capped by the CPU
    quota in CPUs (None: no quota). A float: a quota of 1.5 CPUs is 1.5.

    Example:
        >>> allowed_cpus(8, 1.5), allowed_cpus(2, None)
        (1.5, 2.0)
    """
    return float(min(affinity, quota) if quota is not None else affinity)


def usable_cpus(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float:
    """The CPUs' worth of time this process may use now (`allowed_cpus` of its affinity mask and
    its cgroups' quota).

    Example:
        >>> 0 < usable_cpus() <= len(affinity_cpus())
        True
    """
    return allowed_cpus(len(affinity_cpus()), cpu_quota(root, self_cgroup))


def busy_cpus(cpus: float) -> int:
    """The CPUs that `cpus` worth of time keeps running at once: rounded up, at least one (a
    quota of 1.5 CPUs runs on two, each part of the time).

    Example:
        >>> busy_cpus(1.5), busy_cpus(2.0), busy_cpus(0.25)
        (2, 2, 1)
    """
    return max(1, math.ceil(cpus - 1e-9))


# -- memory ---------------------------------------------------------------------------------------
def _meminfo_available(meminfo: Path) -> int | None:
    for line in knob_text(meminfo).splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _stat(knob: Path, key: str) -> int:
    for line in knob_text(knob).splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _limit(folder: Path, v2: bool) -> int | None:
    """A memory cgroup folder's limit in bytes (v2 `memory.max`, v1 `memory.limit_in_bytes`);
    None where it sets none ("max", or v1's huge "no limit") or it cannot be read."""
    try:
        limit = int(knob_text(folder / ("memory.max" if v2 else "memory.limit_in_bytes")))
    except ValueError:  # absent, unreadable, or "max"
        return None
    return limit if limit < NO_LIMIT else None


def _cgroup_available(folder: Path, v2: bool) -> int | None:
    """What a memory cgroup folder allows still: its limit less its usage, plus its page cache
    (which the kernel reclaims before it refuses memory); None where it has no limit."""
    usage_name, cache_key = (
        ("memory.current", "file") if v2 else ("memory.usage_in_bytes", "total_cache")
    )
    try:
        usage = int(knob_text(folder / usage_name))
    except ValueError:  # absent or unreadable
        return None
    if (limit := _limit(folder, v2)) is None:
        return None
    return max(0, limit - usage) + _stat(folder / "memory.stat", cache_key)


def memory_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """The tightest memory limit over this process's cgroups and their parents, in bytes (what it
    may hold at most, whatever it holds now); None: no limit.

    Example:
        >>> memory_limit() is None or memory_limit() > 0
        True
    """
    found = [_limit(d, v2) for d, v2 in cgroup_folders("memory", root, self_cgroup)]
    return min((f for f in found if f is not None), default=None)


def available_bytes(
    meminfo: Path = MEMINFO, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP
) -> int | None:
    """Bytes this process could still take, page cache reclaimed: the host's `MemAvailable`,
    capped by every memory cgroup over it (v2 `memory.max`, v1 `memory.limit_in_bytes`, parents
    included); None where neither can be read.

    Example:
        >>> available_bytes() is None or available_bytes() > 0
        True
    """
    found = [_meminfo_available(meminfo)]
    found += [_cgroup_available(d, v2) for d, v2 in cgroup_folders("memory", root, self_cgroup)]
    return min((f for f in found if f is not None), default=None)


# -- the page cache -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _PageCalls:
    """The C library's `mmap`, `munmap` and `mincore`, typed (`loader.format.libc`)."""

    mmap: Any
    munmap: Any
    mincore: Any


def _libc() -> _PageCalls | None:
    mmap_call, munmap, mincore = (libc_function(n) for n in ("mmap", "munmap", "mincore"))
    if mmap_call is None or munmap is None or mincore is None:  # e.g. a libc without mincore
        return None
    c_int, c_long = ctypes.c_int, ctypes.c_long
    mmap_call.restype = ctypes.c_void_p
    mmap_call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, c_int, c_int, c_int, c_long]
    munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return _PageCalls(mmap_call, munmap, mincore)


_LIBC = _libc()
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_pages(fd: int, offset: int = 0, size: int | None = None) -> tuple[int, int]:
    """(pages in the page cache, pages) of `size` bytes of an open file from `offset` (a multiple
    of the page size); the whole file from `offset` by default. `mincore(2)` over a read-only
    shared mapping, which faults nothing in. `OSError` where the kernel cannot tell.

    Example:
        >>> fd = os.open(__file__, os.O_RDONLY)
        >>> cached, pages = resident_pages(fd); os.close(fd)
        >>> 0 <= cached <= pages
        True
    """
    if size is None:
        size = os.fstat(fd).st_size - offset
    if size <= 0:
        return 0, 0
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "mincore(2) is not available on this platform")
    addr = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr in (None, _MAP_FAILED):
        raise OSError(ctypes.get_errno(), "mmap for mincore failed")
    try:
        vec = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
        if _LIBC.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        return vec.raw.translate(_BIT0).count(1), len(vec.raw)
    finally:
        _LIBC.munmap(addr, size)


def cached_fraction(fds: Iterable[int]) -> float | None:
    """The fraction of the open files' pages in the page cache, sampled; None if unknown.

    `SAMPLES` windows of `WINDOW_BYTES` spread over each file: asking about every page of a large
    file costs time in proportion to its size, and callers only ask whether a file is warm or
    cold.

    Example:
        >>> fd = os.open(__file__, os.O_RDONLY)
        >>> 0.0 <= cached_fraction([fd]) <= 1.0; os.close(fd)
        True
    """
    resident = total = 0
    for fd in fds:
        size = os.fstat(fd).st_size
        step = max(WINDOW_BYTES, size // SAMPLES) // mmap.PAGESIZE * mmap.PAGESIZE
        for offset in range(0, size, step):
            try:
                cached, pages = resident_pages(fd, offset, min(WINDOW_BYTES, size - offset))
            except OSError:
                return None
            resident, total = resident + cached, total + pages
    return resident / total if total else None
