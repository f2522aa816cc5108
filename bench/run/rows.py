"""Turning child outcomes into schema records: phase rows, the summed row of a group, samples.

A child that measured (ok or wrong) gives one row per phase plus a `total` row; a child that did
not (crashed, timeout, oom, skipped) gives one `total` row carrying its status and error. A
multi-process run adds summed rows (process_index -1): peaks and RSS add up across processes
(each process's own peak; their sum bounds the host's), times take the slowest process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bench.records.schema import PhaseRecord, SampleRecord
from bench.records.wire import Measurement, PhaseMeasure
from bench.run.children import ChildOutcome
from loader.vocabulary import OK, STATUS_SEVERITY, TOTAL, WRONG

Record = PhaseRecord | SampleRecord


@dataclass(frozen=True)
class RowContext:
    """What every row of one result shares."""

    run_id: str
    result_id: str
    shapes: str
    strategy: str
    kind: str  # the strategy's kind (loader.vocabulary.KINDS)
    dtype: str
    devices: int
    processes: int
    repeat: int
    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int
    memray_html: str | None = None
    memray_top: str | None = None
    model_dtype: str | None = None
    budget_bytes: int | None = None
    situation: dict[str, Any] = field(default_factory=dict)  # PhaseRecord's cache/limit fields


def _phase_row(
    ctx: RowContext,
    index: int,
    status: str,
    error: str | None,
    measured: Measurement | None = None,
    phase: PhaseMeasure | None = None,
) -> PhaseRecord:
    """One row; without a measurement, the `total` row of a result that has none."""
    return PhaseRecord(
        run_id=ctx.run_id,
        result_id=ctx.result_id,
        shapes=ctx.shapes,
        strategy=ctx.strategy,
        kind=ctx.kind,
        dtype=ctx.dtype,
        devices=ctx.devices,
        processes=ctx.processes,
        process_index=index,
        repeat=ctx.repeat,
        status=status,
        error=error,
        checkpoint_bytes=ctx.checkpoint_bytes,
        largest_tensor_bytes=ctx.largest_tensor_bytes,
        tensors=ctx.tensors,
        baseline_rss_bytes=measured and measured.baseline_rss_bytes,
        peak_rss_bytes=measured and measured.total.peak_rss_bytes,
        wall_s=measured and measured.total.wall_s,
        phase=phase.name if phase else TOTAL,
        phase_order=phase.order if phase else 0,
        phase_wall_s=phase and phase.wall_s,
        phase_peak_rss_bytes=phase and phase.peak_rss_bytes,
        phase_end_rss_bytes=phase and phase.end_rss_bytes,
        phase_anon_rss_bytes=phase and phase.anon_rss_bytes,
        phase_file_rss_bytes=phase and phase.file_rss_bytes,
        peak_source=measured and measured.peak_source,
        substeps_s=dict(phase.substeps_s) if phase else {},
        memray_html=ctx.memray_html,
        memray_top=ctx.memray_top,
        model_dtype=ctx.model_dtype,
        budget_bytes=ctx.budget_bytes,
        inflight_peak_bytes=measured and measured.inflight_peak_bytes,
        phase_overlaps=list(phase.overlaps) if phase else [],
        phase_device_bytes_in_use=phase and phase.device_bytes_in_use,
        phase_device_peak_bytes=phase and phase.device_peak_bytes_in_use,
        **device_fields(measured, phase),
        **ctx.situation,
    )


def device_fields(measured: Measurement | None, phase: PhaseMeasure | None) -> dict[str, Any]:
    """The per-device row fields: memory at the phase end, the run's device peak, the bytes each
    device received against its shards (and which received more), the staging memory."""
    if measured is None or phase is None:
        return {}
    peaks = measured.total.device_peak_bytes_by_device
    total_peak = measured.total.device_peak_bytes_in_use
    received, expected = measured.device_received_bytes, measured.device_expected_bytes
    return {
        "phase_device_bytes_in_use_by_device": dict(phase.device_bytes_in_use_by_device),
        "phase_device_peak_bytes_by_device": dict(phase.device_peak_bytes_by_device),
        "device_peak_bytes": max(peaks.values()) if peaks else total_peak,
        "device_received_bytes": dict(received),
        "device_expected_bytes": dict(expected),
        "device_overreceived": sorted(d for d, n in received.items() if n > expected.get(d, 0)),
        "staging_memory": measured.staging_memory,
    }


def failed_row(
    ctx: RowContext, status: str, error: str | None, index: int = 0, oom_kind: str | None = None
) -> PhaseRecord:
    """The one `total` row of a result that has no measurements."""
    return replace(_phase_row(ctx, index, status, error), oom_kind=oom_kind)


def process_rows(ctx: RowContext, index: int, outcome: ChildOutcome) -> list[PhaseRecord]:
    """The rows of one process: every phase and `total`, or one failed `total` row."""
    measured = outcome.result.measurement if outcome.result else None
    if outcome.status not in (OK, WRONG) or measured is None:
        kind = outcome.result.oom_kind if outcome.result else None
        return [failed_row(ctx, outcome.status, outcome.error, index, kind)]
    phases = [*measured.phases, measured.total]
    return [_phase_row(ctx, index, outcome.status, outcome.error, measured, p) for p in phases]


def _sum(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


def summed_rows(ctx: RowContext, per_process: list[list[PhaseRecord]]) -> list[PhaseRecord]:
    """The process_index -1 rows of a multi-process result (one per phase all processes have)."""
    firsts = [rows[0] for rows in per_process]
    status = max((r.status for r in firsts), key=STATUS_SEVERITY.__getitem__)
    error = next((r.error for r in firsts if r.error), None)
    if status not in (OK, WRONG):
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
                phase_wall_s=max(walls) if walls else None,
                phase_peak_rss_bytes=_sum([r.phase_peak_rss_bytes for r in rows]),
                phase_end_rss_bytes=_sum([r.phase_end_rss_bytes for r in rows]),
                phase_anon_rss_bytes=_sum([r.phase_anon_rss_bytes for r in rows]),
                phase_file_rss_bytes=_sum([r.phase_file_rss_bytes for r in rows]),
                phase_device_bytes_in_use=_sum([r.phase_device_bytes_in_use for r in rows]),
                phase_device_peak_bytes=_sum([r.phase_device_peak_bytes for r in rows]),
            )
        )
    return out


def sample_rows(ctx: RowContext, index: int, outcome: ChildOutcome) -> list[SampleRecord]:
    """The RSS timeline of one process."""
    measured = outcome.result.measurement if outcome.result else None
    return [
        SampleRecord(
            ctx.run_id, ctx.result_id, index, s.t_s, s.phase, s.rss_anon_bytes, s.rss_file_bytes
        )
        for s in (measured.samples if measured else ())
    ]


def _process_index(outcome: ChildOutcome, position: int) -> int:
    backend = outcome.result.backend if outcome.result else None
    return backend.process_index if backend else position


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
    return records
