"""`loadbench show RUN`: a stored run's summary, reprinted (text, JSON, markdown, CSV); and every
command that reads results refuses part of a run unless `--allow-partial`."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bench.cli import main
from bench.commands.show import run_json
from bench.records.results import read_results
from bench.records.writer import ResultsWriter
from tests.records import run_record, total_row

MiB = 1 << 20
RUN = "20260101T000000Z-abc123"


def _stored(tmp_path, *, cpus=None) -> str:
    rows = [
        total_row(
            run_id=RUN,
            strategy=strategy,
            repeat=i,
            wall_s=wall * (1 + i / 100),
            peak_rss_bytes=100 * MiB + peak,
            cpus=cpus,
        )
        for strategy, wall, peak in (("pipelined", 0.5, 600 * MiB), ("eager", 0.9, 1800 * MiB))
        for i in range(3)
    ]
    record = run_record(
        run_id=RUN, git_commit="abc1234", strategies=["pipelined", "eager"], cpu_limit=cpus
    )
    with ResultsWriter(tmp_path / "here" / f"{RUN}.jsonl") as w:
        w.write_many([record, *rows])
    return str(tmp_path)


def test_show_reprints_the_summary_under_a_header_naming_the_run(tmp_path, capsys):
    folder = _stored(tmp_path, cpus=1)
    assert main(["show", RUN[:16], "--results", folder]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {RUN} · here · 2026-01-01 00:00 · commit abc1234 · complete · ")
    assert "1 CPU" in out.splitlines()[0] and "pipelined" in out and "eager" in out


def test_show_json_is_bench_runs_object(tmp_path, capsys):
    folder = _stored(tmp_path)
    assert main(["show", RUN, "--results", folder, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results_file"].endswith(f"{RUN}.jsonl")
    walls = {s["strategy"]: s["wall_s"] for s in out["strategies"]}
    assert walls == {"pipelined": pytest.approx(0.505), "eager": pytest.approx(0.909)}
    path = tmp_path / "here" / f"{RUN}.jsonl"  # the object `bench run --json` printed, whole
    assert out == json.loads(json.dumps(run_json(path, read_results(path))))
    assert out["decisions"] and out["decisions"][0]["shapes"] == "gpt2"


def test_show_takes_the_folder_bench_run_wrote(tmp_path, capsys):
    folder = _stored(tmp_path)
    assert main(["show", folder]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"run {RUN} · ") and not captured.err
    newer = "20260102T000000Z-def456"
    (tmp_path / "here" / f"{newer}.jsonl").write_text(
        (tmp_path / "here" / f"{RUN}.jsonl").read_text().replace(RUN, newer)
    )
    assert main(["show", folder, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["results_file"].endswith(f"{newer}.jsonl")
    assert f"holds 2 runs; showing the newest, {newer}" in captured.err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["show", str(empty)]) == 2
    assert "no runs here" in capsys.readouterr().err


def test_show_markdown_and_csv(tmp_path, capsys):
    path = str(tmp_path / "here" / f"{RUN}.jsonl")
    _stored(tmp_path)
    assert main(["show", path, "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| shapes | strategy |") and len(table) == 4
    assert lines[0].startswith(f"- run {RUN}") and "unconstrained" in lines[0]
    assert all("GiB" in row for row in table[2:])  # peaks in one unit, never MiB beside GiB
    assert main(["show", path, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    peaks = {r["strategy"]: int(r["peak_rss_bytes"]) for r in rows}
    assert peaks == {"pipelined": 700 * MiB, "eager": 1900 * MiB}


def test_show_names_an_unknown_run_and_refuses_part_of_one(tmp_path, capsys):
    folder = _stored(tmp_path)
    assert main(["show", "2025", "--results", folder]) == 2
    assert "no run '2025' under" in capsys.readouterr().err
    with open(tmp_path / "here" / f"{RUN}.jsonl", "a") as fh:
        fh.write('{"schema_version": 2, "record": "pha')
    assert main(["show", RUN, "--results", folder]) == 2
    assert "--allow-partial" in capsys.readouterr().err
    assert main(["show", RUN, "--results", folder, "--allow-partial"]) == 0
    assert "answering from part of a run (--allow-partial)" in capsys.readouterr().err


def test_history_refuses_part_of_a_run_unless_allowed(tmp_path, capsys):
    folder = _stored(tmp_path)
    with open(tmp_path / "here" / f"{RUN}.jsonl", "a") as fh:
        fh.write('{"schema_version": 2, "record": "pha')
    assert main(["history", folder]) == 2
    assert "holds part of a run only" in capsys.readouterr().err
    assert main(["history", folder, "--allow-partial"]) == 0


def test_report_refuses_part_of_a_run_before_writing_anything(tmp_path, capsys):
    folder = _stored(tmp_path)
    with open(tmp_path / "here" / f"{RUN}.jsonl", "a") as fh:
        fh.write('{"schema_version": 2, "record": "pha')
    out = tmp_path / "report.html"
    assert main(["report", folder, "--out", str(out)]) == 2
    assert "--allow-partial" in capsys.readouterr().err and not out.exists()
