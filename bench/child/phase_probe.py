"""The phase probe: per-phase wall time and RSS of this process, the bench's `Probe` implementation.

The peak within a phase comes from the kernel's exact high-water mark: `VmHWM` in
`/proc/self/status`, reset to the current RSS by writing `5` to `/proc/self/clear_refs` at each
phase start (a sampling thread misses peaks while the GIL is held). Before every reset the mark is
read and folded into each open phase and into the whole-run peak, so nothing between phases is lost.
Where the kernel refuses the reset (checked once: a touched and unmapped buffer must vanish from the
mark), peaks come from a fast sampler instead and `peak_source` says "sampled".

Resets also lower the lifetime peak the kernel reports (`ru_maxrss`, as `/usr/bin/time -v`
prints it); to cross-check with such a tool, `LOADBENCH_PEAK_SOURCE=sampled` makes no resets.

Before the baseline, `trim_heap` hands the C heap's free pages back to the kernel (glibc's
`malloc_trim(0)`; a no-op on another libc): memory freed before the load (imports, the registry,
the backend) would otherwise be reused by the load's first allocations without raising RSS.

Anonymous and file-backed RSS are the kernel's counters `RssAnon` and `RssFile` (+ `RssShmem`) from
`/proc/self/status`: the same split as `/proc/self/smaps_rollup`, without walking every mapping.
The kernel keeps no high-water mark of either, so each phase's highest anonymous and highest
file-backed RSS (`peak_anon_rss_bytes`, `peak_file_rss_bytes`) are the largest read by the sampler
and at every phase edge; the two need not fall at the same instant, nor sum to the peak. Where the
status file has no such lines (gVisor gives only `VmRSS` and `VmHWM`), both are None (`n/a` in the
tables), never a made-up 0; the timeline's samples then carry 0 for both (its points are RSS
splits, and the dashboard draws them as such), so its curve says nothing there.
Device memory, where the backend reports it (`jax.Device.memory_stats()` on GPU/TPU; None on the
CPU backend): at the end of each phase, each device's `bytes_in_use` and `peak_bytes_in_use`, and
their sums. The allocator's peak cannot be reset, so a phase's device peak is the peak up to the
end of that phase. The provider is a parameter (`device_memory=`), so tests can fake it.

A background thread records the timeline (anon, file, phase) every `interval_s`, keeping at most
`max_samples` by halving the resolution when full. Each phase's entry and exit are timeline points
too, and each phase records when it was first entered and last left (`start_s`, `end_s`).

Example:
    >>> probe = MemoryProbe()
    >>> with probe.measure():
    ...     with probe.phase("read"):
    ...         data = open(path, "rb").read()
    >>> probe.result().phases[0].peak_rss_bytes
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypedDict

from bench.child import device_memory
from bench.child.device_memory import DeviceMemory, Reading, jax_device_memory_by_device
from bench.records.wire import Measurement, PhaseMeasure, Sample
from loader.format.libc import libc_function
from loader.vocabulary import STREAM, TOTAL

PEAK_SOURCE_ENV = "LOADBENCH_PEAK_SOURCE"
_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_KEYS = {"VmRSS": "rss", "VmHWM": "hwm", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}


class Status(TypedDict):
    """This process's memory counters in bytes; anon and file None where the host cannot tell."""

    rss: int
    hwm: int
    anon: int | None
    file: int | None  # file-backed, shared memory included


def parse_status(text: bytes) -> Status:
    """The counters of a `/proc/<pid>/status` text: rss, hwm, anon, file (file-backed incl.
    shmem); anon and file None where the text has no `RssAnon` / `RssFile` line (gVisor)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(b":")
        name = _KEYS.get(key.decode(errors="replace"))
        if name and value.split():
            found[name] = int(value.split()[0]) * 1024
    file = found.get("file")
    return Status(
        rss=found.get("rss", 0),
        hwm=found.get("hwm", 0),
        anon=found.get("anon"),
        file=None if file is None else file + found.get("shmem", 0),
    )


def read_status() -> Status:
    """This process's memory counters (`parse_status` of `/proc/self/status`)."""
    with open(_STATUS, "rb") as fh:
        return parse_status(fh.read())


def higher(old: int | None, new: int | None) -> int | None:
    """The larger of a peak so far and a reading; None once a reading is unknown (None)."""
    if new is None:
        return None
    return new if old is None else max(old, new)


