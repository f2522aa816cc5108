"""The pipelined executor: reader threads that start before the build and fill leaves as they go.

Life of a load (`start` before the model is built, `fill` after the plan check, `close` always):

1. `start(source, probe)`: reader threads begin at once, needing only the headers, and read
   speculatively while the model is built (`loader.pipeline.speculation`: whole tensors in file
   order, interleaved across shard files, within the budget; with `strict=True`, nothing read).
2. `fill(plan, source, probe)`: speculation stops; each step becomes a job (`loader.pipeline.jobs`):
   a speculative buffer of the right dtype and placement is adopted as is (its bytes leave the
   budget), otherwise it is the source of a cast or slice copy. The remaining parts are read by the
   threads, in file order (`loader.pipeline.order`), straight into destination buffers (same
   dtype) or through a reused per-thread scratch buffer cast chunk by chunk
   (`loader.pipeline.regions`; its size: `ring_size.scratch_bytes`); a leaf with a declared
   transform is read through its strided view of the file tensor (`loader.pipeline.views`). The
   main thread places and assigns each leaf as soon as its parts are done. Staged (no adopting
   backend, or `staging=True`): nothing is read speculatively; each adoptable leaf without a
   transform is a `loader.pipeline.staged` job whose chunks go through the staging ring onto
   their devices (a transformed leaf is read into a host buffer through its view, then placed).
3. `close()`: cancels what is left and joins every thread, error or not.

An exception in a reader thread stops the load: it is raised on the main thread as
`CheckpointError` naming the file and tensor, after every thread has been joined.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import numpy as np

from loader.format import TensorInfo
from loader.format.buffers import aligned
from loader.format.source import CheckpointSource
from loader.phases import CAST, READ, STREAM, TRANSFER, Probe
from loader.pipeline.cache_fit import dropped_tensors, drops_for, read_ahead
from loader.pipeline.jobs import (
    LeafJob,
    Part,
    adopt_pieces,
    finish,
    is_adoptable,
    job_view,
    read_row_part,
    read_view_part,
    split_parts,
    stage_piece,
)
from loader.pipeline.options import (
    CACHE_POLICIES,
    DEFAULT_BUDGET_BYTES,
    ByteBudget,
    PipelineStats,
    check_budget,
    check_options,
    close_files,
    file_threads,
    open_files,
    reader_error,
)
from loader.pipeline.order import Run, coalesce, file_order, part_order, read_run
from loader.pipeline.regions import Bytes, FileBytes, MemoryBytes
from loader.pipeline.ring_size import MAX_SCRATCH_BYTES, scratch_bytes
from loader.pipeline.speculation import Speculation
from loader.pipeline.stacked import StackBuffers
from loader.pipeline.staged import STAGED, make_stager
from loader.pipeline.staging import Transfer
from loader.planning import LoadPlan, Step
from loader.transforms import View

__all__ = ["CACHE_POLICIES", "MAX_SCRATCH_BYTES", "Pipeline", "PipelineStats"]


class Pipeline:
    """Executor of a load: `start` before the build, `fill` after the plan check, then `close`.

    Args:
        budget: bound on host bytes in flight beyond the model's own (default 256 MiB).
        strict: read nothing before `fill` (the plan check has passed by then).
        threads: reader threads (default: by usable CPUs and page cache, `loader.pipeline.options`).
        cache_policy: `"auto"` (default), `"keep"` or `"dontneed"` (`loader.pipeline.cache_fit`).
        staging: read through a ring of host staging buffers onto the devices
            (`loader.pipeline.staged`); None: when the backend does not adopt host buffers.
        transfer: the staged host -> device copy (default: `loader.pipeline.staging`'s own).
    """

    def __init__(
        self,
        *,
        budget: int | None = None,
        strict: bool = False,
        threads: int | None = None,
        staging: bool | None = None,
        transfer: Transfer | None = None,
        cache_policy: str = "auto",
    ) -> None:
        self._auto_threads = threads is None
        self.threads = check_options(threads, cache_policy)
        self.cache_policy = cache_policy
        limit = check_budget(DEFAULT_BUDGET_BYTES if budget is None else int(budget), self.threads)
        self.scratch_bytes = scratch_bytes(limit, self.threads)
        self._stager = make_stager(staging, limit, self.threads, transfer)
        reserved = self.scratch_bytes * self.threads + (
            self._stager.ring.nbytes if self._stager else 0
        )
        self.budget = ByteBudget(limit, reserved_bytes=reserved)
        self.strict = strict
        self.stats = PipelineStats(budget_bytes=limit, threads=self.threads)
        self._lock = threading.Lock()
        self._spec: Speculation | None = None
        self._parts: queue.Queue[Part | Run | None] = queue.Queue()
        self._done: queue.Queue[tuple[LeafJob, BaseException | None]] = queue.Queue()
        self._cancelled = threading.Event()
        self._workers: list[threading.Thread] = []
        self._fds: dict[str, int] = {}
        self._source: CheckpointSource | None = None
        self._stacks: dict[int, StackBuffers] = {}  # id(loader.stacking.Stacked) -> its buffers
        self._phase = contextlib.ExitStack()

    # -- start: before the build ----------------------------------------------------------------
    def start(self, source: CheckpointSource, probe: Probe) -> None:
        """Open the files and start the reader threads (speculating while the model is built)."""
        self._source = source
        self._phase.enter_context(probe.phase(STREAM))
        self._fds = open_files(source.files)
        # More readers where the files are cold (a cold read waits on the disk), counted before the
        # read-ahead hint, which may cache a small file whole; their scratch is sized next.
        if self._auto_threads and self._stager is None:
            n = file_threads(list(self._fds.values()))
            if n > self.threads and self.budget.limit_bytes >= 8192 * n:
                self.threads = self.stats.threads = n
        read_ahead(self._fds.values(), self.cache_policy, source.total_bytes)
        if self._stager is None:  # no scratch beyond its share of this checkpoint
            size = scratch_bytes(self.budget.limit_bytes, self.threads, source.total_bytes)
            self.scratch_bytes, self.budget.reserved_bytes = size, size * self.threads
            self.budget.high_water_bytes = size * self.threads
        order = file_order([source.info(k) for k in source.keys()], source.file_of)
        order = [] if self._stager else order  # staged: no read before the plan's device check
        self._dropped = dropped_tensors(self.cache_policy, order, 0, None)  # "dontneed": all
        self._spec = Speculation(order, self.budget, strict=self.strict)
        for i in range(self.threads):
            t = threading.Thread(target=self._run, name=f"loader-pipeline-{i}", daemon=True)
            self._workers.append(t)
            t.start()

    def _started(self) -> tuple[CheckpointSource, Speculation]:
        """The source and speculation that `start` set up; a clear error if it was not called."""
        if self._source is None or self._spec is None:
            raise RuntimeError("Pipeline: call start(source, probe) before fill(plan, ...)")
        return self._source, self._spec

    def _run(self) -> None:
        scratch = aligned((self.scratch_bytes,), np.uint8)
        self._started()[1].run(self._file_bytes)
        while (part := self._parts.get()) is not None:
            if self._cancelled.is_set():
                continue
            try:
                self._read_part(part, scratch)
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the main thread
                self._cancelled.set()
                self.budget.cancel()
                self._done.put((part.job, exc))

    def _file_bytes(self, info: TensorInfo) -> FileBytes:
        source = self._started()[0]
        f = str(source.file_of(info.name))
        start = source.file_offset(info.name)
        drop = info.name in self._dropped  # (tensors dropped from the page cache once read)
        return FileBytes(self._fds[f], start, where=f"{f}: tensor {info.name!r}", drop=drop)

    def _read_part(self, part: Part | Run, scratch: np.ndarray) -> None:
        if isinstance(part, Run):  # small adjacent tensors in one read (`loader.pipeline.order`)
            dt = read_run(part)  # (dropping the pages of the tensors in `_dropped`)
            return self._parts_done(part.jobs, dt, cast=False)
        job = part.job
        if job.kind == STAGED and self._stager is not None:  # a chunk through the staging ring
            cast = np.dtype(job.step.leaf.dtype) != job.info.np_dtype
            dt = self._stager.read(part, scratch)  # type: ignore[arg-type]
            return self._parts_done([job], dt, cast=cast)
        if job.acquire_bytes:
            self.budget.acquire(job.acquire_bytes)
            with self._lock:
                job.counted_bytes, job.acquire_bytes = job.acquire_bytes, 0
        t0 = time.perf_counter()
        if job.view is not None:  # a declared transform: read through its view, chunk by chunk
            dest = read_view_part(part, scratch)
        else:
            dest = read_row_part(part, scratch)
        self._parts_done([job], time.perf_counter() - t0, cast=dest.dtype != job.info.np_dtype)

    def _parts_done(self, jobs: list[LeafJob], dt: float, *, cast: bool) -> None:
        """Count a read's (or cast's) time; a job whose last part it was goes to the main thread."""
        with self._lock:
            if cast:
                self.stats.cast_s += dt
            else:
                self.stats.read_s += dt
            for job in jobs:
                job.pending -= 1
            last = [job for job in jobs if job.pending == 0]
        for job in last:
            self._done.put((job, None))

    # -- fill: after the plan check -------------------------------------------------------------
    def fill(self, plan: LoadPlan, source: CheckpointSource, probe: Probe) -> None:
        """Read what the plan needs and give every planned leaf its value."""
        self._started()[1].stop(len(self._workers))
        self._dropped = drops_for(self.cache_policy, plan.steps, source, self._started()[1].buffers)
        jobs = [self._job(step) for step in plan.steps]
        ready = [j for j in jobs if j.pending == 0]
        runs, rest = coalesce(jobs)
        self.stats.coalesced = sum(len(r.jobs) for r in runs)
        queued: list[Part | Run] = [*runs, *part_order(rest)]
        for part in queued:
            self._parts.put(part)
        placed_s = 0.0
        waiting = len(jobs) - len(ready)
        for job in ready:
            placed_s += self._finish(job, plan)
        while waiting:
            job, exc = self._done.get()
            if exc is not None:
                self.close()
                raise reader_error(job.where, exc)
            waiting -= 1
            placed_s += self._finish(job, plan)
        self._report_times(plan, probe, placed_s)

    def _job(self, step: Step) -> LeafJob:
        """The job for one step, reusing (or reading from) a speculative buffer if there is one."""
        source, speculation = self._started()
        info = source.info(step.file_key)
        where = str(source.file_of(info.name))
        if step.file_key in speculation.errors:
            raise reader_error(f"{where}: tensor {info.name!r}", speculation.errors[step.file_key])
        spec = speculation.take(step.file_key)
        buffer = spec.buffer if spec else None
        filled = bool(spec and spec.filled)
        data = MemoryBytes(spec.buffer) if spec and spec.filled else self._file_bytes(info)
        view = job_view(step, info)
        if step.layer is not None and is_adoptable(step, view):  # a layer of a stacked leaf
            return self._layer_job(step, info, data, where, view, counted=bool(spec))
        if self._stager is not None and view is None and is_adoptable(step, view):
            return self._stager.job(step, info, data, where)
        if is_adoptable(step, view):
            pieces, reused = adopt_pieces(step, None if view else buffer)
            job = LeafJob(step, info, "adopt", data, pieces, source_file=where, view=view)
            if reused:
                self.budget.release(info.nbytes)  # the speculative buffer is the model's own now
            elif spec:
                job.counted_bytes = info.nbytes  # a source to cast or slice from; freed at finish
        else:
            job = LeafJob(step, info, "stage", data, [stage_piece(info, buffer)], source_file=where)
            job.counted_bytes = info.nbytes if spec else 0
            job.acquire_bytes = 0 if spec else info.nbytes
            reused = spec is not None
        job.pending = 0 if (reused and filled) else len(split_parts(job))
        return job

    def _layer_job(
        self,
        step: Step,
        info: TensorInfo,
        data: Bytes,
        where: str,
        view: View | None,
        counted: bool,
    ) -> LeafJob:
        """An adopt job into its layer's slices of the stacked leaf's buffers (`stacked`)."""
        assert step.layer is not None
        group = step.layer.group
        if id(group) not in self._stacks:
            self._stacks[id(group)] = StackBuffers.allocate(group)
        pieces = self._stacks[id(group)].layer_pieces(step.layer.index)
        job = LeafJob(step, info, "adopt", data, pieces, source_file=where, view=view)
        job.counted_bytes = info.nbytes if counted else 0  # a speculative read: a source only
        job.pending = len(split_parts(job))
        return job

    def _finish(self, job: LeafJob, plan: LoadPlan) -> float:
        t0 = time.perf_counter()
        if job.step.layer is not None and job.kind == "adopt":  # read into the stacked leaf
            self._stacks[id(job.step.layer.group)].layer_done()
        elif job.kind == STAGED and self._stager is not None:
            self._stager.finish(job, plan)  # type: ignore[arg-type]  # a StagedJob
        else:
            finish(job, plan)
        job.pieces.clear()
        job.source = None
        if job.counted_bytes:
            self.budget.release(job.counted_bytes)
        return time.perf_counter() - t0

    def _report_times(self, plan: LoadPlan, probe: Probe, placed_s: float) -> None:
        self.stats.inflight_peak_bytes = self.budget.high_water_bytes
        plan.report.inflight_peak_bytes = self.stats.inflight_peak_bytes
        if self._stager is not None:
            self._stager.report(plan.report)
            placed_s += self._stager.transfer_s
        probe.add_time(READ, self.stats.read_s)
        probe.add_time(CAST, self.stats.cast_s)
        probe.add_time(TRANSFER, placed_s)

    # -- close: always ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop and join every reader thread, close the files, and drop unused speculative reads."""
        self._cancelled.set()
        if self._spec is not None:
            self._spec.stop()
        self.budget.cancel()
        for _ in self._workers:
            self._parts.put(None)
        for t in self._workers:
            t.join()
        self._workers.clear()
        self.stats.inflight_peak_bytes = self.budget.high_water_bytes
        if self._stager is not None:
            self._stager.ring.drain()
        if self._spec is not None:
            self.stats.speculative_bytes = self._spec.bytes
            self._spec.clear()
        close_files(self._fds, self.cache_policy)
        self._phase.close()
