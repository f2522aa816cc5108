"""Turning child outcomes into schema records: phase rows, the summed row of a group, samples.

A child that measured (ok or wrong) gives one row per phase plus a `total` row; a child that did
not (crashed, timeout, oom, skipped) gives one `total` row carrying its status and error. A
multi-process run adds summed rows (process_index -1): peaks and RSS add up across processes
(each process's own peak; their sum bounds the host's), times take the slowest process, and a
remote load's requests and bytes add up (the aggregate received over the slowest wall).

Over a shaped link every row of a result holds the run to one ceiling: the bytes the run needs
across the link over its bandwidth (`link_ceiling`). The processes of a multi-process run load at
once through the same link (one namespace, one veth pair, one token bucket: `bench.link`), so
their ceiling is every process's share plus its headers together, not the checkpoint's bytes
(each process fetches only its own ranges) nor one process's share (which would need a link of
its own).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bench.limits.situation import Situation
from bench.link import UNSHAPED
from bench.link.shaping import Link
from bench.records.schema import PhaseRecord, SampleRecord, option_columns
from bench.records.wire import Measurement, PhaseMeasure
from bench.run.children import ChildOutcome
from bench.run.matrix import Task
from bench.vocabulary import CPU, ERROR, NATIVE, OK, STATUS_SEVERITY, WRONG
from loader.vocabulary import PEER, TOTAL

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
    ceiling_cpu_s: float | None = None  # the C ceiling's CPU-seconds for the checkpoint's bytes
    reference_s: float | None = None  # the moment's reference (bench.run.reference)
    reference_drift: float | None = None
    reference_cpu_s: float | None = None
    others_cpu_fraction: float | None = None
    reference_passes: dict[str, float] | None = None
    reference_prefault: str | None = None  # how the reference passes faulted pages in
    reference_pass: str | None = None  # what they read into: fresh | reused
    device_ceiling_s: float | None = None  # the device ceiling (bench.run.ceiling), its parts
    device_read_s: float | None = None
    device_transfer_s: float | None = None
    first_compile_host_bytes: int | None = None  # the compiler's first use, per the probe


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
    link = _link_ceiling(task, ck.checkpoint_bytes)  # a shaped link's: the machine's do not apply
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
        dequantized_bytes=ck.dequantized_bytes,
        phase=TOTAL,
        phase_order=0,
        **UNMEASURED,
        memray_html=ctx.memray_html,
        memray_top=ctx.memray_top,
        ceiling_s=link or ctx.ceiling_s,
        ceiling_probe_id=f"link:{task.link}" if link is not None else ctx.ceiling_probe_id,
        ceiling_bytes=ck.checkpoint_bytes if link is not None else None,
        ceiling_cpu_s=ctx.ceiling_cpu_s,
        reference_s=link or ctx.reference_s,
        reference_drift=None if link is not None else ctx.reference_drift,
        reference_cpu_s=ctx.reference_cpu_s,
        others_cpu_fraction=ctx.others_cpu_fraction,
        reference_passes=dict(ctx.reference_passes or {}),
        reference_prefault=ctx.reference_prefault,
        reference_pass=None if link is not None else ctx.reference_pass,
        device_ceiling_s=None if link is not None else ctx.device_ceiling_s,
        device_read_s=None if link is not None else ctx.device_read_s,
        device_transfer_s=None if link is not None else ctx.device_transfer_s,
        first_compile_host_bytes=ctx.first_compile_host_bytes,
        model_dtype=task.model_dtype,
        model=task.model,
        source=task.source,
        link=task.link,
        **option_columns(task.options, PhaseRecord),  # as asked (`loader.options.TABLE`)
    )


def _link_ceiling(task: Task, nbytes: int) -> float | None:
    """A shaped link's ceiling for `nbytes`: bytes over its bandwidth (None: no shaped link)."""
    if task.link is None or task.link == UNSHAPED:
        return None
    return Link.parse(task.link).ceiling_s(nbytes)


