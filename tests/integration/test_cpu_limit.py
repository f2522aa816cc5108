"""`bench run --cpus N`: each child runs inside a CPU cgroup, read back and recorded per row."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.limits import cpu as cpulimit
from bench.limits.cpu import CpuLimit
from bench.records.results import read_results
from bench.run.config import RunConfig
from bench.run.runner import run_bench

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture
def bench_env(monkeypatch, tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: a one-CPU limit changes nothing to see")
    with CpuLimit(1) as limit:
        if limit.mechanism == cpulimit.NONE:
            pytest.skip(f"no cpu cgroup can be made here: {limit.note}")
    path = os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("LOADBENCH_EXTRA_STRATEGIES", "fake_onecpu")
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "lbcache"))
    monkeypatch.syspath_prepend(str(FAKES))


@pytest.mark.parametrize("cpus", [1, None])
def test_each_child_runs_on_the_cpus_asked_and_the_row_says_so(bench_env, tmp_path, cpus):
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=["fake-onecpu"],
        repeats=1,
        cpus=cpus,
        out=tmp_path / "results",
        progress=False,
    )
    res = read_results(run_bench(config).jsonl)
    row = res.phases[res.phases.phase == "total"].iloc[0]
    if cpus is None:  # the fake fails outside a one-CPU cgroup: the test can tell
        assert row.status == "crashed" and "not 1" in row.error, row.error
        return
    assert row.status == "ok", row.error
    assert row.cpus == 1 and bool(row.cpu_limit_enforced)
    assert row.cpu_limit in (cpulimit.V2, cpulimit.V1, cpulimit.CPUSET)
