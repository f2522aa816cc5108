"""Turning child outcomes into schema records: phase rows, the summed row of a group, samples.

A child that measured (ok or wrong) gives one row per phase plus a `total` row; a child that did
not (crashed, timeout, oom, skipped) gives one `total` row carrying its status and error. A
multi-process run adds summed rows (process_index -1): peaks and RSS add up across processes
(each process's own peak; their sum bounds the host's), times take the slowest process, and a
remote load's requests and bytes add up (the aggregate received over the slowest wall).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bench.limits.situation import Situation
from bench.link import UNSHAPED
from bench.link.shaping import Link
from bench.records.schema import PhaseRecord, SampleRecord
from bench.records.wire import Measurement, PhaseMeasure
from bench.run.children import ChildOutcome
from bench.run.matrix import Task
from bench.vocabulary import NATIVE
from loader.vocabulary import ERROR, OK, STATUS_SEVERITY, TOTAL, WRONG

Record = PhaseRecord | SampleRecord
MEASURED = (OK, WRONG, ERROR)  # statuses of a child that measured its load (ERROR: a compile)


@dataclass(frozen=True)
class RowContext:
    """What every row of one result shares: the task it ran, its links to the strategy's memray
    capture, and the situation it ran in."""

    run_id: str
    result_id: str
    task: Task
    situation: Situation
    memray_html: str | None = None
    memray_top: str | None = None
    ceiling_s: float | None = None  # the machine's ceiling for this situation (bench.run.ceiling)
    ceiling_probe_id: str | None = None


#: the fields a result without measurements leaves empty
UNMEASURED: dict[str, Any] = dict.fromkeys(
    (
        "baseline_rss_bytes",
        "peak_rss_bytes",
        "wall_s",
        "phase_wall_s",
        "phase_peak_rss_bytes",
        "phase_end_rss_bytes",
        "phase_anon_rss_bytes",
        "phase_file_rss_bytes",
        "peak_source",
    )
)


def _bare_row(ctx: RowContext, index: int, status: str, error: str | None) -> PhaseRecord:
    """The `total` row of a result with no measurements: what it ran, and how it ended."""
    task, ck = ctx.task, ctx.task.checkpoint
    return PhaseRecord(
        run_id=ctx.run_id,
        result_id=ctx.result_id,
        shapes=ck.shapes,
        strategy=task.entry.name,
        kind=task.entry.kind,
        dtype=ck.dtype or NATIVE,
        devices=task.devices,
        processes=task.processes,
        process_index=index,
        repeat=task.repeat,
        status=status,
        error=error,
        checkpoint_bytes=ck.checkpoint_bytes,
        largest_tensor_bytes=ck.largest_tensor_bytes,
        tensors=ck.tensors,
        small_tensor_bytes=ck.small_tensor_bytes,
        phase=TOTAL,
        phase_order=0,
        **UNMEASURED,
        memray_html=ctx.memray_html,
        memray_top=ctx.memray_top,
        ceiling_s=_link_ceiling(task, ck.checkpoint_bytes) or ctx.ceiling_s,
        ceiling_probe_id=f"link:{task.link}" if _link_ceiling(task, 1) else ctx.ceiling_probe_id,
        model_dtype=task.model_dtype,
        budget_bytes=task.budget_bytes,
        model=task.model,
        threads=task.threads,
        cache_policy=task.cache_policy,
        source=task.source,
        link=task.link,
        concurrency=task.concurrency,
    )


def _link_ceiling(task: Task, nbytes: int) -> float | None:
    """A shaped link's ceiling for `nbytes`: bytes over its bandwidth (None: no shaped link)."""
    if task.link is None or task.link == UNSHAPED:
        return None
    return Link.parse(task.link).ceiling_s(nbytes)


def _remote_fields(row: PhaseRecord, measured: Measurement) -> PhaseRecord:
    """`row` with a remote load's requests and bytes, and the concurrency it ran with."""
    remote = measured.remote
    if not remote:
        return row
    return replace(
        row,
        concurrency=remote["concurrency"],
        requests=remote["requests"],
        bytes_requested=remote["bytes_requested"],
        bytes_received=remote["bytes_received"],
        header_bytes=remote.get("header_bytes"),
        share_bytes=remote.get("share_bytes"),
    )


