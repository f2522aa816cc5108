"""The machine's speed at the moment of each child: the reference every repeat is paired with.

A shared or virtual machine changes speed from one minute to the next (another tenant, a
CPU-heavy process beside the bench, a host that backs guest memory lazily), so a wall time alone
cannot say whether a strategy moved or the machine did. Right before and right after each child,
the runner times one short copy pass of its own (`bench.machine.bandwidth.copy_pass`): a scratch
file read by the usable CPUs' threads into fresh private memory, the core of every load; from the
page cache for a warm child, from the disk (`O_DIRECT`, else evicted first) for a cold one.

The CPU seconds the passes spent are kept too (`reference_cpu_s`: their CPU per byte times the
checkpoint): CPU time does not grow when another process takes a core, where wall time does,
and grows unevenly, by each strategy's threads (`bench.intervals`, "basis").

Each row then carries `reference_s`: the checkpoint's bytes at the mean of the two passes'
speeds, the time a bare copy of the checkpoint would have taken on this machine at that moment,
and `reference_drift`: how far the pass after the child strayed from the one before (after /
before - 1), which says the machine changed speed while the child ran. Verdicts judge
`paired_ratio = wall_s / reference_s` (`bench.intervals`): a machine that slows down
slows the load and its reference alike. Over a shaped link the link is the reference instead
(`bench.run.rows`). Never imports jax.

A pass faults its fresh pages in with `MADV_POPULATE_WRITE`, or, where the kernel refuses it
(gVisor, older kernels), by writing one byte per page on each reading thread
(`bench.machine.bandwidth.prefault`); rows say which (`reference_prefault`: "populate" | "touch"),
and the run says so once when it touched.

Where the children load onto an accelerator (the machine probe saw one), a warm pass reads into
reused, already-touched buffers instead (`bench.machine.bandwidth.reused_read_pass`): such a
load moves the page cache to the device and never into fresh host memory, and on a host where
fresh pages are dear (a TPU v5e host in gVisor: a fresh copy of sa3 took 2.5 s, the loads
1.0-1.1 s) a fresh copy would call every repeat "faster than a bare copy". Rows say which
(`reference_pass`: "fresh" | "reused").
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.machine.bandwidth import (
    TOUCH,
    copy_pass,
    direct_works,
    evict,
    prefault_method,
    prefault_note,
    reused_read_pass,
    write_probe_file,
)
from bench.vocabulary import COLD
from loader.host import resident_pages, usable_cpus

#: The scratch file: passes read at most this much (a checkpoint smaller than it, its own size).
#: About 0.05-0.1 s per pass on a 2-core VM (four passes per child): short beside any child, long
#: enough that the timer's and the scheduler's jitter stay small.
WARM_PASS_BYTES = 128 << 20
COLD_PASS_BYTES = 64 << 20  # a cold pass reads the disk: smaller, so a slow disk stays quick
MIN_PASS_BYTES = 16 << 20
SCRATCH_NAME = "moment-reference.bin"
#: what a pass reads into: fresh private memory (a load into host RAM) or reused, already-touched
#: buffers (a warm load onto an accelerator)
FRESH, REUSED = "fresh", "reused"


@dataclass(frozen=True)
class Pass:
    """One side's passes: seconds for `pass_bytes` with one thread and with all usable threads,
    and the CPU seconds each took (this process's, every thread)."""

    one_s: float
    one_cpu_s: float
    all_s: float
    all_cpu_s: float
    kind: str = FRESH  # what the passes read into: FRESH | REUSED


@dataclass(frozen=True)
class Reading:
    """The passes around one child, how much each read, with how many threads, and the CPU time
    other processes took while the child ran (`others_cpu_fraction`: of every CPU's time)."""

    before: Pass
    after: Pass
    pass_bytes: int
    threads: int
    cache: str
    others_cpu_fraction: float | None = None
    prefault: str | None = None  # how the passes faulted fresh pages in: populate | touch

    def seconds_for(self, nbytes: int) -> float:
        """`nbytes` at the mean speed of the all-thread passes (the mean of their rates); for
        passes into reused buffers, of each side's faster pass: a short read is a bound, and
        starting every thread can outlast it (a TPU host in gVisor read 128 MiB in 13 ms with
        one thread and 31-37 ms with 13, which made a 2.0 s llama3-8b load "faster than a
        bare copy")."""
        sides = (self.before, self.after)
        if self.before.kind == REUSED:
            rates = [self.pass_bytes / min(side.one_s, side.all_s) for side in sides]
        else:
            rates = [self.pass_bytes / side.all_s for side in sides]
        return nbytes / (sum(rates) / 2)

    @property
    def drift(self) -> float:
        """after / before - 1 of the all-thread pass: positive when the machine was slower
        after the child."""
        return self.after.all_s / self.before.all_s - 1

    def fields(self, checkpoint_bytes: int) -> dict[str, Any]:
        """The row fields: `reference_s` for the checkpoint, `reference_cpu_s` (the CPU seconds
        the passes spent per byte, times the checkpoint), `reference_drift`,
        `others_cpu_fraction`, the raw passes (`reference_passes`), how they faulted fresh
        pages in (`reference_prefault`; None for reused buffers) and what they read into
        (`reference_pass`)."""
        raw = {
            f"{side}_{name}": getattr(getattr(self, side), name)
            for side in ("before", "after")
            for name in ("one_s", "one_cpu_s", "all_s", "all_cpu_s")
        }
        cpu_per_byte = (self.before.all_cpu_s + self.after.all_cpu_s) / (2 * self.pass_bytes)
        return {
            "reference_s": self.seconds_for(checkpoint_bytes),
            "reference_cpu_s": checkpoint_bytes * cpu_per_byte,
            "reference_drift": self.drift,
            "others_cpu_fraction": self.others_cpu_fraction,
            "reference_prefault": self.prefault if self.before.kind == FRESH else None,
            "reference_pass": self.before.kind,
            "reference_passes": {
                **raw,
                "pass_bytes": float(self.pass_bytes),
                "threads": float(self.threads),
            },
        }


def _cpu_s() -> float:
    """This process's CPU seconds, every thread, to the nanosecond (the kernel's
    `CLOCK_PROCESS_CPUTIME_ID`, where `getrusage` counts in scheduler ticks)."""
    return time.process_time()


@dataclass
class CpuWatch:
    """The CPU time other processes took while a child ran: every CPU's busy time (from the
    kernel's `/proc/stat`, through psutil) less this process's and its children's."""

    cpus: int = field(default_factory=lambda: psutil.cpu_count() or 1)
    _start: tuple[float, float, float] | None = None

    @staticmethod
    def _now() -> tuple[float, float, float]:
        """(every CPU's busy seconds, this process's and its children's CPU seconds, now)."""
        times = psutil.cpu_times()
        busy = sum(times) - times.idle - getattr(times, "iowait", 0.0)
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        mine = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        return busy, mine, time.perf_counter()

    def start(self) -> None:
        self._start = self._now()

    def others_fraction(self) -> float | None:
        """Of every CPU's time since `start`, the fraction other processes were busy."""
        if self._start is None:
            return None
        busy, mine, wall = self._now()
        busy0, mine0, wall0 = self._start
        elapsed = (wall - wall0) * self.cpus
        if elapsed <= 0:
            return None
        return min(1.0, max(0.0, (busy - busy0 - (mine - mine0)) / elapsed))


@dataclass
class MomentReference:
    """The scratch file a run's passes read, made once per cache folder and kept there."""

    folder: Path
    threads: int = field(default_factory=lambda: max(1, math.floor(usable_cpus())))
    failed: str | None = None  # why no reference could be taken (said once; rows go without)
    touch_said: bool = False  # the passes' touching instead of populating was said
    watch: CpuWatch = field(default_factory=CpuWatch)
    _direct: bool | None = None

    @property
    def path(self) -> Path:
        return self.folder / SCRATCH_NAME

    def _ensure(self, nbytes: int) -> Path:
        """The scratch file, at least `nbytes` long (written, or grown, once)."""
        if not self.path.is_file() or self.path.stat().st_size < nbytes:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            write_probe_file(tmp, nbytes)
            tmp.replace(self.path)
        return self.path

    def pass_bytes(self, checkpoint_bytes: int, cache: str) -> int:
        """How much one pass reads for a checkpoint of `checkpoint_bytes` (whole MiB)."""
        most = COLD_PASS_BYTES if cache == COLD else WARM_PASS_BYTES
        size = max(MIN_PASS_BYTES, min(most, checkpoint_bytes))
        return size >> 20 << 20

    def _cached(self, path: Path, nbytes: int) -> bool:
        fd = os.open(path, os.O_RDONLY)
        try:
            cached, pages = resident_pages(fd, 0, nbytes)
        finally:
            os.close(fd)
        return cached == pages

    def _timed(
        self, path: Path, nbytes: int, threads: int, cache: str, kind: str
    ) -> tuple[float, float]:
        """(seconds, CPU seconds) of one pass: warm from the page cache (read once more first
        where part of it was evicted since) into fresh memory or, `kind` REUSED, into reused
        buffers; cold from the disk into fresh memory."""
        direct = False
        if cache == COLD:
            if self._direct is None:
                self._direct = direct_works(path)
            direct = self._direct
            evict(path)
        elif not self._cached(path, nbytes):
            copy_pass(path, self.threads, nbytes=nbytes)
        cpu = _cpu_s()
        if kind == REUSED:  # warm only (`passes`)
            seconds = reused_read_pass(path, threads, nbytes=nbytes)
        else:
            seconds = copy_pass(path, threads, direct=direct, nbytes=nbytes)
        return seconds, _cpu_s() - cpu

    def passes(self, nbytes: int, cache: str, kind: str = FRESH) -> Pass:
        """One side's passes: one thread, then every usable thread (a cold pass reads into
        fresh memory whatever `kind` asks: the disk is its limit)."""
        kind = FRESH if cache == COLD else kind
        path = self._ensure(nbytes)
        one_s, one_cpu = self._timed(path, nbytes, 1, cache, kind)
        all_s, all_cpu = self._timed(path, nbytes, self.threads, cache, kind)
        return Pass(one_s, one_cpu, all_s, all_cpu, kind)

    def before(self, checkpoint_bytes: int, cache: str, onto_device: bool = False) -> Pass | None:
        """The passes before a child (None: no reference can be taken here, said once), into
        reused buffers where the child loads `onto_device`; then the CPU watch starts."""
        if self.failed is not None:
            return None
        kind = REUSED if onto_device else FRESH
        try:
            taken = self.passes(self.pass_bytes(checkpoint_bytes, cache), cache, kind)
        except OSError as exc:
            self.failed = f"no reference pass in {self.folder}: {exc}"
            print(f"loadbench: {self.failed}; rows go without reference_s", file=sys.stderr)
            return None
        if taken.kind == FRESH and prefault_method() == TOUCH and not self.touch_said:
            self.touch_said = True
            print(f"loadbench: reference passes: {prefault_note()}", file=sys.stderr)
        self.watch.start()
        return taken

    def after(self, before: Pass | None, checkpoint_bytes: int, cache: str) -> Reading | None:
        """The passes after a child, paired with those `before` (None where either is missing)."""
        if before is None or self.failed is not None:
            return None
        others = self.watch.others_fraction()
        size = self.pass_bytes(checkpoint_bytes, cache)
        try:
            after = self.passes(size, cache, before.kind)
        except OSError as exc:
            self.failed = f"no reference pass in {self.folder}: {exc}"
            return None
        return Reading(before, after, size, self.threads, cache, others, prefault_method())