def reset_hwm() -> bool:
    """Reset the kernel's RSS high-water mark to the current RSS; False if the kernel refuses."""
    try:
        with open(_CLEAR_REFS, "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def trim_heap() -> bool:
    """Return the C heap's free pages to the kernel (glibc `malloc_trim(0)`); False elsewhere."""
    malloc_trim = libc_function("malloc_trim")
    return malloc_trim is not None and bool(malloc_trim(0))


def hwm_reset_works(probe_bytes: int = 32 << 20) -> bool:
    """Whether resetting VmHWM works here: a touched, then unmapped buffer must leave the mark."""
    buf = mmap.mmap(-1, probe_bytes)
    for offset in range(0, probe_bytes, mmap.PAGESIZE):
        buf[offset] = 1
    buf.close()
    if not reset_hwm():
        return False
    now = read_status()
    return now["hwm"] - now["rss"] < probe_bytes // 2


@dataclass
class PhaseStats:
    """One phase while it is measured. A phase entered several times is merged: times add, peaks
    max. `frozen()` is the record the child reports (`bench.records.wire.PhaseMeasure`)."""

    name: str
    order: int
    wall_s: float = 0.0
    peak_rss_bytes: int = 0
    end_rss_bytes: int = 0
    anon_rss_bytes: int | None = None  # None: the host cannot tell (no RssAnon in its status)
    file_rss_bytes: int | None = None
    peak_anon_rss_bytes: int | None = None  # the highest anonymous RSS read while it was open
    peak_file_rss_bytes: int | None = None  # the highest file-backed RSS read while it was open
    substeps_s: dict[str, float] = field(default_factory=dict)
    device_bytes_in_use: int | None = None
    device_peak_bytes_in_use: int | None = None
    device_bytes_in_use_by_device: dict[str, int] = field(default_factory=dict)
    device_peak_bytes_by_device: dict[str, int] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)  # phases open at the same time as this one
    cpu_s: float | None = None  # process CPU time (every thread) while it was open
    start_s: float | None = None  # first entered, seconds from the baseline
    end_s: float | None = None  # last left, seconds from the baseline

    def record_device_memory(self, reading: Reading) -> None:
        """Put a device memory reading taken at the phase's end (peaks keep their maximum)."""
        total = device_memory.summed(reading)
        if total is None:
            return
        self.device_bytes_in_use = total[0]
        self.device_peak_bytes_in_use = max(self.device_peak_bytes_in_use or 0, total[1])
        for device, (in_use, peak) in (reading if isinstance(reading, dict) else {}).items():
            self.device_bytes_in_use_by_device[device] = in_use
            old = self.device_peak_bytes_by_device.get(device, 0)
            self.device_peak_bytes_by_device[device] = max(old, peak)

    def frozen(self) -> PhaseMeasure:
        fields = dataclasses.asdict(self)
        return PhaseMeasure(**{**fields, "overlaps": tuple(self.overlaps)})


