"""Every run records what it is: how it ended (`status`), and what it was asked to run under
which limits; a refused run writes nothing; `recommend --check` writes under `checks/`."""

from __future__ import annotations

import argparse
import json

import pytest

from bench.commands import check as check_cmd
from bench.errors import BenchError
from bench.records.results import read_results
from bench.records.schema import RunRecord
from bench.records.writer import ResultsWriter
from bench.run import runner
from bench.run.config import RunConfig
from bench.vocabulary import COMPLETE, FAILED, INTERRUPTED, RUNNING


def _config(tmp_path, **kw) -> RunConfig:
    kw = {"shapes": ["tiny-gpt2"], "strategies": ["eager"], "repeats": 2, **kw}
    return RunConfig(out=tmp_path / "results", progress=False, **kw)


def _runs(tmp_path):
    return read_results(tmp_path / "results").runs


def _fake_matrix(then: BaseException | None):
    """A matrix that writes one (skipped) row, then raises `then`."""

    def run(config, selected, writer, leader=None):
        writer.write(_run_line(writer.path.stem, "extra"))  # any line past the header
        if then is not None:
            raise then

    return run


def _run_line(run_id: str, machine: str, **kw) -> RunRecord:
    facts = dict(cpu_model="x", cpu_count=2, ram_bytes=1 << 30, kernel="k", python="3")
    versions = dict.fromkeys(
        ["jax_version", "flax_version", "safetensors_version", "numpy_version"], None
    )
    when = "2026-01-01T00:00:00Z"
    return RunRecord(run_id, machine, when, **facts, **versions, loadbench_version=None, **kw)


@pytest.mark.parametrize(("then", "status"), [(None, COMPLETE), (KeyboardInterrupt(), INTERRUPTED)])
def test_the_end_record_says_how_the_run_ended(tmp_path, monkeypatch, then, status):
    monkeypatch.setattr(runner, "_run_matrix", _fake_matrix(then))
    outcome = runner.run_bench(_config(tmp_path, host_ram_bytes=3 << 30, cache="cold"))
    assert outcome.interrupted == (status == INTERRUPTED)
    (run,) = _runs(tmp_path).to_dict("records")
    assert run["status"] == status and run["finished_utc"]
    assert (run["cache"], run["host_ram_bytes"], run["strategies"], run["repeats"]) == (
        "cold",
        3 << 30,
        ["eager"],
        2,
    )
    assert run["check"] is False
    lines = [json.loads(x) for x in outcome.jsonl.read_text().splitlines()]
    assert [x["status"] for x in lines if x["record"] == "run" and x["machine"] != "extra"] == [
        RUNNING,
        status,
    ]


def test_an_error_after_rows_keeps_them_and_says_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_run_matrix", _fake_matrix(BenchError("disk full")))
    with pytest.raises(BenchError, match="disk full"):
        runner.run_bench(_config(tmp_path))
    assert list(_runs(tmp_path)["status"]) == [FAILED]


def test_a_refused_run_writes_nothing(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint")
    with pytest.raises(BenchError, match="--checkpoint"):
        runner.run_bench(_config(tmp_path, shapes=[], checkpoints=[str(text)]))
    with pytest.raises(BenchError, match="--dtype float77"):
        runner.run_bench(_config(tmp_path, dtype="float77"))
    assert not (tmp_path / "results").exists()


def test_a_refusal_inside_the_run_removes_the_header_only_file(tmp_path, monkeypatch):
    def refuse(config, selected, writer, leader=None):
        raise BenchError("refused")

    monkeypatch.setattr(runner, "_run_matrix", refuse)
    with pytest.raises(BenchError, match="refused"):
        runner.run_bench(_config(tmp_path))
    assert not (tmp_path / "results").exists()


def test_an_unfinished_file_reads_as_interrupted_and_an_old_one_as_complete(tmp_path):
    path = tmp_path / "results" / "m" / "r1.jsonl"
    with ResultsWriter(path) as w:
        w.write(_run_line("r1", "m", status=RUNNING))
        assert list(read_results(path).runs["status"]) == [RUNNING]  # still being written
    assert list(read_results(path).runs["status"]) == [INTERRUPTED]  # its writer is gone
    old = tmp_path / "results" / "m" / "r0.jsonl"
    line = json.loads(path.read_text())
    for key in ("status", "check", "strategies", "repeats", "cache"):
        line.pop(key)
    old.write_text(json.dumps({**line, "run_id": "r0"}) + "\n")
    assert list(read_results(old).runs["status"]) == [COMPLETE]  # written before status existed


def test_check_runs_go_to_their_own_folder_and_say_so(tmp_path, monkeypatch):
    seen = {}

    def fake_run(config):
        seen["config"] = config
        raise KeyboardInterrupt  # enough: the config is what this test reads

    monkeypatch.setattr(check_cmd, "run_bench", fake_run)
    rec = argparse.Namespace(recommended="pipelined", strategies=[])
    args = argparse.Namespace(shapes="gpt2", results=str(tmp_path / "results"))
    with pytest.raises(KeyboardInterrupt):
        check_cmd.check(rec, args, 1 << 30)
    config = seen["config"]
    assert config.check is True and config.out == tmp_path / "results" / "checks"
    assert config.host_ram_bytes == 1 << 30
