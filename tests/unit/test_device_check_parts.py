"""`scripts/device_check.py`'s plan, nothing run: what each part's tables are (every strategy of
sa3's table within two parts, the cast table and the budget sweep of issue 73), which strategies a
platform skips and why, and how a table is cut to the time left while later tables keep a run."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device_check.py"


@pytest.fixture(scope="module")
def dc():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_check"] = module
    spec.loader.exec_module(module)
    return module


def _tables(dc, part: str):
    strategies = tuple(dc.SMALL_STRATEGIES.split(","))
    return dc.tables(part, "sa3", "llama3-8b", strategies)


def test_sa3s_table_holds_every_strategy_within_two_parts(dc):
    ran = {
        s
        for part in ("small", "large")
        for t in _tables(dc, part)
        if t.shapes == "sa3" and not t.args
        for s in t.strategies
    }
    want = {"pipelined", "mmap-put", "zerocopy", "builder", "hostcast", "orbax-safetensors"}
    assert want <= ran
    (first, *_) = _tables(dc, "small")
    assert {"pipelined", "mmap-put"} <= set(first.strategies) and first.repeats == 3


def test_the_cast_table_and_the_budget_sweep(dc):
    casts = [t.args for t in _tables(dc, "small") if "--model-dtype" in t.args]
    assert casts == [
        ("--model-dtype", "bfloat16"),
        ("--dtype", "bfloat16", "--model-dtype", "float32"),
        ("--dtype", "float16", "--model-dtype", "bfloat16"),
    ]
    sweep = _tables(dc, "budgets")
    for shapes in ("llama3-8b", "sa3"):
        budgets = [t.args[1] for t in sweep if t.shapes == shapes]
        assert budgets == ["16MiB", "64MiB", "256MiB", "1GiB", "4GiB"], shapes
    assert {t.strategies for t in sweep} == {("pipelined",)}
    port = [t for t in _tables(dc, "large") if t.models == ("port",)]
    assert port and port[0].strategies == ("pipelined",)
    every = _tables(dc, "all")
    assert len(every) == sum(len(_tables(dc, p)) for p in ("small", "large", "budgets"))
    with pytest.raises(ValueError, match="unknown part 'huge'"):
        _tables(dc, "huge")


def test_each_part_fits_one_call_at_the_tpu_estimates(dc):
    """At the TPU's per-run estimates, each part's asked repeats fit the 540 s a call plans for,
    the probe and the synthesis left 60 s: no table is cut on a TPU host that runs as estimated."""
    tpu = ("pipelined", "mmap-put", "zerocopy", "builder")  # the CUDA peers skip there
    costs = dict(zip(("small", "large", "port"), dc.COSTS["tpu"], strict=True))
    for part in ("small", "large", "budgets"):
        tables = dc.tables(part, "sa3", "llama3-8b", tpu)
        seconds = sum(costs[t.cost] * t.runs * t.repeats for t in tables)
        assert seconds <= 540 - 60 - dc.SUMMARY_SECONDS, (part, seconds)


def test_a_table_is_cut_to_the_time_left_and_says_so(dc):
    plan = dc.Plan({"small": 20, "large": 30, "port": 45})
    table = dc.Table("sa3", "sa3", ("pipelined", "mmap-put"), 3, "small")
    assert plan.fit(table, 200) == 3 and plan.notes == []
    assert plan.fit(table, 100) == 2 and "2 of 3 repeats fit in 100s" in plan.notes[-1]
    assert plan.fit(table, 50) == 1 and "one run: not judged on time" in plan.notes[-1]
    assert plan.fit(table, 30) == 0 and "left out, no run fits" in plan.notes[-1]
    later = [dc.Table("p", "llama3-8b", ("pipelined",), 2, "port", models=("port",)), table]
    assert plan.reserve(later) == 45 + 2 * 20  # one run of each later table


def test_the_cuda_only_peers_are_left_out_on_a_tpu_with_their_reason(dc):
    kept, said = dc.keep_strategies(
        "tpu", ("pipelined", "mmap-put", "instanttensor", "runai", "orbax-safetensors")
    )
    assert kept == ("pipelined", "mmap-put", "orbax-safetensors")
    assert "instanttensor: skipped, it loads onto cuda devices only (here: tpu)" in said
    assert any(s.startswith("runai: skipped, needs ") for s in said), said


def test_a_step_past_its_time_is_stopped_with_its_children(dc, tmp_path):
    """A `bench run` that outlives its slot is stopped whole: its children (the loads) too."""
    pid_file = tmp_path / "grandchild"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    assert dc.bounded(["bash", "-c", script], 1) is None
    grandchild = int(pid_file.read_text())
    assert _ended(grandchild), f"the step's child {grandchild} still runs"
    assert dc.bounded(["true"], 5) == 0


def _ended(pid: int, wait_s: float = 5.0) -> bool:
    """Whether `pid` has ended: gone, or a zombie its new parent has not reaped yet (os.kill
    still finds one of those), within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False
