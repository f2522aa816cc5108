"""A group whose process was killed for memory is `oom`, and `recommend --check` counts it held.

The fake children are plain Python processes: one is SIGKILLed as the kernel's OOM killer does
(inside a fake memory limit that counted the kill), while its partner waits; or one grows past
the watchdog's budget.
"""

from __future__ import annotations

import signal
import sys
from types import SimpleNamespace

import pytest

from bench import strategies
from bench.commands.check import _line
from bench.limits.pagecache import CacheOutcome
from bench.limits.situation import Situation
from bench.run.children import run_group
from bench.run.matrix import Checkpoint, Task
from bench.run.rows import RowContext, result_records, summed_rows
from bench.vocabulary import CRASHED, OOM

GiB = 1 << 30
WAITS = [sys.executable, "-c", "import time; time.sleep(60)"]
KILLED = [sys.executable, "-c", "import os, time; time.sleep(0.3); os.kill(os.getpid(), 9)"]
GROWS = [sys.executable, "-c", "import time; b = bytearray(400 << 20); time.sleep(60)"]


class FakeLimit:
    """A memory limit that starts children as they are and reports one OOM kill."""

    mechanism = "cgroup-v2"
    limit_bytes = GiB

    def wrap(self, argv: list[str]) -> list[str]:
        return argv

    def attach(self, pid: int) -> None:
        pass

    def oom_kills(self) -> int:
        return 1


def _group_status(outcomes) -> str:
    checkpoint = Checkpoint("gpt2", None, 0, "/c/model.safetensors", GiB, GiB, 3)
    task = Task(checkpoint, strategies.catalog()["sharded-dir"], repeat=0, processes=2, devices=2)
    ctx = RowContext("run", "rid", task, Situation(CacheOutcome("warm")))
    per_process = [result_records(ctx, [o]) for o in outcomes]
    return summed_rows(ctx, per_process)[0].status


@pytest.mark.parametrize("limit", [FakeLimit(), None], ids=["cgroup", "no-limit"])
def test_the_partner_of_a_process_killed_for_memory_is_oom_not_crashed(tmp_path, limit):
    outs = [tmp_path / "0.json", tmp_path / "1.json"]
    outcomes = run_group(
        [WAITS, KILLED], [{}, {}], outs, timeout_s=60, memory_bytes=8 * GiB, limit=limit
    )
    assert [o.status for o in outcomes] == [OOM, OOM], [o.error for o in outcomes]
    assert "process 1 of the group was killed for memory" in outcomes[0].error
    assert _group_status(outcomes) == OOM


def test_a_partner_of_a_plain_crash_is_still_crashed(tmp_path):
    fails = [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(3)"]
    outs = [tmp_path / "0.json", tmp_path / "1.json"]
    outcomes = run_group([WAITS, fails], [{}, {}], outs, timeout_s=60, memory_bytes=8 * GiB)
    assert [o.status for o in outcomes] == [CRASHED, CRASHED]
    assert _group_status(outcomes) == CRASHED


def test_the_watchdog_kill_is_oom_for_the_whole_group(tmp_path):
    outs = [tmp_path / "0.json", tmp_path / "1.json"]
    outcomes = run_group([WAITS, GROWS], [{}, {}], outs, timeout_s=60, memory_bytes=200 << 20)
    assert [o.status for o in outcomes] == [OOM, OOM]
    assert _group_status(outcomes) == OOM


def test_check_counts_an_oom_group_as_a_does_not_fit_that_held():
    row = SimpleNamespace(
        strategy="sharded-dir",
        status=OOM,
        memory_limit="cgroup-v2",
        memory_limit_enforced=True,
        cgroup_peak_bytes=float("nan"),
    )
    held, line = _line(row, OOM)
    assert held and "held" in line and "DID NOT HOLD" not in line
    assert signal.SIGKILL == 9  # the fake OOM kill above is the kernel's signal
