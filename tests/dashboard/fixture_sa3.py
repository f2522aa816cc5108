"""An sa3-like results folder: one run of every registered strategy on a 2.1 GiB checkpoint.

Shaped like the run issue 36 was read on (JAX's CPU backend): seven strategies between 1.2 and
2.4 s, `eager` at 20 s and 3.2x the checkpoint, `pipelined` and `zerocopy` 0.05 s and 20 MiB
apart, `sharded` on 2 processes (each process's own rows and samples, and the summed rows), the two
peers skipped, `builder` timed out. At a 2.5 GiB host five strategies peak under the host's RAM
but none under it less 10%: the headline says none fits, and the chart must show why.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from fixture_results import _run_record, _sample

from bench.records.schema import SCHEMA_VERSION
from loader.vocabulary import PEER, REFERENCE, STRATEGY

GIB = 1 << 30
RUN_ID = "20260301T120000Z-5a3a3a"
CHECKPOINT = int(2.1 * GIB)
BASELINE = int(0.22 * GIB)
SAMPLE_S = 0.02
# strategy -> (kind, peak over baseline x checkpoint, wall s, processes) for an ok run
OK_RUNS = {
    "floor": (REFERENCE, 1.0, 0.95, 1),
    "pipelined": (STRATEGY, 1.01, 1.20, 1),
    "zerocopy": (STRATEGY, 1.02, 1.25, 1),
    "pread": (STRATEGY, 1.04, 1.35, 1),
    "sharded": (STRATEGY, 1.06, 1.40, 2),
    "hostcast": (STRATEGY, 1.05, 1.50, 1),
    "sharded-dir": (STRATEGY, 1.10, 1.60, 1),
    "mmap": (STRATEGY, 1.03, 1.80, 1),
    "orbax": (STRATEGY, 1.90, 2.40, 1),
    "eager": (STRATEGY, 3.20, 20.0, 1),
}
# strategy -> (kind, status, error) for a run that did not measure
NOT_RUN = {
    "fastsafetensors": (PEER, "skipped", "fastsafetensors is not installed (make peers)"),
    "runai": (PEER, "skipped", "runai-model-streamer is not installed (make peers)"),
    "builder": (STRATEGY, "timeout", "the child ran past its 600 s timeout during read"),
}
# a load's phases: (name, share of the wall, share of the peak reached in it)
PHASES = (("build", 0.15, 0.05), ("read", 0.55, 1.0), ("cast", 0.2, 1.0), ("assemble", 0.1, 0.98))


def _common(strategy: str, kind: str, repeat: int, processes: int, index: int) -> dict:
    rid = uuid.uuid5(uuid.NAMESPACE_URL, f"sa3/{strategy}/{repeat}").hex
    return {
        "schema_version": SCHEMA_VERSION,
        "record": "phase",
        "run_id": RUN_ID,
        "result_id": rid,
        "shapes": "sa3",
        "strategy": strategy,
        "kind": kind,
        "dtype": "native",
        "devices": 8 * processes,  # 8 devices per process, as every other strategy has
        "processes": processes,
        "process_index": index,
        "repeat": repeat,
        "status": "ok",
        "error": None,
        "checkpoint_bytes": CHECKPOINT,
        "largest_tensor_bytes": 256 << 20,
        "tensors": 1234,
        "baseline_rss_bytes": BASELINE,
        "peak_source": "hwm",
        "backend": "cpu",
    }


def _process(strategy: str, repeat: int, index: int, share: float) -> tuple[list, list]:
    """The phase rows and samples of one process holding `share` of the strategy's peak."""
    kind, ratio, wall, processes = OK_RUNS[strategy]
    wall *= 1 + 0.02 * (repeat - 1)
    common = _common(strategy, kind, repeat, processes, index)
    peak = BASELINE + int(ratio * CHECKPOINT * share)
    rows, samples, t = [], [], 0.0
    for order, (phase, wall_share, peak_share) in enumerate(PHASES):
        span = wall * wall_share
        top = BASELINE + int((peak - BASELINE) * peak_share)
        n = max(2, round(span / SAMPLE_S))
        for k in range(n):
            level = BASELINE + int((top - BASELINE) * min(1.0, (k + 1) / n * 1.5))
            sample = _sample(
                RUN_ID, common["result_id"], t + span * (k + 0.5) / n, phase, level, 0.1
            )
            samples.append({**sample, "process_index": index, "schema_version": SCHEMA_VERSION})
        rows.append(
            dict(
                common,
                phase=phase,
                phase_order=order,
                phase_wall_s=span,
                phase_start_s=t,
                phase_end_s=t + span,
                phase_peak_rss_bytes=top,
                phase_end_rss_bytes=top,
                phase_anon_rss_bytes=int((top - BASELINE) * 0.9),
                phase_file_rss_bytes=int((top - BASELINE) * 0.1),
                substeps_s={},
            )
        )
        t += span
    for r in rows:
        r.update(peak_rss_bytes=peak, wall_s=wall)
    total = dict(rows[-1], phase="total", phase_order=len(rows), phase_wall_s=wall)
    total.update(phase_start_s=0.0, phase_end_s=wall, phase_peak_rss_bytes=peak)
    return [*rows, total], samples


def _summed(per_process: list[list[dict]]) -> list[dict]:
    """The process_index -1 rows of a multi-process result: RSS summed, times the slowest."""
    out = []
    for rows in zip(*per_process, strict=True):
        summed = dict(rows[0], process_index=-1)
        for key in ("baseline_rss_bytes", "peak_rss_bytes", "phase_peak_rss_bytes"):
            summed[key] = sum(r[key] for r in rows)
        for key in ("phase_end_rss_bytes", "phase_anon_rss_bytes", "phase_file_rss_bytes"):
            summed[key] = sum(r[key] for r in rows)
        out.append(summed)
    return out


def _not_run(strategy: str) -> dict:
    kind, status, error = NOT_RUN[strategy]
    row = _common(strategy, kind, 0, 1, 0)
    row.update(status=status, error=error, phase="total", phase_order=0, substeps_s={})
    for key in ("peak_rss_bytes", "wall_s", "phase_wall_s", "phase_peak_rss_bytes"):
        row[key] = None
    for key in ("phase_end_rss_bytes", "phase_anon_rss_bytes", "phase_file_rss_bytes"):
        row[key] = None
    row["baseline_rss_bytes"] = None
    return row


def write_sa3(root: Path) -> Path:
    """Write the run under `root/beta/` (a machine with 16 GiB) and return `root`."""
    lines: list[dict] = [
        dict(
            _run_record("beta"),
            run_id=RUN_ID,
            started_utc="2026-03-01T12:00:00Z",
            ram_bytes=16 * GIB,
            command=["loadbench", "bench", "run", "--shapes", "sa3"],
            schema_version=SCHEMA_VERSION,
        )
    ]
    samples: list[dict] = []
    for strategy, (_, _, _, processes) in OK_RUNS.items():
        for repeat in range(3):
            per_process = []
            for index in range(processes):
                rows, s = _process(strategy, repeat, index, 1 / processes)
                if processes > 1:
                    rows = [dict(r, processes=processes) for r in rows]
                per_process.append(rows)
                samples += s
            lines += [r for rows in per_process for r in rows]
            if processes > 1:
                lines += _summed(per_process)
    lines += [_not_run(s) for s in NOT_RUN]
    folder = root / "beta"
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(obj) for obj in lines + samples) + "\n"
    (folder / f"{RUN_ID}.jsonl").write_text(text, encoding="utf-8")
    return root
