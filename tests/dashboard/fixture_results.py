"""Write a small, realistic results folder (schema JSON Lines) for the dashboard tests.

Run `alpha` is written as schema v1 (no `kind`: the reader derives it), run `beta` as the current
version, with each row's strategy kind.

Two runs on two machines (`alpha`, `beta`), each over two shape sets (`tiny-gpt2`, `gpt2`) with
four strategies (`floor`, `eager`, `stream`, and `pipelined`, whose build runs inside its stream)
and three repeats, per-phase rows, RSS samples; run `alpha` also has a crashed strategy (`orbax`),
run `beta` a memray capture (html + top sites) and `eager`, `stream` on 2 devices too (gpt2).
Two newer runs must never be the default: `gamma`, interrupted, and `delta`, made by `recommend
--check` under a 1 GiB limit (in `checks/`). The numbers
are synthetic but shaped like real ones: `eager` is fast and heavy, `stream` slow and light, `floor`
(the reference that only reads the bytes) near 1x the checkpoint.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.records.schema import SCHEMA_VERSION
from loader.vocabulary import REFERENCE, STRATEGY

MIB = 1 << 20
SHAPES = {  # name -> (checkpoint_bytes, largest_tensor_bytes, tensors)
    "tiny-gpt2": (2_520_000, 402_056, 40),
    "gpt2": (548_105_171, 154_389_504, 148),
}
# strategy -> list of (phase, adds x checkpoint to RSS at its peak, keeps x checkpoint at its end,
# seconds per GB, file-backed share of what it keeps)
PLANS = {
    "floor": [("read", 1.0, 1.0, 0.45, 0.9)],
    "eager": [
        ("build", 1.0, 1.0, 0.30, 0.0),
        ("read", 1.0, 2.0, 0.40, 0.3),
        ("cast", 0.5, 1.5, 0.35, 0.1),
        ("transfer", 0.4, 1.1, 0.25, 0.0),
        ("assemble", 0.0, 1.0, 0.10, 0.0),
    ],
    "stream": [
        ("build", 0.02, 0.02, 0.05, 0.0),
        ("stream", 1.3, 1.05, 2.10, 0.05),
        ("assemble", 0.0, 1.02, 0.05, 0.0),
    ],
    "pipelined": [("stream", 1.1, 1.0, 1.60, 0.05)],  # and a build inside it (OVERLAPPING)
}
# strategy -> (phase, from, to as fractions of the first phase's span, peak x checkpoint over the
# baseline, end RSS x checkpoint over the baseline): a phase that ran inside another, as
# pipelined's build runs while it streams. Laid end to end it would "add" a negative amount.
OVERLAPPING = {"pipelined": ("build", 0.1, 0.4, 0.45, 0.4)}
MACHINES = {  # machine -> (run_id, started_utc, ram_bytes, speed factor, memory factor)
    "alpha": ("20260110T101500Z-a1b2c3", "2026-01-10T10:15:00Z", 24 << 30, 1.0, 1.0),
    "beta": ("20260112T093000Z-d4e5f6", "2026-01-12T09:30:00Z", 64 << 30, 0.7, 1.1),
}
BASELINE = 310 * MIB
SAMPLE_S = 0.01  # the RSS sampling interval
VERSIONS = {"alpha": 1, "beta": SCHEMA_VERSION}  # machine -> schema version its file is written in
KINDS = {"floor": REFERENCE}  # strategy -> kind, where not STRATEGY
TWO_DEVICES = ("eager", "stream")  # run beta measured these on 2 devices too (gpt2)
# Runs that are not the default one: (machine folder, run id, started, status, what it was asked,
# shape set, strategies, repeats). `gamma` is newer than every other but was interrupted (its run
# record says "running" and no writer holds the file); `delta` is `recommend --check`'s, under a
# 1 GiB memory limit, in `checks/`.
SPECIAL = {
    "gamma": ("beta", "20260114T080000Z-0a0a0a", "2026-01-14T08:00:00Z", "running", {}),
    "delta": (
        "checks/beta",
        "20260115T080000Z-0d0d0d",
        "2026-01-15T08:00:00Z",
        "complete",
        {"check": True, "host_ram_bytes": 1 << 30},
    ),
}


def _stamp(obj: dict, version: int) -> dict:
    """The record as schema `version` writes it: v1 has no `kind`, later versions do."""
    obj = {**obj, "schema_version": version}
    if version > 1 and obj["record"] == "phase":
        obj["kind"] = KINDS.get(obj["strategy"], STRATEGY)
        obj.setdefault("backend", "cpu")  # v1 files predate it: their answers say so
    return obj


@dataclass(frozen=True)
class FixtureInfo:
    """What the fixture holds, so tests can assert on it without hard-coding numbers twice."""

    root: Path
    run_ids: dict[str, str]  # machine -> run id
    memray_html: str  # relative path of the one memray flamegraph


def _run_record(machine: str) -> dict:
    run_id, started, ram, *_ = MACHINES[machine]
    return {
        "schema_version": 1,
        "record": "run",
        "run_id": run_id,
        "machine": machine,
        "started_utc": started,
        "cpu_model": f"Synthetic CPU {machine}",
        "cpu_count": 2 if machine == "alpha" else 16,
        "ram_bytes": ram,
        "kernel": "6.1.0-test",
        "python": "3.11.9",
        "jax_version": "0.10.2",
        "flax_version": "0.12.8",
        "safetensors_version": "0.8.0",
        "numpy_version": "2.3.0",
        "loadbench_version": "0.1.0",
        "allocator_env": {"MALLOC_ARENA_MAX": "2"} if machine == "beta" else {},
        "command": ["loadbench", "bench", "run", "--shapes", "tiny-gpt2,gpt2"],
    }


def _result_rows(
    machine: str, shapes: str, strategy: str, repeat: int, memray: str | None, devices: int = 8
):
    """The phase rows (plus the `total` row) and samples of one child run."""
    run_id, _, _, speed, mem = MACHINES[machine]
    ckpt, largest, tensors = SHAPES[shapes]
    where = f"{machine}/{shapes}/{strategy}/{repeat}" + (f"/{devices}" if devices != 8 else "")
    rid = uuid.uuid5(uuid.NAMESPACE_URL, where).hex
    jitter = 1.0 + 0.03 * (repeat - 1)
    common = {
        "schema_version": 1,
        "record": "phase",
        "run_id": run_id,
        "result_id": rid,
        "shapes": shapes,
        "strategy": strategy,
        "dtype": "native",
        "devices": devices,
        "processes": 1,
        "process_index": 0,
        "repeat": repeat,
        "status": "ok",
        "error": None,
        "checkpoint_bytes": ckpt,
        "largest_tensor_bytes": largest,
        "tensors": tensors,
        "baseline_rss_bytes": BASELINE,
        "peak_source": "hwm",
        "memray_html": memray,
        "memray_top": memray.replace(".html", ".top.txt") if memray else None,
    }
    rows, samples, rss, t = [], [], BASELINE, 0.0
    for order, (phase, adds, keeps, s_per_gb, file_share) in enumerate(PLANS[strategy]):
        wall = max(s_per_gb * ckpt / 1e9 * speed * jitter, 0.002)
        peak = int(rss + adds * ckpt * mem)
        end = int(BASELINE + keeps * ckpt * mem)
        n = max(2, round(wall / SAMPLE_S))  # the probe samples at a fixed interval
        for k in range(n):
            frac = (k + 0.5) / n
            level = int(rss + (peak - rss) * min(1.0, 2 * frac)) if frac < 0.8 else end
            samples.append(_sample(run_id, rid, t + wall * frac, phase, level, file_share))
        row = dict(common, phase=phase, phase_order=order, phase_wall_s=wall)
        row.update(phase_peak_rss_bytes=peak, phase_end_rss_bytes=end)
        row.update(phase_file_rss_bytes=int((end - BASELINE) * file_share))
        row.update(phase_anon_rss_bytes=end - row["phase_file_rss_bytes"])
        row["substeps_s"] = (
            {"read": wall * 0.5, "cast": wall * 0.2, "transfer": wall * 0.3}
            if phase == "stream"
            else {}
        )
        rows.append(row)
        rss, t = end, t + wall
    if strategy in OVERLAPPING:
        rows = _overlapping(rows, strategy, ckpt * mem)
    peak = max(r["phase_peak_rss_bytes"] for r in rows)
    for r in rows:
        r.update(peak_rss_bytes=peak, wall_s=t)
    total = dict(rows[-1], phase="total", phase_order=len(rows), phase_wall_s=t)
    total.update(phase_overlaps=[], phase_start_s=None, phase_end_s=None)
    total.update(phase_peak_rss_bytes=peak, substeps_s={})
    return rows + [total], samples


def _overlapping(rows: list[dict], strategy: str, ckpt: float) -> list[dict]:
    """`rows` (one phase, with its times) plus the phase that ran inside it, both marked."""
    phase, start, end, peak, keeps = OVERLAPPING[strategy]
    outer = rows[0]
    span = outer["phase_wall_s"]
    outer.update(phase_start_s=0.0, phase_end_s=span, phase_overlaps=[phase])
    inner = dict(outer, phase=phase, phase_order=1, phase_wall_s=(end - start) * span)
    inner.update(
        phase_start_s=start * span, phase_end_s=end * span, phase_overlaps=[outer["phase"]]
    )
    inner.update(phase_peak_rss_bytes=int(BASELINE + peak * ckpt))
    inner.update(phase_end_rss_bytes=int(BASELINE + keeps * ckpt), substeps_s={})
    inner.update(phase_anon_rss_bytes=inner["phase_end_rss_bytes"], phase_file_rss_bytes=0)
    return [outer, inner]


def _sample(run_id: str, rid: str, t: float, phase: str, rss: int, file_share: float) -> dict:
    file_b = int((rss - BASELINE) * file_share) + 40 * MIB
    return {
        "schema_version": 1,
        "record": "sample",
        "run_id": run_id,
        "result_id": rid,
        "process_index": 0,
        "t_s": round(t, 6),
        "phase": phase,
        "rss_anon_bytes": rss - file_b,
        "rss_file_bytes": file_b,
    }


def _crashed_row(machine: str, shapes: str) -> dict:
    run_id, *_ = MACHINES[machine]
    ckpt, largest, tensors = SHAPES[shapes]
    return {
        "schema_version": 1,
        "record": "phase",
        "run_id": run_id,
        "result_id": uuid.uuid4().hex,
        "shapes": shapes,
        "strategy": "orbax",
        "dtype": "native",
        "devices": 8,
        "processes": 1,
        "process_index": 0,
        "repeat": 0,
        "status": "crashed",
        "error": "worker exited with signal 9 (SIGKILL) during read; see the run's stderr",
        "checkpoint_bytes": ckpt,
        "largest_tensor_bytes": largest,
        "tensors": tensors,
        "baseline_rss_bytes": BASELINE,
        "peak_rss_bytes": None,
        "wall_s": None,
        "phase": "total",
        "phase_order": 0,
        "phase_wall_s": None,
        "phase_peak_rss_bytes": None,
        "phase_end_rss_bytes": None,
        "phase_anon_rss_bytes": None,
        "phase_file_rss_bytes": None,
        "peak_source": "hwm",
        "substeps_s": {},
        "memray_html": None,
        "memray_top": None,
    }


def _write_memray(root: Path, rel: str) -> None:
    html = root / rel
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text("<html><body><h1>memray flamegraph (fixture)</h1></body></html>\n")
    top = html.with_name(html.name.replace(".html", ".top.txt"))
    top.write_text(
        "  1  120.0 MiB  numpy/_core/numeric.py:frombuffer\n"
        "  2   64.0 MiB  loader/strategies/eager.py:load\n"
    )


def write_results(root: Path) -> FixtureInfo:
    """Write the fixture folder under `root` (created if missing) and say what it holds."""
    root.mkdir(parents=True, exist_ok=True)
    memray_rel = ""
    for machine, (run_id, *_) in MACHINES.items():
        lines = [_run_record(machine)]
        samples = []
        for shapes in SHAPES:
            for strategy in PLANS:
                for repeat in range(3):
                    memray = None
                    if (
                        machine == "beta"
                        and strategy == "eager"
                        and shapes == "gpt2"
                        and repeat == 0
                    ):
                        memray = f"{machine}/{run_id}/memray/eager-gpt2-r0.html"
                        memray_rel = memray
                        _write_memray(root, memray)
                    rows, s = _result_rows(machine, shapes, strategy, repeat, memray)
                    lines += rows
                    samples += s
            if machine == "alpha" and shapes == "gpt2":
                lines.append(_crashed_row(machine, shapes))
            if machine == "beta" and shapes == "gpt2":  # two strategies also on 2 devices
                for strategy, repeat in [(s, r) for s in TWO_DEVICES for r in range(3)]:
                    rows, s = _result_rows(machine, shapes, strategy, repeat, None, devices=2)
                    lines += rows
                    samples += s
        folder = root / machine
        folder.mkdir(exist_ok=True)
        lines = [_stamp(obj, VERSIONS[machine]) for obj in lines + samples]
        text = "\n".join(json.dumps(obj) for obj in lines) + "\n"
        (folder / f"{run_id}.jsonl").write_text(text, encoding="utf-8")
    ids = {m: v[0] for m, v in MACHINES.items()}
    for name, (folder, run_id, started, status, asked) in SPECIAL.items():
        _write_special(root / folder, run_id, started, status, asked)
        ids[name] = run_id
    return FixtureInfo(root, ids, memray_rel)


def _write_special(folder: Path, run_id: str, started: str, status: str, asked: dict) -> None:
    """A one-strategy (eager), one-repeat gpt2 run of machine beta with `status` and `asked`."""
    run = dict(_run_record("beta"), run_id=run_id, started_utc=started, status=status, **asked)
    run.update(strategies=["eager"], repeats=1)
    rows, samples = _result_rows("beta", "gpt2", "eager", 0, None)
    for r in rows + samples:
        r["run_id"] = run_id
        r["result_id"] = uuid.uuid5(uuid.NAMESPACE_URL, run_id + r["result_id"]).hex
        if r["record"] == "phase" and "host_ram_bytes" in asked:
            r["host_ram_bytes"] = asked["host_ram_bytes"]
    folder.mkdir(parents=True, exist_ok=True)
    lines = [_stamp(obj, SCHEMA_VERSION) for obj in [run, *rows, *samples]]
    text = "\n".join(json.dumps(obj) for obj in lines) + "\n"
    (folder / f"{run_id}.jsonl").write_text(text, encoding="utf-8")
