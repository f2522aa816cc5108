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
