"""The order of work: tensors and parts in file-offset order within each file, files in turn.

Reading in file order keeps each reader sequential (the kernel's read-ahead helps); taking the
files of a sharded checkpoint in turn reads them concurrently.

Where the byte source takes each file's bytes in file order as they arrive
(`ByteSource.in_file_order`: a remote file whose sha256 is checked on the way,
`loader.remote.digest`), every piece of work is one request (`Sizing.max_part_bytes`: the jobs'
parts, the runs and the fused rows are cut to it) and `by_offset` queues them strictly by offset:
the runs of small tensors with the large tensors around them, not before them. The requests in
flight are then the next ones of the file, so the hash only ever waits for a request in flight,
what comes back early is held only until the requests before it are in, and no gap is fetched
again.

Runs of small tensors that sit next to each other in a file are read at once, into one arena, as
views. A checkpoint such as gpt2 holds many small tensors (biases, norms) between its large ones.
Each tensor read alone costs a buffer (one mapping), a prefault, a `preadv` and a queue round trip,
which for a few KiB is more than the copy. `coalesce(jobs)` groups the plain same-dtype `AdoptJob`s
of at most `SMALL_BYTES` whose bytes follow each other in the same file (up to `RUN_BYTES` and
`MAX_RUN` tensors) into a `Run`: one arena buffer (a `host_buffer`, prefaulted once), each tensor's
destination a view at a 64-byte-aligned offset in it (so the CPU backend still adopts it without a
copy), and the run read at once by the byte source (`ByteSource.read_run`: one `preadv` that
scatters a local file's contiguous bytes into those views, one request per chunk of a URL's). A
`Run` is the readers' `loader.pipeline.jobs.Work`, as one part of one job is.

The arena is the model's own memory (the views are the leaves' buffers; alignment padding is under
64 bytes a tensor), so it does not count against the budget. It stays mapped while any of its
leaves is alive.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.format.buffers import aligned, prefault
from loader.format.file_order import round_robin
from loader.pipeline.jobs import AdoptJob, Job, JobPart, MappedPart, Work

if TYPE_CHECKING:
    from loader.pipeline.sources import ByteSource

SMALL_BYTES = 1 << 20  # a tensor up to this size may join a run
RUN_BYTES = 16 << 20  # a run reads at most this many bytes
MAX_RUN = 512  # tensors in one run (one iovec each; IOV_MAX is 1024)
ALIGN = 64


def part_order(jobs: list[Job[Any]]) -> list[JobPart[Any]]:
    """Every job's parts in file order, files in turn; parts of jobs holding budgeted bytes first.

    Putting those first means a thread that waits for budget (a host copy's buffer) only ever
    waits for parts already taken by another thread, so the waits always end.
    """
    holding = [JobPart(job, p) for job in jobs if job.holds_budget for p in job.parts()]
    by_file: dict[str, list[JobPart[Any]]] = {}
    for job in jobs:
        if not job.holds_budget:
            by_file.setdefault(job.file, []).extend(JobPart(job, p) for p in job.parts())
    return holding + round_robin(list(by_file.values()))


def by_offset(work: list[Work], source: ByteSource) -> list[Work]:
    """`work` strictly in file order, for a source that takes its bytes so
    (`ByteSource.in_file_order`): each file's by the offset of the first tensor it reads (a
    tensor's parts keep their row order: the sort is stable), files in turn. Work whose jobs hold
    budgeted bytes stays first, as `part_order` puts it (it reads memory, not the file).

    Example:
        >>> queued = by_offset([*runs, *fused, *part_order(rest)], source)
    """
    holding = [w for w in work if any(job.holds_budget for job in w.jobs)]
    by_file: dict[str, list[Work]] = {}
    for w in work:
        if not any(job.holds_budget for job in w.jobs):
            by_file.setdefault(str(source.file_of(_first_key(w))), []).append(w)
    ordered = [sorted(v, key=lambda w: source.file_offset(_first_key(w))) for v in by_file.values()]
    return holding + round_robin(ordered)


def _first_key(work: Work) -> str:
    """The stored tensor whose bytes `work` reads first (a run's jobs follow each other)."""
    return work.jobs[0].step.file_key


@dataclass
class Run:
    """Adopt jobs whose file bytes are contiguous, read together into one arena (`Work`)."""

    jobs: list[AdoptJob]
    arena: np.ndarray
    source: ByteSource

    @property
    def where(self) -> str:
        """The run's first tensor (an error while reading it names the exact tensor instead)."""
        return self.jobs[0].where

    @property
    def casts(self) -> bool:
        return False  # each tensor in its file's dtype

    device_bytes = 0  # into buffers the devices adopt

    def mapped(self) -> MappedPart | None:
        return None  # read by a reader thread

    @property
    def nbytes(self) -> int:
        return sum(j.info.nbytes for j in self.jobs)

    def read(self, scratch: np.ndarray) -> float:
        """Prefault the arena and fill every view with one read of the run (`read_run`); the
        seconds taken."""
        t0 = time.perf_counter()
        prefault(self.arena)
        views = [j.pieces[0].dest.reshape(-1).view(np.uint8) for j in self.jobs]
        self.source.read_run([j.info.name for j in self.jobs], views)
        return time.perf_counter() - t0


def _follows(run: list[AdoptJob], job: AdoptJob, source: ByteSource, run_bytes: float) -> bool:
    """`job`'s tensor starts where the run's last ends, in the same file, and the run has room
    (`run_bytes` at most)."""
    last, key = run[-1].info, job.info.name
    return (
        source.file_of(key) == source.file_of(last.name)
        and source.file_offset(key) == source.file_offset(last.name) + last.nbytes
        and len(run) < MAX_RUN
        and sum(j.info.nbytes for j in run) + job.info.nbytes <= run_bytes
    )


def coalesce(
    jobs: list[Job[Any]], source: ByteSource, max_part_bytes: float = math.inf
) -> tuple[list[Run], list[Job[Any]]]:
    """(the runs of two or more adjacent small jobs, every other job), in file order; a run
    reads at most `RUN_BYTES` and `max_part_bytes` (`Sizing.max_part_bytes`)."""
    run_bytes = min(RUN_BYTES, max_part_bytes)
    groups: list[list[AdoptJob]] = []
    rest: list[Job[Any]] = []
    for job in jobs:
        small = job.joins_run(SMALL_BYTES)
        if small is None:
            rest.append(job)
        elif groups and groups[-1] and _follows(groups[-1], small, source, run_bytes):
            groups[-1].append(small)
        else:
            groups.append([small])
    runs = []
    for group in groups:
        if len(group) > 1:
            runs.append(_arena(group, source))
        else:
            rest.extend(group)
    return runs, rest


def _arena(jobs: list[AdoptJob], source: ByteSource) -> Run:
    """One buffer for the group; each job's destination becomes an aligned view into it."""
    offsets, end = [], 0
    for job in jobs:
        offsets.append(end)
        end += -(-job.info.nbytes // ALIGN) * ALIGN
    arena = aligned((end,), np.dtype(np.uint8))
    for job, off in zip(jobs, offsets):
        raw = arena[off : off + job.info.nbytes]
        job.pieces[0].dest = raw.view(job.info.np_dtype).reshape(job.info.shape)
    return Run(jobs, arena, source)
