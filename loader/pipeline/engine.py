"""The pipelined executor: reader threads that start before the build and fill leaves as they go.

Life of a load (`start` before the model is built, `fill` after the plan check, `close` always):

1. `start(source, probe)`: the load's sizes are worked out once, from the options and the byte
   source (`loader.pipeline.sizing.Sizing`: threads, scratch, requests, the staging ring, the
   budget's reserve); then reader threads begin at once, needing only the headers, and read
   speculatively while the model is built (`loader.pipeline.speculation`: whole tensors in file
   order, interleaved across shard files, within the budget, a request at a time where the
   source takes its bytes in file order; with `strict=True`, nothing read). On the staging ring
   nothing is read before the plan, so its readers start in `fill`, and only where a part must
   be read (a chunk sent from mapped pages needs none).
2. `fill(plan, source, probe)`: speculation stops; the byte source is told the plan
   (`ByteSource.plan_reads`: a local one decides its page-cache drops); each step becomes a job
   (`loader.pipeline.jobs.Job`), by the way its leaf travels:
   - an `AdoptJob`: read into buffers its devices adopt, straight (same dtype) or through a
     reused per-thread scratch buffer cast chunk by chunk (`loader.pipeline.regions`), or
     through the strided view of a declared transform (`loader.pipeline.views`); a speculative
     buffer of the right dtype and placement is adopted as is, otherwise it is the source of a
     cast or slice copy;
   - a `HostCopyJob`: the whole tensor copied into a host buffer, then made the leaf's value;
   - a `LayerJob` (a layer of a stacked leaf, `loader.Stack`): an `AdoptJob` into the layer's
     slices of the stacked leaf's buffers (`loader.pipeline.stacked`);
   - a `RingJob` (a backend that does not adopt host buffers, or `staging=True`; nothing is read
     speculatively then): chunks through the staging ring onto the devices
     (`loader.pipeline.ring_job`).
   The jobs' parts are queued in file order (`loader.pipeline.order`, which also merges runs of
   small adjacent tensors into one read; where the source shares rows, the leaves cut from one
   fused tensor read its rows once for all of them, `loader.pipeline.fused`; where the source
   takes each file's bytes in file order, `ByteSource.in_file_order`, every piece of work is one
   request, `Sizing.max_part_bytes`, queued strictly by offset, `order.by_offset`) and read by
   the threads; the main thread finishes each job (places and assigns its leaf) as soon as its
   parts are done.
3. `close()`: cancels what is left and joins every thread, error or not.

The engine reads every byte through its `loader.pipeline.sources.ByteSource` and never asks which
kind it is; nor does it ask a job its kind: what differs between kinds (which parts go straight
from mapped pages, chosen once when a `RingJob` is made; the bytes a part puts on its devices;
whether a run or fused rows may read a job) is a member of `Job` or `Work` that each kind
answers (`tests/unit/test_architecture.py` fails on an `isinstance` of a job, part or work kind
outside the job types). An exception in a reader thread stops the load: it is raised on the
main thread as `CheckpointError` naming the file and tensor, after every thread has been joined.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter
from typing import Any

import numpy as np

from loader.budget import ByteBudget
from loader.errors import CheckpointError
from loader.format.buffers import aligned
from loader.format.file_order import file_order
from loader.options import NO_OPTIONS, Placement, Reading
from loader.phases import CAST, READ, STREAM, TRANSFER, Probe
from loader.pipeline.fused import fuse
from loader.pipeline.job_types import JobTypes
from loader.pipeline.jobs import (
    Job,
    MappedPart,
    MapsChunks,
    Work,
    host_bytes,
    model_bytes_per_device,
    reader_error,
)
from loader.pipeline.mapped_send import batches, send_batch
from loader.pipeline.order import by_offset, coalesce, part_order
from loader.pipeline.ring import RingSender, Transfer, uses_ring
from loader.pipeline.ring_job import (
    cast_shapes,
    programs_before_tail,
    waits_for_program,
    warm_programs,
)
from loader.pipeline.sizing import Sizing
from loader.pipeline.sources import ByteSource
from loader.pipeline.speculation import Speculation
from loader.pipeline.stats import PipelineStats
from loader.planning.plan import LoadPlan

__all__ = ["Pipeline", "PipelineStats", "reader_error"]


class Pipeline:
    """Executor of a load: `start` before the build, `fill` after the plan check, then `close`.

    Args:
        reading: the budget, reader threads and page-cache policy (`loader.options.Reading`,
            checked when made).
        placement: the staging ring (`loader.options.Placement`).
        strict: read nothing before `fill` (the plan check has passed by then).
        transfer: the host -> device copy of a ring chunk (default: `loader.pipeline.ring`'s own).

    Example:
        >>> recipe = Recipe(lambda: Pipeline(Reading(threads=2)), open_source=LocalFiles)
    """

    def __init__(
        self,
        reading: Reading = NO_OPTIONS.reading,
        placement: Placement = NO_OPTIONS.placement,
        *,
        strict: bool = False,
        transfer: Transfer | None = None,
        key_map: object = None,
    ) -> None:
        self.reading, self.placement = reading, placement
        self.strict = strict
        self.key_map = key_map  # only to guess, before the build, which programs to compile
        self.stats = PipelineStats(budget_bytes=reading.value("budget"))
        self._transfer = transfer
        self._lock = threading.Lock()
        self._work: queue.Queue[Work | None] = queue.Queue()  # for the reader threads
        self._pending: Counter[Job[Any]] = Counter()  # parts still to read, per job
        self._done: queue.Queue[Job[Any] | CheckpointError] = queue.Queue()
        self._cancelled = threading.Event()
        self._workers: list[threading.Thread] = []
        self._phase = contextlib.ExitStack()
        # set by `start`, from the source and the sizes worked out there
        self.sizing: Sizing | None = None
        self.budget: ByteBudget | None = None
        self._source: ByteSource | None = None
        self._spec: Speculation | None = None
        self._sender: RingSender | None = None

    # -- start: before the build ----------------------------------------------------------------
    def start(self, source: ByteSource, probe: Probe) -> None:
        """Size the load once, then start the reader threads (speculating while the model is
        built)."""
        self._phase.enter_context(probe.phase(STREAM))
        staged = uses_ring(self.placement.staging)
        self.sizing = sizing = Sizing.of(self.reading, source, staged=staged)
        self.stats.threads = sizing.threads
        self.budget = ByteBudget(sizing.budget_bytes, reserved_bytes=sizing.reserved_bytes)
        if sizing.staged:
            layout = (sizing.ring_slots, sizing.slot_bytes)
            self._sender = RingSender(
                layout,
                sizing.chunk_bytes,
                self.budget,
                self._transfer,
                compile_threads=sizing.compile_threads,
                flight_bytes=sizing.flight_bytes,
            )
        infos = [source.info(k) for k in source.keys()]
        # the read-ahead hint first: its system calls, made while the compile threads below lower
        # their programs in Python, waited for the interpreter's lock (llama3-8b's four files on a
        # TPU v5e host: 0.09 s against 0.005 s alone; docs/results.md, "Seventh session")
        source.begin(sizing.request_bytes)
        if self._sender is not None:  # compiled while the model is built: what its largest
            warm_programs(self._sender, infos, self.key_map)  # tensors are likely to need
        self._source = source
        order = file_order(infos, source.file_of)
        self._spec = Speculation(
            [] if staged else order,  # the ring path: no read before the device check
            self.budget,
            strict=self.strict,
            max_piece_bytes=sizing.max_part_bytes,  # one request, where bytes go in file order
        )
        if not staged:  # on the ring path the readers start in `fill`, and only if needed
            self._start_readers()

    def _start_readers(self) -> None:
        """Start the reader threads (`sizing.threads` of them)."""
        _, _, sizing, _ = self._started()
        for i in range(sizing.threads):
            t = threading.Thread(target=self._run, name=f"loader-pipeline-{i}", daemon=True)
            self._workers.append(t)
            t.start()

    def _started(self) -> tuple[ByteSource, Speculation, Sizing, ByteBudget]:
        """What `start` set up; a clear error if it was not called."""
        if self._source is None or self._spec is None or self.sizing is None or self.budget is None:
            raise RuntimeError("Pipeline: call start(source, probe) before fill(plan, ...)")
        return self._source, self._spec, self.sizing, self.budget

    def _run(self) -> None:
        source, speculation, sizing, _ = self._started()
        scratch = aligned((sizing.scratch_bytes,), np.uint8)
        speculation.run(lambda info: source.tensor_bytes(info.name))
        self._serve(scratch)

    def _serve(self, scratch: np.ndarray) -> None:
        """Read what comes off the work queue until a None; a failure stops the load."""
        while (work := self._work.get()) is not None:
            if self._cancelled.is_set():
                continue
            try:
                seconds = work.read(scratch)
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the main thread
                self._fail(reader_error(work.where, exc))
                continue
            self._parts_done(work, seconds)

    def _send_mapped(self, parts: list[MappedPart]) -> None:
        """Send the chunks that go straight from mapped file pages, a batch per `jax.device_put`
        (`loader.pipeline.mapped_send`); a failure is raised as the tensor's `CheckpointError`."""
        sender = self._sender
        assert sender is not None, "Pipeline: mapped chunks without a ring sender"
        unfolded: dict[MapsChunks, None] = {}  # jobs with chunks arrived but not in their shard
        assembling = False  # the last batch held chunks of leaves assembled on their devices
        for batch in batches(parts, sender.chunk_bytes):
            if self._cancelled.is_set():
                return
            try:
                was_assembling = assembling
                assembling = any(waits_for_program(part.work) for part in batch)
                if was_assembling and not assembling:  # the plain tail (`programs_before_tail`):
                    # the assembled chunks land first (folded after the tail's first batch, as
                    # usual); a tail overlapping them raised llama3-8b's host peak on a TPU v5e
                    # host from 0.68 to 0.75-0.79 GiB, and so did folding them before it
                    sender.flight.drain()
                seconds = send_batch(batch, sender)
                # what completed meanwhile goes into its shard now, not when the leaf is finished
                # (after the last batch, on this thread): device memory holds the shards being
                # assembled and the chunks in flight, not every chunk sent since
                unfolded.update(dict.fromkeys(part.job for part in batch))
                unfolded = {job: None for job in unfolded if not job.fold_arrived()}
            except BaseException as exc:  # noqa: BLE001 - named for the main thread
                where = batch[0].work.where
                if len(batch) > 1:
                    where = f"{where} (or one of the {len(batch) - 1} chunks after it)"
                raise reader_error(where, exc)  # noqa: B904 - it names its cause where it wraps one
            for part in batch:
                self._parts_done(part.work, seconds / len(batch))

    def _start_sender(self, parts: list[MappedPart]) -> None:
        """The one thread that sends the mapped chunks beside the reader threads (a load whose
        other parts are read): not the main thread, which must go on finishing jobs (a host copy's
        budget is given back only then)."""

        def send() -> None:
            try:
                self._send_mapped(parts)
            except CheckpointError as err:
                self._fail(err)

        sender = threading.Thread(target=send, name="loader-pipeline-mapped", daemon=True)
        self._workers.append(sender)
        sender.start()

    def _fail(self, err: CheckpointError) -> None:
        """Stop the load from a worker thread: nothing more is read or admitted, and `err` goes to
        the main thread, which raises it."""
        self._cancelled.set()
        if self.budget is not None:
            self.budget.cancel()
        self._done.put(err)

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
    def fill(self, plan: LoadPlan, source: ByteSource, probe: Probe) -> None:
        """Read what the plan needs and give every planned leaf its value."""
        _, speculation, sizing, budget = self._started()
        speculation.stop(len(self._workers))
        source.plan_reads(
            {step.file_key for step in plan.steps},
            speculation.filled(),
            lambda: sum(host_bytes(step) for step in plan.steps),
        )
        if self._sender is not None:  # before a byte is read: does the model fit its devices?
            self._sender.fit(model_bytes_per_device(plan.steps))
            self._sender.cast_shapes = cast_shapes(plan.steps, source.info)
        types = JobTypes(source, speculation, sizing, budget, self._sender)
        jobs = [types.job(step) for step in plan.steps]
        queued = self._queue_order(jobs, source, sizing)
        self._pending = Counter(job for work in queued for job in work.jobs)
        ready = [job for job in jobs if not self._pending[job]]
        mapped = self._queue_reads(queued)
        others_read = len(mapped) < len(queued)
        # the queue holds the parts now, each until a reader is done with it: a list of them here
        # would keep every part's buffer alive to the end of the load (where a part is not the
        # model's own memory, a quantized layout's file tensor, the host held them all: llama3-8b
        # in FP8 into bfloat16 on the CPU backend, 19.6 GiB over the baseline for 15.0 GiB)
        del queued
        # the main thread finishes leaves while the chunks are sent where others are read, and
        # where a finished part makes a leaf of a quantized layout (its parts then leave the
        # device: sent all first, llama3-8b's FP8 parts and its bfloat16 leaves passed a 16 GiB
        # TPU v5e's memory together)
        if mapped and (others_read or plan.quantized):
            self._start_sender(mapped)
        elif mapped:  # nothing to read: this thread sends them all, then finishes the leaves
            try:
                self._send_mapped(mapped)
            except CheckpointError:
                self.close()
                raise
        placed_s = sum(self._finish(job, plan) for job in ready)
        for _ in range(len(jobs) - len(ready)):
            done = self._done.get()
            if isinstance(done, CheckpointError):
                self.close()
                raise done
            placed_s += self._finish(done, plan)
        self._report_times(plan, probe, placed_s)

    def _queue_reads(self, queued: list[Work]) -> list[MappedPart]:
        """Queue for the reader threads the parts that must be read (starting the readers if
        none runs yet); the chunks that go straight from mapped pages are returned instead."""
        mapped: list[MappedPart] = []
        for work in queued:
            part = work.mapped()
            if part is None:
                self._work.put(work)
            else:
                mapped.append(part)
        if len(mapped) < len(queued) and not self._workers:
            self._start_readers()
        return mapped

    def _queue_order(self, jobs: list[Job[Any]], source: ByteSource, sizing: Sizing) -> list[Work]:
        """The jobs as the work the readers take, in the order they take it: runs of small
        adjacent tensors, fused rows, every other job's parts (`loader.pipeline.order`); strictly
        by offset where the source takes its bytes in file order; parts that wait for a device
        program (compiling meanwhile) after those that do not, but before a tail of them, so that
        the device's peak stays at the model (`programs_before_tail`)."""
        runs, rest = coalesce(jobs, source, sizing.max_part_bytes)
        self.stats.coalesced = sum(len(r.jobs) for r in runs)
        fused: list[Work] = []
        if source.shares_rows:  # (rows read again from a page cache are hits: not grouped)
            fused, rest = fuse(rest, sizing.scratch_bytes, sizing.max_part_bytes)
        work: list[Work] = [*runs, *fused, *part_order(rest)]
        if source.in_file_order:  # the runs between the large tensors, not before them
            work = by_offset(work, source)
        # twice the bytes in flight: the chunks in flight, and as many landed since the last fold
        defer_bytes = self._sender.defer_bytes if self._sender is not None else 0
        return programs_before_tail(work, 2 * sizing.flight_bytes, defer_bytes)

    def _finish(self, job: Job[Any], plan: LoadPlan) -> float:
        t0 = time.perf_counter()
        job.finish(plan)
        return time.perf_counter() - t0

    def _report_times(self, plan: LoadPlan, probe: Probe, placed_s: float) -> None:
        assert self.budget is not None, "Pipeline: reported before start"
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
        """Stop and join every reader thread and drop unused speculative reads (the byte source
        closes its files itself, when the load sequence closes it)."""
        self._cancelled.set()
        if self._spec is not None:
            self._spec.stop()
        if self.budget is not None:
            self.budget.cancel()
        for _ in self._workers:
            self._work.put(None)
        for t in self._workers:
            t.join()
        self._workers.clear()
        if self.budget is not None:
            self.stats.inflight_peak_bytes = self.budget.high_water_bytes
        if self._sender is not None:
            self._sender.drain()
        if self._spec is not None:
            self.stats.speculative_bytes = self._spec.bytes
            self._spec.clear()
        self._phase.close()
