"""`bench run`'s progress: a bar on a terminal, one line per child run elsewhere (a CI log)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from bench.run.runner import _Progress
from bench.run.task_times import CHILDREN, PAGE_CACHE, PROBE, REFERENCE, TaskTimes
from loader.options import NO_OPTIONS


def _task(repeat: int) -> SimpleNamespace:
    return SimpleNamespace(
        checkpoint=SimpleNamespace(shapes="gpt2"),
        entry=SimpleNamespace(name="pipelined"),
        repeat=repeat,
        memray_bin=None,
        **dict.fromkeys(
            ("model", "processes", "devices", "cache", "source", "link", "concurrency")
        ),
        options=NO_OPTIONS,
    )


def test_without_a_terminal_each_child_run_is_a_line_counting_repeats_from_1(capsys):
    """Issue 54: a 5-minute `bench run` printed nothing without a TTY."""
    with _Progress(True, 2) as progress:
        progress.ended(_task(0), True, 1.25)
        progress.add(1)
        progress.ended(_task(1), False, 0.5)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "loadbench: [1/2] gpt2 pipelined repeat 1: ok, 1.2 s",
        "loadbench: [2/3] gpt2 pipelined repeat 2: not ok (its row says why), 0.5 s",
    ]
    assert "\r" not in err


def test_no_progress_asked_prints_nothing(capsys):
    with _Progress(False, 1) as progress:
        progress.ended(_task(0), True, 1.0)
    assert capsys.readouterr().err == ""


def test_a_line_says_where_the_seconds_went(capsys):
    """Issue 53: on a TPU host a row took 241 s, 224 of them the machine probe; now it says so."""
    times = TaskTimes()
    times.add(PROBE, 224.1)
    times.add(REFERENCE, 0.9)
    times.add(PAGE_CACHE, 0.01)  # under SHOWN_FROM_S: left out
    times.add(CHILDREN, 15.6)
    steps = {"backend": 7.1, "target": 2.4, "load": 1.3, "verify": 2.2}
    with _Progress(True, 1) as progress:
        progress.ended(_task(0), True, 241.5, times.text(steps))
    assert capsys.readouterr().err.splitlines() == [
        "loadbench: [1/1] gpt2 pipelined repeat 1: ok, 241.5 s: probe 224.1 s; references 0.9 s;"
        " child 15.6 s (start 2.6, backend 7.1, target 2.4, load 1.3, verify 2.2)"
    ]
    assert times.text() == "probe 224.1 s; references 0.9 s; child 15.6 s"  # no child steps


def test_a_step_timed_twice_adds_up():
    times = TaskTimes()
    for _ in range(2):
        with times.timing(REFERENCE):
            pass
    times.add(REFERENCE, 0.5)
    assert times.seconds[REFERENCE] >= 0.5 and list(times.seconds) == [REFERENCE]


def test_the_probe_a_first_repeat_ran_is_not_its_configurations_repeat_budget():
    """A fresh machine's first task runs the machine probe (75 s on the VM): charged to the first
    configuration, it spent that configuration's `--repeat-budget`, which then stopped at two
    unsettled repeats while the others were extended."""
    from bench.run.repeats import RepeatPolicy, Tallies
    from bench.run.runner import _tallied

    class Execution:
        calls = 0

        def run(self, task, times):
            Execution.calls += 1
            if Execution.calls == 1:
                with times.timing(PROBE):
                    time.sleep(0.4)
            return (1.0 if Execution.calls % 2 else 2.0), None, True, None

    tallies: Tallies[tuple] = Tallies(RepeatPolicy(min_repeats=2, max_repeats=5, budget_s=0.3))
    with _Progress(False, 2) as progress:
        for repeat in range(2):
            _tallied(Execution(), _task(repeat), tallies, progress)  # type: ignore[arg-type]
    (tally,) = tallies.by_key.values()
    assert tally.elapsed_s < 0.3, "the probe's seconds were counted as the configuration's own"
    assert tallies.wanting(list(tallies.by_key)) == list(tallies.by_key)
