"""The machine's speed at the moment of each child: the reference every repeat is paired with.

A shared or virtual machine changes speed from one minute to the next (another tenant, a
CPU-heavy process beside the bench, a host that backs guest memory lazily), so a wall time alone
cannot say whether a strategy moved or the machine did. Right before and right after each child,
the runner times one short copy pass of its own (`bench.host.bandwidth.copy_pass`): a scratch
file read by the usable CPUs' threads into fresh private memory, the core of every load; from the
page cache for a warm child, from the disk (`O_DIRECT`, else evicted first) for a cold one.

Each row then carries `reference_s`: the checkpoint's bytes at the mean of the two passes'
speeds, the time a bare copy of the checkpoint would have taken on this machine at that moment,
and `reference_drift`: how far the pass after the child strayed from the one before (after /
before - 1), which says the machine changed speed while the child ran. Verdicts judge
`paired_ratio = wall_s / reference_s` (`bench.analysis.intervals`): a machine that slows down
slows the load and its reference alike. Over a shaped link the link is the reference instead
(`bench.run.rows`). Never imports jax.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.host.bandwidth import copy_pass, direct_works, evict, write_probe_file
from bench.vocabulary import COLD
from loader.host import resident_pages, usable_cpus

#: The scratch file: passes read at most this much (a checkpoint smaller than it, its own size).
#: About 0.1 s per pass on a 2-core VM (two passes per child): short beside any child, long
#: enough that the timer's and the scheduler's jitter stay under 1%.
WARM_PASS_BYTES = 256 << 20
COLD_PASS_BYTES = 64 << 20  # a cold pass reads the disk: smaller, so a slow disk stays quick
MIN_PASS_BYTES = 16 << 20
SCRATCH_NAME = "moment-reference.bin"


@dataclass(frozen=True)
class Reading:
    """Two passes around one child: seconds each took for `pass_bytes`, and how it read."""

    before_s: float
    after_s: float
    pass_bytes: int
    threads: int
    cache: str

    def seconds_for(self, nbytes: int) -> float:
        """`nbytes` at the mean speed of the two passes (the mean of their rates)."""
        rate = (self.pass_bytes / self.before_s + self.pass_bytes / self.after_s) / 2
        return nbytes / rate

    @property
    def drift(self) -> float:
        """after / before - 1: positive when the machine was slower after the child."""
        return self.after_s / self.before_s - 1

    def fields(self, checkpoint_bytes: int) -> dict[str, float]:
        """The row fields: `reference_s` for the checkpoint and `reference_drift`."""
        return {
            "reference_s": self.seconds_for(checkpoint_bytes),
            "reference_drift": self.drift,
        }


@dataclass
class MomentReference:
    """The scratch file a run's passes read, made once per cache folder and kept there."""

    folder: Path
    threads: int = field(default_factory=lambda: max(1, math.floor(usable_cpus())))
    failed: str | None = None  # why no reference could be taken (said once; rows go without)
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

    def one_pass(self, nbytes: int, cache: str) -> float:
        """Seconds of one pass of `nbytes`: warm from the page cache (read once more first where
        part of it was evicted since), cold from the disk."""
        path = self._ensure(nbytes)
        if cache != COLD:
            if not self._cached(path, nbytes):
                copy_pass(path, self.threads, nbytes=nbytes)
            return copy_pass(path, self.threads, nbytes=nbytes)
        if self._direct is None:
            self._direct = direct_works(path)
        evict(path)
        return copy_pass(path, self.threads, direct=self._direct, nbytes=nbytes)

    def before(self, checkpoint_bytes: int, cache: str) -> float | None:
        """The pass before a child (None: no reference can be taken here, said once)."""
        if self.failed is not None:
            return None
        size = self.pass_bytes(checkpoint_bytes, cache)
        try:
            return self.one_pass(size, cache)
        except OSError as exc:
            self.failed = f"no reference pass in {self.folder}: {exc}"
            print(f"loadbench: {self.failed}; rows go without reference_s", file=sys.stderr)
            return None

    def after(self, before_s: float | None, checkpoint_bytes: int, cache: str) -> Reading | None:
        """The pass after a child, paired with `before_s` (None where either is missing)."""
        if before_s is None or self.failed is not None:
            return None
        size = self.pass_bytes(checkpoint_bytes, cache)
        try:
            after_s = self.one_pass(size, cache)
        except OSError as exc:
            self.failed = f"no reference pass in {self.folder}: {exc}"
            return None
        return Reading(before_s, after_s, size, self.threads, cache)
