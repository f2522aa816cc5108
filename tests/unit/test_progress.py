"""`bench run`'s progress: a bar on a terminal, one line per child run elsewhere (a CI log)."""

from __future__ import annotations

from types import SimpleNamespace

from bench.run.runner import _Progress


def _task(repeat: int) -> SimpleNamespace:
    return SimpleNamespace(
        checkpoint=SimpleNamespace(shapes="gpt2"),
        entry=SimpleNamespace(name="pipelined"),
        repeat=repeat,
        memray_bin=None,
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
