"""The run record carries every limit its children ran under, and "unconstrained" means none."""

from __future__ import annotations

import pandas as pd

from bench.records.configuration import UNCONSTRAINED, limits_text, run_limits
from bench.run.config import RunConfig
from bench.run.runner import _asked
from dashboard import frames
from loader.options import LoadOptions
from tests.records import run_record, total_row

MiB = 1 << 20


def test_a_cpus_1_run_records_its_cpu_limit():
    """Issue 54: a `--cpus 1` run stored `cpu_limit: null`, so it counted as unconstrained."""
    budget = LoadOptions.of(budget=32 * MiB)
    asked = _asked(RunConfig(["gpt2"], cpus=1, options=budget, devices=2), [])
    assert asked["cpu_limit"] == 1.0
    assert (asked["budget_bytes"], asked["devices"]) == (32 * MiB, 2)
    record = run_record(**{k: v for k, v in asked.items() if k != "status"})
    assert run_limits(record.__dict__) == ["1 CPU", "budget 32.0 MiB"]


def test_a_run_without_limits_is_unconstrained():
    asked = _asked(RunConfig(["gpt2"]), [])
    record = run_record(**{k: v for k, v in asked.items() if k != "status"})
    if record.cpu_limit is None:  # this machine's own affinity may limit it
        assert limits_text(record.__dict__) == UNCONSTRAINED


def test_an_older_cpus_1_record_is_read_from_its_rows():
    """Files written before the fix: the run record says null, the rows `cpus: 1`."""
    rows = pd.DataFrame([total_row(cpus=1, cpu_limit="cgroup-v2").__dict__])
    old = run_record(cpu_limit=None).__dict__
    assert run_limits(old, rows) == ["1 CPU"]
    facts = frames.run_facts(pd.DataFrame([old]), rows.assign(run_id=old["run_id"]))
    assert not facts["usual"].iloc[0] and "1 CPU" in facts["label"].iloc[0]


def _constrained_runs(tmp_path):
    """A `--budget 32MiB` run of gpt2 and, newer, a `--cpus 1` run of sa3: no unconstrained run."""
    from bench.records.results import read_results
    from bench.records.writer import ResultsWriter

    for run_id, shapes, asked in (
        ("20260101T000000Z-aaaaaa", "gpt2", {"budget_bytes": 32 * MiB}),
        ("20260102T000000Z-bbbbbb", "sa3", {"cpu_limit": 1.0}),
    ):
        cpus = asked.get("cpu_limit")
        rows = [total_row(run_id=run_id, shapes=shapes, repeat=i, cpus=cpus) for i in range(3)]
        record = run_record(run_id=run_id, started_utc=f"{run_id[:4]}-01-0{run_id[7]}", **asked)
        with ResultsWriter(tmp_path / "here" / f"{run_id}.jsonl") as w:
            w.write_many([record, *rows])
    return read_results(tmp_path)


def test_the_newest_choice_names_the_limits_of_the_runs_it_shows(tmp_path):
    """Issue 71: with only a `--budget` and a `--cpus 1` run, the run picker's first choice read
    "Newest complete, unconstrained run of each shape set" over two constrained runs."""
    results = _constrained_runs(tmp_path)
    label = frames.newest_label(results.runs, results.phases)
    assert label == "Newest run of each shape set (gpt2: budget 32.0 MiB; sa3: 1 CPU)"
    labels = frames.run_labels(results.runs, results.phases).values()
    assert [label.rsplit(" · ", 1)[1] for label in labels] == ["1 CPU", "budget 32.0 MiB"]
    free = run_record(run_id="20260103T000000Z-cccccc", started_utc="2026-01-03").__dict__
    rows = pd.DataFrame([total_row(run_id=free["run_id"], shapes="gpt2").__dict__])
    both = frames.newest_label(
        pd.concat([results.runs, pd.DataFrame([free])]), pd.concat([results.phases, rows])
    )
    assert both == "Newest run of each shape set (sa3: 1 CPU)"
    assert frames.newest_label(pd.DataFrame([free]), rows) == frames.NEWEST_LABEL