class MemoryProbe:
    """Measures wall time and RSS per phase (implements `loader.phases.Probe`).

    Args:
        interval_s: timeline sampling interval (the fallback peak sampler uses a fifth of it).
        max_samples: bound on the timeline; when reached, every other sample is dropped and the
            interval doubles.
        use_hwm: force the kernel high-water mark on or off; None checks whether it works here
            (and `LOADBENCH_PEAK_SOURCE=sampled` in the environment forces it off, so an outside
            tool reading the lifetime mark, such as `/usr/bin/time -v`, can cross-check a run).
        device_memory: () -> {device: (bytes_in_use, peak_bytes_in_use)}, or that pair summed,
            or None where the backend reports nothing (default: `jax_device_memory_by_device`).
    """

    def __init__(
        self,
        *,
        interval_s: float = 0.01,
        max_samples: int = 4000,
        use_hwm: bool | None = None,
        device_memory: DeviceMemory = jax_device_memory_by_device,
    ) -> None:
        self._device_memory = device_memory
        if use_hwm is None and os.environ.get(PEAK_SOURCE_ENV) == "sampled":
            # no resets: the lifetime mark (`/usr/bin/time -v`) stays a whole-run peak
            use_hwm = False
        self._use_hwm = hwm_reset_works() if use_hwm is None else use_hwm
        self._interval = interval_s if self._use_hwm else interval_s / 5
        self._max_samples = max_samples
        self._lock = threading.Lock()
        self._open: list[PhaseStats] = []  # phases entered and not yet left, innermost last
        self._phases: dict[str, PhaseStats] = {}
        self._samples: list[Sample] = []
        self._every = 1  # keep one timeline sample in `_every` ticks
        self._tick = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._baseline = 0
        self._total = PhaseStats(TOTAL, 0)

    @property
    def peak_source(self) -> str:
        return "hwm" if self._use_hwm else "sampled"

    def _fold(self, value: int, now: Status) -> None:
        """Fold a peak `value` and the anonymous and file-backed RSS read `now` into every open
        phase and the total."""
        for stats in (*self._open, self._total):
            stats.peak_rss_bytes = max(stats.peak_rss_bytes, value)
            stats.peak_anon_rss_bytes = higher(stats.peak_anon_rss_bytes, now["anon"])
            stats.peak_file_rss_bytes = higher(stats.peak_file_rss_bytes, now["file"])

    def _mark(self) -> Status:
        """Read the counters and fold the peak since the last reset into every open phase."""
        now = read_status()
        with self._lock:
            self._fold(max(now["hwm"], now["rss"]) if self._use_hwm else now["rss"], now)
        return now

    def _sampler(self) -> None:
        while not self._stop.wait(self._interval):
            now = read_status()
            with self._lock:
                self._fold(now["rss"], now)
                self._tick += 1
                if self._tick % self._every:
                    continue
                phase = self._open[-1].name if self._open else ""
                t = time.perf_counter() - self._t0
                self._samples.append(_sample(t, phase, now))
                if len(self._samples) >= self._max_samples:
                    self._samples = self._samples[::2]
                    self._every *= 2

    def start(self) -> int:
        """Trim the heap, record the baseline RSS, reset the mark and start the sampler.

        Returns:
            The baseline RSS in bytes.
        """
        trim_heap()
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        if self._use_hwm:
            reset_hwm()
        now = read_status()
        self._baseline = now["rss"]
        self._total.peak_rss_bytes = self._baseline
        self._total.peak_anon_rss_bytes, self._total.peak_file_rss_bytes = now["anon"], now["file"]
        self._stop.clear()
        self._thread = threading.Thread(target=self._sampler, name="loadbench-probe", daemon=True)
        self._thread.start()
        return self._baseline

    def stop(self) -> None:
        """Stop the sampler and close the whole-run totals."""
        self._total.wall_s = time.perf_counter() - self._t0
        self._total.cpu_s = time.process_time() - self._cpu0
        now = self._mark()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._set_end(self._total, now)

    @contextlib.contextmanager
    def measure(self) -> Iterator[MemoryProbe]:
        """Start, run the block, stop; the block's time and peak become the `total` phase."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def _set_end(self, stats: PhaseStats, now: Status) -> None:
        stats.end_rss_bytes = now["rss"]
        stats.anon_rss_bytes = now["anon"]
        stats.file_rss_bytes = now["file"]
        stats.record_device_memory(self._device_memory())

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Measure the block as phase `name` (loader.phases vocabulary)."""
        now = self._mark()
        with self._lock:
            stats = self._phases.setdefault(name, PhaseStats(name, len(self._phases)))
            stats.peak_rss_bytes = max(stats.peak_rss_bytes, now["rss"])
            stats.peak_anon_rss_bytes = higher(stats.peak_anon_rss_bytes, now["anon"])
            stats.peak_file_rss_bytes = higher(stats.peak_file_rss_bytes, now["file"])
            for other in self._open:  # nested (or concurrent) phases overlap: not disjoint
                _note_overlap(stats, other)
            self._open.append(stats)
        if self._use_hwm:
            reset_hwm()
        start, cpu = time.perf_counter(), time.process_time()
        self._edge_sample(start, name, now)
        if stats.start_s is None:
            stats.start_s = start - self._t0
        try:
            yield
        finally:
            end = time.perf_counter()
            cpu = time.process_time() - cpu
            now = self._mark()
            with self._lock:
                self._open.remove(stats)
                stats.wall_s += end - start
                stats.cpu_s = (stats.cpu_s or 0.0) + cpu
                stats.end_s = end - self._t0
            self._edge_sample(end, name, now)
            self._set_end(stats, now)

    def _edge_sample(self, at: float, phase: str, now: Status) -> None:
        """A timeline point at a phase's entry or exit: the sampler thread may be starved of the
        GIL for a whole phase (one long read), and the curve must not skip it unseen."""
        with self._lock:
            self._samples.append(_sample(at - self._t0, phase, now))

    def add_time(self, substep: str, seconds: float) -> None:
        """Add `seconds` to sub-step `substep` of the innermost open phase (or of `stream`)."""
        with self._lock:
            if self._open:
                stats = self._open[-1]
            else:
                stats = self._phases.setdefault(STREAM, PhaseStats(STREAM, len(self._phases)))
            stats.substeps_s[substep] = stats.substeps_s.get(substep, 0.0) + seconds

    def result(self) -> Measurement:
        """The measurements so far (call after `stop()`); `total` spans the `measure()` block."""
        with self._lock:
            phases = sorted(self._phases.values(), key=lambda p: p.order)
            self._total.order = len(phases)
            return Measurement(
                self._baseline,
                self.peak_source,
                self._total.frozen(),
                tuple(p.frozen() for p in phases),
                tuple(sorted(self._samples, key=lambda s: s.t_s)),
            )


def _sample(t: float, phase: str, now: Status) -> Sample:
    """A timeline point (0 for a split the host cannot tell: see the module doc)."""
    return Sample(t, phase, now["anon"] or 0, now["file"] or 0)


def _note_overlap(a: PhaseStats, b: PhaseStats) -> None:
    """Record that phases `a` and `b` ran at the same time (their walls and peaks overlap)."""
    if b.name != a.name:
        if b.name not in a.overlaps:
            a.overlaps.append(b.name)
        if a.name not in b.overlaps:
            b.overlaps.append(a.name)
