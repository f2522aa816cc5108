"""Plausible-but-wrong CLI input is refused in one line showing what works, and writes nothing."""

from __future__ import annotations

import pytest

from bench.cli import main


def _refused(capsys, argv: list[str], *fragments: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert all(f in err for f in fragments), err


@pytest.mark.parametrize("size", ["4", "4096", "0GiB", "-1GiB", "lots"])
def test_size_without_unit_or_not_positive(capsys, tmp_path, size):
    recommend = ["recommend", "--shapes", "tiny-gpt2", "--results", str(tmp_path)]
    _refused(capsys, [*recommend, f"--host-ram={size}"], "--host-ram", "4GiB")
    run = ["bench", "run", "--shapes", "tiny-gpt2", "--out", str(tmp_path / "r")]
    _refused(capsys, [*run, f"--memory-budget={size}"], "--memory-budget", "4GiB")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "flag, value, example",
    [
        ("--repeats", "0", "--repeats 3"),
        ("--repeats", "-2", "--repeats 3"),
        ("--timeout", "0", "--timeout 900"),
        ("--timeout", "-5", "--timeout 900"),
        ("--timeout", "nan", "--timeout 900"),
        ("--devices", "0", "--devices 8"),
        ("--processes", "0", "--processes 2"),
    ],
)
def test_counts_and_times_must_be_positive(capsys, tmp_path, flag, value, example):
    out = tmp_path / "r"
    _refused(
        capsys,
        ["bench", "run", "--shapes", "tiny-gpt2", "--out", str(out), f"{flag}={value}"],
        flag,
        example,
    )
    assert not out.exists()


def test_recommend_devices_zero(capsys, tmp_path):
    argv = ["recommend", "--shapes", "tiny-gpt2", "--host-ram", "4GiB", "--devices", "0"]
    _refused(capsys, [*argv, "--results", str(tmp_path)], "--devices 0", "--devices 8")


def test_processes_no_selected_strategy_can_use(capsys, tmp_path):
    out = tmp_path / "r"
    argv = ["bench", "run", "--shapes", "tiny-gpt2", "--strategies", "eager", "--processes", "3"]
    _refused(capsys, [*argv, "--out", str(out)], "--processes 3", "multi-process")
    assert not out.exists()


def test_unknown_preset_leaves_no_run_record(capsys, tmp_path):
    out = tmp_path / "r"
    _refused(capsys, ["bench", "run", "--shapes", "tiny-gtp2", "--out", str(out)], "tiny-gtp2")
    assert not out.exists()
