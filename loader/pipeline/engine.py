"""The pipelined executor: reader threads that start before the build and fill leaves as they go.

Life of a load (`start` before the model is built, `fill` after the plan check, `close` always):

1. `start(source, probe)`: reader threads begin at once, needing only the headers, and read
   speculatively while the model is built (`loader.pipeline.speculation`: whole tensors in file
   order, interleaved across shard files, within the budget; with `strict=True`, nothing read).
2. `fill(plan, source, probe)`: speculation stops; the page-cache policy says, once, which tensors
   to drop behind the readers (`loader.pipeline.cache_fit`); each step becomes a job
   (`loader.pipeline.jobs.Job`), by the way its leaf travels:
   - an `AdoptJob`: read into buffers its devices adopt, straight (same dtype) or through a
     reused per-thread scratch buffer cast chunk by chunk (`loader.pipeline.regions`; its size:
     `budget.scratch_bytes`), or through the strided view of a declared transform
     (`loader.pipeline.views`); a speculative buffer of the right dtype and placement is adopted
     as is, otherwise it is the source of a cast or slice copy;
   - a `HostCopyJob`: the whole tensor copied into a host buffer, then made the leaf's value;
   - a `LayerJob` (a layer of a stacked leaf, `loader.Stack`): an `AdoptJob` into the layer's
     slices of the stacked leaf's buffers (`loader.pipeline.stacked`);
   - a `RingJob` (a backend that does not adopt host buffers, or `staging=True`; nothing is read
     speculatively then): chunks through the staging ring onto the devices
     (`loader.pipeline.ring_job`).
   The jobs' parts are queued in file order (`loader.pipeline.order`, which also merges runs of
   small adjacent tensors into one read; from a URL, the leaves cut from one fused tensor read
   its rows once for all of them, `loader.pipeline.fused`) and read by the threads; the main
   thread finishes each job (places and assigns its leaf) as soon as its parts are done.
3. `close()`: cancels what is left and joins every thread, error or not.

An exception in a reader thread stops the load: it is raised on the main thread as
`CheckpointError` naming the file and tensor, after every thread has been joined.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter
from typing import Any

import numpy as np

from loader.errors import CheckpointError
from loader.format import TensorInfo
from loader.format.buffers import aligned
from loader.format.source import CheckpointSource
from loader.phases import CAST, READ, STREAM, TRANSFER, Probe
from loader.pipeline import cache_fit
from loader.pipeline.budget import ByteBudget, check_budget, scratch_bytes
from loader.pipeline.fused import fuse
from loader.pipeline.jobs import (
    AdoptJob,
    HostCopyJob,
    Job,
    Work,
    host_bytes,
    is_adoptable,
    job_view,
)
from loader.pipeline.options import (
    PipelineOptions,
    PipelineStats,
    close_files,
    file_threads,
    open_files,
    reader_error,
    warm_threads,
)
from loader.pipeline.order import coalesce, file_order, part_order
from loader.pipeline.regions import FileBytes, MemoryBytes
from loader.pipeline.ring import Transfer
from loader.pipeline.ring_job import RingJob, ring_sender
from loader.pipeline.speculation import Speculation
from loader.pipeline.stacked import LayerJob, StackBuffers
from loader.planning.plan import LoadPlan, Stacked, Step
from loader.remote import FileSource
from loader.remote.ranges import RemoteBytes
from loader.remote.source import RemoteSource

__all__ = ["Pipeline", "PipelineStats"]

#: A remote request fetches at least this much, however small the budget over the threads.
REMOTE_MIN_CHUNK = 64 << 10


class Pipeline:
    """Executor of a load: `start` before the build, `fill` after the plan check, then `close`.

    Args:
        options: the budget, the staging ring, reader threads and page-cache policy
            (`loader.pipeline.options.PipelineOptions`, checked when made).
        strict: read nothing before `fill` (the plan check has passed by then).
        transfer: the host -> device copy of a ring chunk (default: `loader.pipeline.ring`'s own).

    Example:
        >>> recipe = Recipe(lambda: Pipeline(PipelineOptions(threads=2)))  # loader.sequence
    """

    def __init__(
        self,
        options: PipelineOptions | None = None,
        *,
        strict: bool = False,
        transfer: Transfer | None = None,
    ) -> None:
        self.options = options = options or PipelineOptions()
        self.threads = options.threads or warm_threads()
        limit = check_budget(options.budget, self.threads)
        self.scratch_bytes = scratch_bytes(limit, self.threads)
        self._sender = ring_sender(options.staging, limit, self.threads, transfer)
        ring_bytes = self._sender.ring.nbytes if self._sender else 0
        reserved = self.scratch_bytes * self.threads + ring_bytes
        self.budget = ByteBudget(limit, reserved_bytes=reserved)
        self.strict = strict
        self.stats = PipelineStats(budget_bytes=limit, threads=self.threads)
        self._lock = threading.Lock()
        self._spec: Speculation | None = None
        self._work: queue.Queue[Work | None] = queue.Queue()
        self._pending: Counter[Job[Any]] = Counter()  # parts still to read, per job
        self._done: queue.Queue[Job[Any] | CheckpointError] = queue.Queue()
        self._cancelled = threading.Event()
        self._workers: list[threading.Thread] = []
        self._fds: dict[str, int] = {}
        self._dropped: set[str] = set()  # tensors dropped from the page cache once read
        self._source: FileSource | None = None
        self._stacks: dict[int, StackBuffers] = {}  # id(Stacked) -> its buffers
        self._phase = contextlib.ExitStack()

    # -- start: before the build ----------------------------------------------------------------
    def start(self, source: FileSource, probe: Probe) -> None:
        """Open the files and start the reader threads (speculating while the model is built)."""
        self._source = source
        self._phase.enter_context(probe.phase(STREAM))
        if isinstance(source, RemoteSource):
            self._start_remote(source)
            return
        self._fds = open_files(source.files)
        self._size_threads()
        cache_fit.read_ahead(self._fds.values(), self.options.cache_policy, source.total_bytes)
        if self._sender is None:  # no scratch beyond its share of this checkpoint
            limit = self.budget.limit_bytes
            self.scratch_bytes = scratch_bytes(limit, self.threads, source.total_bytes)
            self.budget.reserve(self.scratch_bytes * self.threads)
        order = file_order([source.info(k) for k in source.keys()], source.file_of)
        order = [] if self._sender else order  # the ring path: no read before the device check
        self._dropped = cache_fit.dropped_tensors(self.options.cache_policy, order, 0, None)
        self._start_threads(order)

    def _start_remote(self, source: RemoteSource) -> None:
        """A URL (`loader.remote`): no file to open or page cache to mind; each reader thread has
        one range request in flight, its answer (one chunk) held in the budget until copied."""
        limit, threads = self.budget.limit_bytes, self.threads
        chunk = min(source.reader.chunk_bytes, max(REMOTE_MIN_CHUNK, limit // (4 * threads)))
        source.reader.chunk_bytes = chunk // REMOTE_MIN_CHUNK * REMOTE_MIN_CHUNK
        if self._sender is None:
            self.scratch_bytes = scratch_bytes(limit, threads, source.total_bytes)
        ring = self._sender.ring.nbytes if self._sender else 0
        self.budget.reserve((self.scratch_bytes + source.reader.chunk_bytes) * threads + ring)
        order = file_order([source.info(k) for k in source.keys()], source.file_of)
        self._start_threads([] if self._sender else order)

    def _start_threads(self, order: list[TensorInfo]) -> None:
        self._spec = Speculation(order, self.budget, strict=self.strict)
        for i in range(self.threads):
            t = threading.Thread(target=self._run, name=f"loader-pipeline-{i}", daemon=True)
            self._workers.append(t)
            t.start()

    def _size_threads(self) -> None:
        """More readers where the files are cold (a cold read waits on the disk): counted from the
        open files before the read-ahead hint, which may cache a small file whole. Only when
        `threads=` was not given, and not on the ring path (its ring is sized for the count)."""
        if self.options.threads is not None or self._sender is not None:
            return
        n = file_threads(list(self._fds.values()))
        if n > self.threads and self.budget.limit_bytes >= 8192 * n:
            self.threads = self.stats.threads = n

    def _started(self) -> tuple[FileSource, Speculation]:
        """The source and speculation that `start` set up; a clear error if it was not called."""
        if self._source is None or self._spec is None:
            raise RuntimeError("Pipeline: call start(source, probe) before fill(plan, ...)")
        return self._source, self._spec

    def _run(self) -> None:
        scratch = aligned((self.scratch_bytes,), np.uint8)
        self._started()[1].run(self._file_bytes)
        while (work := self._work.get()) is not None:
            if self._cancelled.is_set():
                continue
            try:
                seconds = work.read(scratch)
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the main thread
                self._cancelled.set()
                self.budget.cancel()
                self._done.put(reader_error(work.where, exc))
                continue
            self._parts_done(work, seconds)

    def _file_bytes(self, info: TensorInfo) -> FileBytes | RemoteBytes:
        source = self._started()[0]
        if isinstance(source, RemoteSource):
            return source.tensor_bytes(info.name)
        f = str(source.file_of(info.name))
        start = source.file_offset(info.name)
        drop = info.name in self._dropped  # (tensors dropped from the page cache once read)
        return FileBytes(self._fds[f], start, where=f"{f}: tensor {info.name!r}", drop=drop)

    def _parts_done(self, work: Work, seconds: float) -> None:
        """Count a read's (or cast's) time; a job whose last part it was goes to the main thread."""
        with self._lock:
            if work.casts:
                self.stats.cast_s += seconds
            else:
                self.stats.read_s += seconds
            self._pending.subtract(work.jobs)
            last = [job for job in work.jobs if self._pending[job] == 0]
        for job in last:
            self._done.put(job)

    # -- fill: after the plan check -------------------------------------------------------------
    def fill(self, plan: LoadPlan, source: FileSource, probe: Probe) -> None:
        """Read what the plan needs and give every planned leaf its value."""
        speculation = self._started()[1]
        speculation.stop(len(self._workers))
        if isinstance(source, CheckpointSource):  # (a URL leaves no page cache behind)
            self._dropped = self._drops(plan, source, speculation)
        jobs = [self._job(step) for step in plan.steps]
        runs, rest = coalesce(jobs)
        self.stats.coalesced = sum(len(r.jobs) for r in runs)
        fused: list[Work] = []
        if isinstance(source, RemoteSource):  # (a local file's rows read again: cache hits)
            fused, rest = fuse(rest, self.scratch_bytes)
        queued: list[Work] = [*runs, *fused, *part_order(rest)]
        self._pending = Counter(job for work in queued for job in work.jobs)
        ready = [job for job in jobs if not self._pending[job]]
        for work in queued:
            self._work.put(work)
        placed_s = sum(self._finish(job, plan) for job in ready)
        for _ in range(len(jobs) - len(ready)):
            done = self._done.get()
            if isinstance(done, CheckpointError):
                self.close()
                raise done
            placed_s += self._finish(done, plan)
        self._report_times(plan, probe, placed_s)

    def _drops(self, plan: LoadPlan, source: CheckpointSource, spec: Speculation) -> set[str]:
        """The page-cache policy's one say in a fill (`cache_fit.drops`): the tensors the steps
        read, in the readers' order, less those read before the plan (left cached: counted as
        kept beside the model's host bytes)."""
        keys = {step.file_key for step in plan.steps}
        read = keys & spec.filled()
        order = file_order([source.info(k) for k in keys - read], source.file_of)
        kept = sum(source.info(k).nbytes for k in read)
        model = sum(host_bytes(step) for step in plan.steps)
        return cache_fit.drops(self.options.cache_policy, order, model + kept)

    def _job(self, step: Step) -> Job[Any]:
        """The job of one step, by the way its leaf travels; reusing (or reading from) its
        speculative buffer if there is one."""
        source, speculation = self._started()
        info = source.info(step.file_key)
        file = str(source.file_of(info.name))
        if step.file_key in speculation.errors:
            raise reader_error(f"{file}: tensor {info.name!r}", speculation.errors[step.file_key])
        spec = speculation.take(step.file_key)
        data = MemoryBytes(spec.buffer) if spec and spec.filled else self._file_bytes(info)
        view = job_view(step, info)
        if not is_adoptable(step, view):
            return HostCopyJob.start(step, info, data, file, self.budget, spec=spec)
        if step.layer is not None:  # a layer of a stacked leaf, into its slices of the leaf
            stack = self._stack_buffers(step.layer.group)
            return LayerJob.of_layer(
                step, info, data, file, self.budget, stack, view=view, spec=spec
            )
        if self._sender is not None:  # the ring path (nothing speculated on it)
            block = view.permuted_block() if view is not None else None
            if view is None or block is not None:  # a transposed block: on the device
                return RingJob.start(
                    step,
                    info,
                    data,
                    file,
                    self._sender,
                    block=block,
                    scratch_bytes=self.scratch_bytes,
                )
        return AdoptJob.start(step, info, data, file, self.budget, view=view, spec=spec)

    def _stack_buffers(self, group: Stacked) -> StackBuffers:
        """The buffers of a stacked leaf, allocated for its first layer's job."""
        if id(group) not in self._stacks:
            self._stacks[id(group)] = StackBuffers.allocate(group)
        return self._stacks[id(group)]

    def _finish(self, job: Job[Any], plan: LoadPlan) -> float:
        t0 = time.perf_counter()
        job.finish(plan)
        return time.perf_counter() - t0

    def _report_times(self, plan: LoadPlan, probe: Probe, placed_s: float) -> None:
        self.stats.inflight_peak_bytes = self.budget.high_water_bytes
        plan.report.inflight_peak_bytes = self.stats.inflight_peak_bytes
        if self._sender is not None:
            self._sender.report(plan.report)
            placed_s += self._sender.transfer_s
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
            self._work.put(None)
        for t in self._workers:
            t.join()
        self._workers.clear()
        self.stats.inflight_peak_bytes = self.budget.high_water_bytes
        if self._sender is not None:
            self._sender.drain()
        if self._spec is not None:
            self.stats.speculative_bytes = self._spec.bytes
            self._spec.clear()
        close_files(self._fds, self.options.cache_policy)
        self._phase.close()
