"""Results rows for tests: one whole-run (`total`) `PhaseRecord` with plausible defaults, so a test
names only the fields it is about, and a `run` record of a synthetic machine."""

from __future__ import annotations

import uuid
from typing import Any

from bench.records.schema import PhaseRecord, RunRecord
from bench.vocabulary import OK
from loader.vocabulary import STRATEGY, TOTAL

MIB = 1 << 20
DEFAULTS: dict[str, Any] = {
    "run_id": "r",
    "shapes": "gpt2",
    "strategy": "pipelined",
    "kind": STRATEGY,
    "dtype": "native",
    "devices": 1,
    "processes": 1,
    "process_index": 0,
    "repeat": 0,
    "status": OK,
    "error": None,
    "checkpoint_bytes": 500 * MIB,
    "largest_tensor_bytes": 50 * MIB,
    "tensors": 160,
    "baseline_rss_bytes": 100 * MIB,
    "wall_s": 1.0,
    "phase": TOTAL,
    "phase_order": 0,
    "phase_file_rss_bytes": 0,
    "peak_source": "hwm",
}


def total_row(**fields: Any) -> PhaseRecord:
    """A `total` row: `DEFAULTS`, a fresh `result_id`, a peak of baseline + checkpoint and the
    phase's own figures those of the whole run, then `fields` over them."""
    row = {**DEFAULTS, "result_id": uuid.uuid4().hex, **fields}
    row.setdefault("peak_rss_bytes", row["baseline_rss_bytes"] + row["checkpoint_bytes"])
    row.setdefault("phase_wall_s", row["wall_s"])
    row.setdefault("phase_peak_rss_bytes", row["peak_rss_bytes"])
    row.setdefault("phase_end_rss_bytes", row["baseline_rss_bytes"])
    row.setdefault("phase_anon_rss_bytes", row["baseline_rss_bytes"])
    return PhaseRecord(**row)


def run_record(**fields: Any) -> RunRecord:
    """A `run` record of a synthetic 2-CPU, 16 GiB machine, then `fields` over it."""
    facts: dict[str, Any] = {
        "run_id": "r",
        "machine": "here",
        "started_utc": "2026-01-01T00:00:00Z",
        "cpu_model": "Synthetic CPU",
        "cpu_count": 2,
        "ram_bytes": 16 << 30,
        "kernel": "6.1.0-test",
        "python": "3.11.9",
        "jax_version": None,
        "flax_version": None,
        "safetensors_version": None,
        "numpy_version": None,
        "loadbench_version": None,
    }
    return RunRecord(**{**facts, **fields})