def _measured_row(row: PhaseRecord, measured: Measurement, phase: PhaseMeasure) -> PhaseRecord:
    """`row` with one phase of a measurement (and the whole run's figures)."""
    return replace(
        _remote_fields(row, measured),
        baseline_rss_bytes=measured.baseline_rss_bytes,
        peak_rss_bytes=measured.total.peak_rss_bytes,
        wall_s=measured.total.wall_s,
        cpu_s=measured.total.cpu_s,
        phase_cpu_s=phase.cpu_s,
        peak_source=measured.peak_source,
        inflight_peak_bytes=measured.inflight_peak_bytes,
        heap_retained_bytes=measured.heap_retained_bytes,
        budget_bytes=measured.budget_bytes if measured.budget_bytes else row.budget_bytes,
        phase=phase.name,
        phase_order=phase.order,
        phase_wall_s=phase.wall_s,
        phase_peak_rss_bytes=phase.peak_rss_bytes,
        phase_end_rss_bytes=phase.end_rss_bytes,
        phase_anon_rss_bytes=phase.anon_rss_bytes,
        phase_file_rss_bytes=phase.file_rss_bytes,
        substeps_s=dict(phase.substeps_s),
        phase_overlaps=list(phase.overlaps),
        phase_start_s=phase.start_s,
        phase_end_s=phase.end_s,
        phase_device_bytes_in_use=phase.device_bytes_in_use,
        phase_device_peak_bytes=phase.device_peak_bytes_in_use,
        load_s=measured.load_s,  # `--compile`'s figures, on every row of the result
        ready_s=measured.ready_s,
        compile_cache=measured.compile_cache,
        compile_start_rss_bytes=measured.compile_start_rss_bytes,
        **device_fields(measured, phase),
    )


def device_fields(measured: Measurement, phase: PhaseMeasure) -> dict[str, Any]:
    """The per-device row fields: memory at the phase end, the run's device peak, the bytes each
    device received against its shards (and which received more), the staging memory."""
    peaks = measured.total.device_peak_bytes_by_device
    received, expected = measured.device_received_bytes, measured.device_expected_bytes
    return {
        "phase_device_bytes_in_use_by_device": dict(phase.device_bytes_in_use_by_device),
        "phase_device_peak_bytes_by_device": dict(phase.device_peak_bytes_by_device),
        "device_peak_bytes": max(peaks.values())
        if peaks
        else measured.total.device_peak_bytes_in_use,
        "device_received_bytes": dict(received),
        "device_expected_bytes": dict(expected),
        "device_overreceived": sorted(d for d, n in received.items() if n > expected.get(d, 0)),
        "staging_memory": measured.staging_memory,
    }


def failed_row(ctx: RowContext, status: str, error: str | None, index: int = 0) -> PhaseRecord:
    """The one `total` row of a result that has no measurements."""
    return replace(_bare_row(ctx, index, status, error), **ctx.situation.row_fields())


def process_rows(ctx: RowContext, index: int, outcome: ChildOutcome) -> list[PhaseRecord]:
    """The rows of one process: every phase and `total`, or one failed `total` row."""
    measured = outcome.result.measurement if outcome.result else None
    backend = outcome.result.backend if outcome.result else None
    row = replace(
        failed_row(ctx, outcome.status, outcome.error, index),
        backend=backend.platform if backend else None,
    )
    if outcome.status not in MEASURED or measured is None:
        kind = outcome.result.oom_kind if outcome.result else None  # "device": a device OOM
        return [replace(row, oom_kind=kind)]
    return [_measured_row(row, measured, p) for p in [*measured.phases, measured.total]]


