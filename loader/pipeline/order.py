"""The order of work: tensors and parts in file-offset order within each file, files in turn.

Reading in file order keeps each reader sequential (the kernel's read-ahead helps); taking the
files of a sharded checkpoint in turn reads them concurrently.

Runs of small tensors that sit next to each other in a file are read at once, into one arena, as
views. A checkpoint such as gpt2 holds many small tensors (biases, norms) between its large ones.
Each tensor read alone costs a buffer (one mapping), a prefault, a `preadv` and a queue round trip,
which for a few KiB is more than the copy. `coalesce(jobs)` groups the plain same-dtype `AdoptJob`s
of at most `SMALL_BYTES` whose bytes follow each other in the same file (up to `RUN_BYTES` and
`MAX_RUN` tensors) into a `Run`: one arena buffer (a `host_buffer`, prefaulted once), each tensor's
destination a view at a 64-byte-aligned offset in it (so the CPU backend still adopts it without a
copy), and the run read by one `preadv` that scatters the file's contiguous bytes into those views
(a `Run` is the readers' `loader.pipeline.jobs.Work`, as one part of one job is).

The arena is the model's own memory (the views are the leaves' buffers; alignment padding is under
64 bytes a tensor), so it does not count against the budget. It stays mapped while any of its
leaves is alive. A short read raises `CheckpointError` naming the file and the tensor it stops in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

import numpy as np

from loader.errors import CheckpointError
from loader.format import TensorInfo
from loader.format.buffers import aligned, prefault
from loader.pipeline.jobs import AdoptJob, Job, JobPart
from loader.pipeline.regions import FileBytes, drop_cached, full_region, preadv_all
from loader.remote.ranges import RemoteBytes

T = TypeVar("T")
SMALL_BYTES = 1 << 20  # a tensor up to this size may join a run
RUN_BYTES = 16 << 20  # a run reads at most this many bytes
MAX_RUN = 512  # tensors in one run (one iovec each; IOV_MAX is 1024)
ALIGN = 64


def round_robin(lists: list[list[T]]) -> list[T]:
    """The first item of each list, then the second of each, and so on."""
    out: list[T] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


def file_order(infos: list[TensorInfo], file_of: Callable[[str], object]) -> list[TensorInfo]:
    """Tensors in file-offset order within each file, files taken in turn."""
    by_file: dict[str, list[TensorInfo]] = {}
    for info in infos:
        by_file.setdefault(str(file_of(info.name)), []).append(info)
    return round_robin([sorted(v, key=lambda i: i.begin) for v in by_file.values()])


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


@dataclass
class Run:
    """Adopt jobs whose file bytes are contiguous, read together into one arena (`Work`)."""

    jobs: list[AdoptJob]
    arena: np.ndarray

    @property
    def where(self) -> str:
        """The run's first tensor (an error while reading it names the exact tensor instead)."""
        return self.jobs[0].where

    @property
    def casts(self) -> bool:
        return False  # each tensor in its file's dtype

    @property
    def nbytes(self) -> int:
        return sum(j.info.nbytes for j in self.jobs)

    def read(self, scratch: np.ndarray) -> float:
        return read_run(self)


def _eligible(job: Job[Any]) -> TypeGuard[AdoptJob]:
    """A plain adopt job read whole from the file in its own dtype onto one device, in one part
    (not a layer of a stacked leaf: its destination is a slice of the leaf, not an arena's)."""
    if not isinstance(job, AdoptJob) or job.view is not None or job.read_already:
        return False
    if job.step.layer is not None:
        return False
    if not isinstance(job.source, FileBytes | RemoteBytes) or len(job.pieces) != 1:
        return False
    piece = job.pieces[0]
    return (
        piece.region == full_region(job.info.shape)
        and piece.dest.dtype == job.info.np_dtype
        and 0 < job.info.nbytes <= SMALL_BYTES
        and not job.holds_budget
    )


def _follows(run: list[AdoptJob], job: AdoptJob) -> bool:
    last = run[-1]
    src, prev = job.source, last.source
    if isinstance(src, RemoteBytes) and isinstance(prev, RemoteBytes):
        same_file = src.obj.path == prev.obj.path
    else:
        assert isinstance(src, FileBytes) and isinstance(prev, FileBytes)
        same_file = src.fd == prev.fd
    return (
        same_file
        and src.start == prev.start + last.info.nbytes
        and len(run) < MAX_RUN
        and sum(j.info.nbytes for j in run) + job.info.nbytes <= RUN_BYTES
    )


def coalesce(jobs: list[Job[Any]]) -> tuple[list[Run], list[Job[Any]]]:
    """(the runs of two or more adjacent small jobs, every other job), in file order."""
    groups: list[list[AdoptJob]] = []
    rest: list[Job[Any]] = []
    for job in jobs:
        if not _eligible(job):
            rest.append(job)
        elif groups and groups[-1] and _follows(groups[-1], job):
            groups[-1].append(job)
        else:
            groups.append([job])
    runs = []
    for group in groups:
        if len(group) > 1:
            runs.append(_arena(group))
        else:
            rest.extend(group)
    return runs, rest


def _arena(jobs: list[AdoptJob]) -> Run:
    """One buffer for the group; each job's destination becomes an aligned view into it."""
    offsets, end = [], 0
    for job in jobs:
        offsets.append(end)
        end += -(-job.info.nbytes // ALIGN) * ALIGN
    arena = aligned((end,), np.dtype(np.uint8))
    for job, off in zip(jobs, offsets):
        raw = arena[off : off + job.info.nbytes]
        job.pieces[0].dest = raw.view(job.info.np_dtype).reshape(job.info.shape)
    return Run(jobs, arena)


def read_run(run: Run) -> float:
    """Prefault the arena and fill every view with one scattered read of the file (then drop the
    pages of each tensor whose `FileBytes.drop` says so from the page cache); the seconds taken."""
    t0 = time.perf_counter()
    prefault(run.arena)
    first = run.jobs[0].source
    if isinstance(first, RemoteBytes):  # a URL's neighbours: one request per chunk of the run
        arrays = [j.pieces[0].dest.reshape(-1).view(np.uint8) for j in run.jobs]
        names = f"tensors {run.jobs[0].info.name!r} to {run.jobs[-1].info.name!r}"
        first.reader.fetch_views(first.obj, first.start, arrays, what=names)
        return time.perf_counter() - t0
    assert isinstance(first, FileBytes)
    views = [j.pieces[0].dest.reshape(-1).view(np.uint8).data for j in run.jobs]
    done = preadv_all(first.fd, views, first.start)
    if done < run.nbytes:
        raise CheckpointError(f"{_stopped_in(run, done)}: file ends early (truncated?)")
    for job in run.jobs:
        if isinstance(src := job.source, FileBytes) and src.drop:
            drop_cached(src.fd, src.start, job.info.nbytes)
    return time.perf_counter() - t0


def _stopped_in(run: Run, done: int) -> str:
    """The file and tensor of the run in which the byte `done` (from the run's start) lies."""
    for job in run.jobs:
        if done < job.info.nbytes:
            src = job.source
            assert isinstance(src, FileBytes)
            return src.where
        done -= job.info.nbytes
    return run.jobs[-1].where
