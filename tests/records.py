"""Results rows for tests: one whole-run (`total`) `PhaseRecord` with plausible defaults, so a test
names only the fields it is about, and a `run` record of a synthetic machine; and recorded
folders of one gpt2 run each (`write_decision_folders`: ties, a peer winning, unstable, one run,
`--cpus 1`, truncated, two device counts) that every surface must answer alike (issue 54)."""

from __future__ import annotations

import uuid
from pathlib import Path
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


# -- recorded folders for the one answer (issue 54) ---------------------------------------------

GIB = 1 << 30
#: gpt2's sizes as the bench records them: the synthesized file's bytes, its header included
#: (14,352 bytes more than `recommend --shapes gpt2`'s target, the tensors' bytes), so `recommend`
#: must know the rows measured that checkpoint to judge them.
GPT2 = {"checkpoint_bytes": 548_105_232, "largest_tensor_bytes": 154_389_504, "tensors": 160}
REFERENCE_S = 0.2  # the bare copy timed beside each repeat
HOST_RAM = 16 * GIB  # the machine the folders were measured on (every surface answers for it)


def strategy_rows(
    name: str, ratios: list[float], peak: float, kind: str = STRATEGY, **fields: Any
) -> list[PhaseRecord]:
    """One strategy's repeats of gpt2: each `ratio` a repeat's paired ratio (its wall over the
    `REFERENCE_S` copy timed beside it), its peak RSS `peak` bytes over the baseline."""
    return [
        total_row(
            run_id="r1",
            strategy=name,
            kind=kind,
            repeat=i,
            wall_s=ratio * REFERENCE_S,
            reference_s=REFERENCE_S,
            paired_ratio=ratio,
            peak_rss_bytes=int(DEFAULTS["baseline_rss_bytes"] + peak),
            **{**GPT2, **fields},
        )
        for i, ratio in enumerate(ratios)
    ]


def _floor(**fields: Any) -> list[PhaseRecord]:
    return strategy_rows("floor", [1.0, 1.01, 1.02], 0.55 * GIB, kind="reference", **fields)


def _ties(**fields: Any) -> list[PhaseRecord]:
    """Issue 54's gpt2 run: mmap-put (a peer, 1.25 GiB) fastest, tied on time with pipelined
    (758 MiB) and zerocopy (757 MiB), as light as each other; eager slow and heavy."""
    return [
        *strategy_rows("mmap-put", [1.84, 1.85, 1.86], 1.25 * GIB, kind="peer", **fields),
        *strategy_rows("pipelined", [1.85, 1.86, 1.87], 758 * MIB, **fields),
        *strategy_rows("zerocopy", [1.86, 1.87, 1.88], 757 * MIB, **fields),
        *strategy_rows("eager", [5.00, 5.05, 5.10], 1.78 * GIB, **fields),
        *_floor(**fields),
    ]


def _peer_wins() -> list[PhaseRecord]:
    return [
        *strategy_rows("runai", [1.20, 1.21, 1.22], 900 * MIB, kind="peer"),
        *strategy_rows("pipelined", [1.85, 1.86, 1.87], 758 * MIB),
        *strategy_rows("eager", [5.00, 5.05, 5.10], 1.78 * GIB),
        *_floor(),
    ]


def _unstable() -> list[PhaseRecord]:
    return [
        *strategy_rows("pipelined", [1.50, 2.20, 1.70], 758 * MIB),
        *strategy_rows("zerocopy", [2.60, 2.61, 2.62], 757 * MIB),
        *strategy_rows("eager", [5.00, 5.05, 5.10], 1.78 * GIB),
        *_floor(),
    ]


def _one_run() -> list[PhaseRecord]:
    return [
        *strategy_rows("pipelined", [1.86], 758 * MIB),
        *strategy_rows("zerocopy", [1.90], 757 * MIB),
        *strategy_rows("eager", [5.00], 1.78 * GIB),
        *strategy_rows("floor", [1.0], 0.55 * GIB, kind="reference"),
    ]


def _two_devices() -> list[PhaseRecord]:
    """1 device: the ties above; 2 devices: pipelined and zerocopy called apart, and sharded-dir
    (a strategy that splits tensors across devices, run on 2 only: the Target host page leaves it
    out on 1 device, and must not call the run partial for it)."""
    return [
        *_ties(),
        *strategy_rows("pipelined", [1.50, 1.51, 1.52], 760 * MIB, devices=2),
        *strategy_rows("zerocopy", [1.90, 1.91, 1.92], 759 * MIB, devices=2),
        *strategy_rows("sharded-dir", [1.95, 1.96, 1.97], 800 * MIB, devices=2),
    ]


#: folder name -> (its rows, its run record's fields beyond `run_record`'s, a line cut short)
DECISION_FOLDERS: dict[str, tuple[Any, dict[str, Any], bool]] = {
    "ties": (_ties, {}, False),
    "peer-wins": (_peer_wins, {}, False),
    "unstable": (_unstable, {}, False),
    "one-run": (_one_run, {}, False),
    "cpus-1": (lambda: _ties(cpus=1), {"cpu_limit": 1.0}, False),
    "truncated": (
        _ties,
        {
            "status": "interrupted",
            "strategies": ["mmap-put", "pipelined", "zerocopy", "eager", "floor", "hostcast"],
        },
        True,
    ),
    "two-devices": (
        _two_devices,
        {"strategies": ["mmap-put", "pipelined", "zerocopy", "eager", "floor", "sharded-dir"]},
        False,
    ),
}


def write_decision_folders(root: Path) -> dict[str, Path]:
    """Each of `DECISION_FOLDERS` as a results folder of one gpt2 run on a 16 GiB machine."""
    from bench.records.schema import to_json_line

    out = {}
    for name, (rows, run, cut) in DECISION_FOLDERS.items():
        folder = root / name
        (folder / "here").mkdir(parents=True)
        record = run_record(run_id="r1", ram_bytes=HOST_RAM, **run)
        text = "".join(to_json_line(r) + "\n" for r in [record, *rows()])
        if cut:
            text += '{"schema_version": 2, "record": "pha'  # a write cut short by a kill
        (folder / "here" / "r1.jsonl").write_text(text, encoding="utf-8")
        out[name] = folder
    return out