def _extreme(pick: Any, values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def _sum(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


def summed_rows(ctx: RowContext, per_process: list[list[PhaseRecord]]) -> list[PhaseRecord]:
    """The process_index -1 rows of a multi-process result (one per phase all processes have)."""
    firsts = [rows[0] for rows in per_process]
    status = max((r.status for r in firsts), key=STATUS_SEVERITY.__getitem__)
    error = next((r.error for r in firsts if r.error), None)
    if status not in MEASURED:
        return [failed_row(ctx, status, error, -1)]
    by_phase = [{r.phase: r for r in rows} for rows in per_process]
    common = [r.phase for r in per_process[0] if all(r.phase in m for m in by_phase)]
    out = []
    for name in common:
        rows = [m[name] for m in by_phase]
        walls = [r.phase_wall_s for r in rows if r.phase_wall_s is not None]
        out.append(
            replace(
                rows[0],
                process_index=-1,
                status=status,
                error=error,
                baseline_rss_bytes=_sum([r.baseline_rss_bytes for r in rows]),
                peak_rss_bytes=_sum([r.peak_rss_bytes for r in rows]),
                wall_s=max((r.wall_s or 0.0) for r in rows),
                cpu_s=_sum([r.cpu_s for r in rows]),
                phase_cpu_s=_sum([r.phase_cpu_s for r in rows]),
                phase_wall_s=max(walls) if walls else None,
                phase_peak_rss_bytes=_sum([r.phase_peak_rss_bytes for r in rows]),
                phase_end_rss_bytes=_sum([r.phase_end_rss_bytes for r in rows]),
                phase_anon_rss_bytes=_sum([r.phase_anon_rss_bytes for r in rows]),
                phase_file_rss_bytes=_sum([r.phase_file_rss_bytes for r in rows]),
                phase_device_bytes_in_use=_sum([r.phase_device_bytes_in_use for r in rows]),
                phase_device_peak_bytes=_sum([r.phase_device_peak_bytes for r in rows]),
                phase_start_s=_extreme(min, [r.phase_start_s for r in rows]),
                phase_end_s=_extreme(max, [r.phase_end_s for r in rows]),
                requests=_sum([r.requests for r in rows]),
                bytes_requested=_sum([r.bytes_requested for r in rows]),
                bytes_received=_sum([r.bytes_received for r in rows]),
                header_bytes=_sum([r.header_bytes for r in rows]),
                share_bytes=_sum([r.share_bytes for r in rows]),
            )
        )
    return out


def sample_rows(ctx: RowContext, index: int, outcome: ChildOutcome) -> list[SampleRecord]:
    """The RSS timeline of one process."""
    measured = outcome.result.measurement if outcome.result else None
    return [
        SampleRecord(
            run_id=ctx.run_id,
            result_id=ctx.result_id,
            process_index=index,
            t_s=s.t_s,
            phase=s.phase,
            rss_anon_bytes=s.rss_anon_bytes,
            rss_file_bytes=s.rss_file_bytes,
        )
        for s in (measured.samples if measured else ())
    ]


def _process_index(outcome: ChildOutcome, position: int) -> int:
    backend = outcome.result.backend if outcome.result else None
    return backend.process_index if backend else position


def with_ceiling_ratio(record: Record) -> Record:
    """A phase row with `ceiling_ratio` = wall_s / ceiling_s where it has both."""
    if not isinstance(record, PhaseRecord) or not record.ceiling_s or record.wall_s is None:
        return record
    return replace(record, ceiling_ratio=record.wall_s / record.ceiling_s)


def result_records(ctx: RowContext, outcomes: list[ChildOutcome]) -> list[Record]:
    """Every record of one result: per-process rows, the summed rows if several, samples."""
    single = len(outcomes) == 1
    indices = [0 if single else _process_index(o, i) for i, o in enumerate(outcomes)]
    per_process = [process_rows(ctx, i, o) for i, o in zip(indices, outcomes, strict=True)]
    records: list[Record] = [r for rows in per_process for r in rows]
    if not single:
        records += summed_rows(ctx, per_process)
    for i, outcome in zip(indices, outcomes, strict=True):
        records += sample_rows(ctx, i, outcome)
    return [with_ceiling_ratio(r) for r in records]