def needed_bytes(totals: list[PhaseRecord]) -> int | None:
    """The bytes a remote result needs across the link, from its processes' `total` rows: each
    process's share plus the headers it received, added up (None where a process has no share:
    it loaded the whole checkpoint, or failed before it measured).

    Example:
        >>> needed_bytes([replace(row, share_bytes=100, header_bytes=8)] * 2)
        216
    """
    shares = [(r.share_bytes, r.header_bytes) for r in totals]
    if not shares or any(s is None or h is None for s, h in shares):
        return None
    return sum(int(s or 0) + int(h or 0) for s, h in shares)


def link_ceiling(ctx: RowContext, records: list[PhaseRecord]) -> list[PhaseRecord]:
    """`records` (one result's phase rows) held to the link's ceiling for the bytes the run needs
    across it (`needed_bytes` of its processes; the checkpoint's where a load has no share), with
    `ceiling_bytes` saying which; unchanged where the result ran over no shaped link."""
    totals = [r for r in records if r.phase == TOTAL and r.process_index >= 0]
    nbytes = needed_bytes(totals) or ctx.task.checkpoint.checkpoint_bytes
    seconds = _link_ceiling(ctx.task, nbytes)
    if seconds is None:
        return records
    return [
        replace(r, ceiling_s=seconds, ceiling_bytes=nbytes, reference_s=seconds) for r in records
    ]


def _remote_fields(row: PhaseRecord, measured: Measurement) -> PhaseRecord:
    """`row` with a remote load's requests and bytes, and the concurrency it ran with. A peer's
    own client fetches its tensors (runai's S3 streamer): the requests and bytes our reader
    counted are only the headers it planned from, not the load's traffic, so its row records the
    concurrency alone (its bytes and received/s stay empty rather than a header's)."""
    remote = measured.remote
    if not remote:
        return row
    if row.kind == PEER:
        return replace(row, concurrency=remote["concurrency"])
    return replace(
        row,
        concurrency=remote["concurrency"],
        requests=remote["requests"],
        bytes_requested=remote["bytes_requested"],
        bytes_received=remote["bytes_received"],
        header_bytes=remote.get("header_bytes"),
        share_bytes=remote.get("share_bytes"),
        planned_requests=remote.get("planned_requests"),
        planned_bytes=remote.get("planned_bytes"),
        needed_bytes=remote.get("needed_bytes"),
    )


def _measured_row(row: PhaseRecord, measured: Measurement, phase: PhaseMeasure) -> PhaseRecord:
    """`row` with one phase of a measurement (and the whole run's figures)."""
    budget = measured.budget_bytes if measured.budget_bytes else row.budget_bytes
    return replace(
        _remote_fields(row, measured),
        baseline_rss_bytes=measured.baseline_rss_bytes,
        peak_rss_bytes=measured.total.peak_rss_bytes,
        wall_s=measured.total.wall_s,
        cpu_s=measured.total.cpu_s,
        phase_cpu_s=phase.cpu_s,
        peak_source=measured.peak_source,
        inflight_peak_bytes=measured.inflight_peak_bytes,
        share_mode=measured.share_mode,
        exchanged_bytes=measured.exchanged_bytes,
        heap_retained_bytes=measured.heap_retained_bytes,
        budget_bytes=budget,
        phase=phase.name,
        phase_order=phase.order,
        phase_wall_s=phase.wall_s,
        phase_peak_rss_bytes=phase.peak_rss_bytes,
        phase_end_rss_bytes=phase.end_rss_bytes,
        phase_anon_rss_bytes=phase.anon_rss_bytes,
        phase_file_rss_bytes=phase.file_rss_bytes,
        phase_peak_anon_rss_bytes=phase.peak_anon_rss_bytes,
        phase_peak_file_rss_bytes=phase.peak_file_rss_bytes,
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
        **device_memory_fields(
            measured.total.device_peak_bytes_by_device,
            measured.device_bytes_limit_by_device,
            measured.device_model_bytes_by_device,
            budget,
        ),
    )


def device_fields(measured: Measurement, phase: PhaseMeasure) -> dict[str, Any]:
    """The per-device row fields: memory at the phase end, the run's device peak, the bytes each
    device received against its shards (and which received more, beyond the rows the loader
    says it sent twice by design: a leaf's last chunk overlapping the one before), the staging
    memory. `device_bytes_moved` adds up what every device received: a quantized file's own
    bytes where it is dequantized on the device, the dequantized bytes where on the host."""
    peaks = measured.total.device_peak_bytes_by_device
    received, expected = measured.device_received_bytes, measured.device_expected_bytes
    resent = measured.device_resent_bytes
    return {
        "phase_device_bytes_in_use_by_device": dict(phase.device_bytes_in_use_by_device),
        "phase_device_peak_bytes_by_device": dict(phase.device_peak_bytes_by_device),
        "device_peak_bytes": max(peaks.values())
        if peaks
        else measured.total.device_peak_bytes_in_use,
        "device_received_bytes": dict(received),
        "device_bytes_moved": sum(received.values()) if received else None,
        "device_expected_bytes": dict(expected),
        "device_resent_bytes": dict(resent),
        "device_overreceived": sorted(
            d for d, n in received.items() if n - resent.get(d, 0) > expected.get(d, 0)
        ),
        "staging_memory": measured.staging_memory,
        "device_programs": measured.device_programs,
    }


#: A device peak may pass the model's bytes plus the budget by this fraction of the model before
#: it is flagged: the allocator's rounding and the runtime's own buffers, not the load's staging.
DEVICE_SLACK = 0.01


def device_memory_fields(
    peaks: dict[str, int],
    limits: dict[str, int],
    model: dict[str, int],
    budget: int | None,
) -> dict[str, Any]:
    """Device memory as a figure, from each device's (`str(device)` keys) allocator peak, memory
    limit and share of the model's bytes: `device_bytes_limit` (the smallest device's),
    `device_headroom_bytes` (limit - peak on the tightest device), `device_model_bytes` (the
    largest share), `device_over_model_bytes` (peak - share on the worst device) and
    `device_over_budget`: that excess beyond the load's budget (0 for a strategy that takes
    none) plus `DEVICE_SLACK` of the share, as a host peak beyond its bound is flagged. Every
    field None where its inputs are missing (the CPU backend reports no device memory).

    Example: a 16 GiB device peaking at 15 GiB for a 14 GiB model under a 256 MiB budget has
    1 GiB of headroom, and is 1 GiB over the model, more than 256 MiB + 1% of 14 GiB: flagged.
    """
    common = [d for d in peaks if d in limits]
    worst = max((d for d in peaks if d in model), key=lambda d: peaks[d] - model[d], default=None)
    over = flagged = None
    if worst is not None:
        over = peaks[worst] - model[worst]
        flagged = over > (budget or 0) + DEVICE_SLACK * model[worst]
    return {
        "device_bytes_limit": min(limits.values()) if limits else None,
        "device_headroom_bytes": min((limits[d] - peaks[d] for d in common), default=None),
        "device_model_bytes": max(model.values()) if model else None,
        "device_over_model_bytes": over,
        "device_over_budget": flagged,
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


def _least(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _most(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _any(flags: list[bool | None]) -> bool | None:
    known = [f for f in flags if f is not None]
    return any(known) if known else None


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
                ceiling_cpu_s=_sum([r.ceiling_cpu_s for r in rows]),
                phase_cpu_s=_sum([r.phase_cpu_s for r in rows]),
                phase_wall_s=max(walls) if walls else None,
                phase_peak_rss_bytes=_sum([r.phase_peak_rss_bytes for r in rows]),
                phase_end_rss_bytes=_sum([r.phase_end_rss_bytes for r in rows]),
                phase_anon_rss_bytes=_sum([r.phase_anon_rss_bytes for r in rows]),
                phase_file_rss_bytes=_sum([r.phase_file_rss_bytes for r in rows]),
                phase_peak_anon_rss_bytes=_sum([r.phase_peak_anon_rss_bytes for r in rows]),
                phase_peak_file_rss_bytes=_sum([r.phase_peak_file_rss_bytes for r in rows]),
                phase_device_bytes_in_use=_sum([r.phase_device_bytes_in_use for r in rows]),
                phase_device_peak_bytes=_sum([r.phase_device_peak_bytes for r in rows]),
                device_headroom_bytes=_least([r.device_headroom_bytes for r in rows]),
                device_over_model_bytes=_most([r.device_over_model_bytes for r in rows]),
                device_over_budget=_any([r.device_over_budget for r in rows]),
                phase_start_s=_extreme(min, [r.phase_start_s for r in rows]),
                phase_end_s=_extreme(max, [r.phase_end_s for r in rows]),
                requests=_sum([r.requests for r in rows]),
                bytes_requested=_sum([r.bytes_requested for r in rows]),
                bytes_received=_sum([r.bytes_received for r in rows]),
                header_bytes=_sum([r.header_bytes for r in rows]),
                share_bytes=_sum([r.share_bytes for r in rows]),
                planned_requests=_sum([r.planned_requests for r in rows]),
                planned_bytes=_sum([r.planned_bytes for r in rows]),
                needed_bytes=_sum([r.needed_bytes for r in rows]),
                exchanged_bytes=_sum([r.exchanged_bytes for r in rows]),
                device_bytes_moved=_sum([r.device_bytes_moved for r in rows]),
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


def _onto_accelerator_only(record: PhaseRecord) -> PhaseRecord:
    """The row without the device ceiling and the probe's first-compile bytes unless it loaded
    onto an accelerator: both hold only such a load (a failed row's backend: unknown)."""
    if record.backend not in (None, CPU):
        return record
    return replace(
        record,
        device_ceiling_s=None,
        device_read_s=None,
        device_transfer_s=None,
        first_compile_host_bytes=None,
    )


def with_ratios(record: Record) -> Record:
    """A phase row with `ceiling_ratio` = wall_s / ceiling_s and `paired_ratio` = wall_s /
    reference_s where it has both, and a remote
    load's `received_bytes_per_s` = bytes_received / wall_s (the summed row: every process's
    bytes over the slowest one's wall, the aggregate throughput); a read plan's `over_read` =
    planned_bytes / needed_bytes; `device_ceiling_ratio` = wall_s / device_ceiling_s on a row
    loaded onto an accelerator (the device ceiling, and the probe's `first_compile_host_bytes`,
    are dropped from rows on the CPU backend)."""
    if not isinstance(record, PhaseRecord):
        return record
    record = _onto_accelerator_only(record)
    if record.planned_bytes is not None and record.needed_bytes:
        record = replace(record, over_read=record.planned_bytes / record.needed_bytes)
    if not record.wall_s:
        return record
    wall = record.wall_s
    if record.bytes_received is not None:
        record = replace(record, received_bytes_per_s=record.bytes_received / wall)
    if record.ceiling_s:
        record = replace(record, ceiling_ratio=wall / record.ceiling_s)
    if record.reference_s:
        record = replace(record, paired_ratio=wall / record.reference_s)
    if record.device_ceiling_s and record.backend not in (None, CPU):
        record = replace(record, device_ceiling_ratio=wall / record.device_ceiling_s)
    if record.reference_cpu_s and record.cpu_s:
        record = replace(record, cpu_ratio=record.cpu_s / record.reference_cpu_s)
    return record


def result_records(ctx: RowContext, outcomes: list[ChildOutcome]) -> list[Record]:
    """Every record of one result: per-process rows, the summed rows if several, samples."""
    single = len(outcomes) == 1
    indices = [0 if single else _process_index(o, i) for i, o in enumerate(outcomes)]
    per_process = [process_rows(ctx, i, o) for i, o in zip(indices, outcomes, strict=True)]
    phases = [r for rows in per_process for r in rows]
    if not single:
        phases += summed_rows(ctx, per_process)
    records: list[Record] = [*link_ceiling(ctx, phases)]
    for i, outcome in zip(indices, outcomes, strict=True):
        records += sample_rows(ctx, i, outcome)
    return [with_ratios(r) for r in records]
