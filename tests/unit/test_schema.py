"""Results schema v2: write rows, read them back, summarize; v1 files, a cut last line, bad ones."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from bench.errors import SchemaVersionError
from bench.records.results import export_parquet, read_jsonl, read_results, summarize
from bench.records.schema import PhaseRecord, RunRecord, SampleRecord, field_names, to_dict
from bench.records.writer import ResultsWriter
from loader.vocabulary import REFERENCE, STRATEGY

GiB = 1 << 30


def _run() -> RunRecord:
    return RunRecord(
        "20250101T000000Z-abcdef",
        "host",
        "2025-01-01T00:00:00Z",
        "cpu",
        2,
        24 * GiB,
        "6.1",
        "3.11",
        "0.10.2",
        "0.12.8",
        "0.8.0",
        "2.0",
        "0.1.0",
        {"XLA_FLAGS": "x"},
        ["loadbench"],
    )


def _phase(result_id: str, phase: str, order: int, *, peak: int, wall: float, status="ok"):
    return PhaseRecord(
        run_id="20250101T000000Z-abcdef",
        result_id=result_id,
        shapes="tiny",
        strategy="eager",
        kind=STRATEGY,
        dtype="native",
        devices=1,
        processes=1,
        process_index=0,
        repeat=0,
        status=status,
        error=None if status == "ok" else "boom",
        checkpoint_bytes=GiB,
        largest_tensor_bytes=GiB // 4,
        tensors=3,
        baseline_rss_bytes=GiB,
        peak_rss_bytes=peak,
        wall_s=wall,
        phase=phase,
        phase_order=order,
        phase_wall_s=wall / 2,
        phase_peak_rss_bytes=peak,
        phase_end_rss_bytes=GiB,
        phase_anon_rss_bytes=GiB,
        phase_file_rss_bytes=0,
        peak_source="hwm",
        substeps_s={"read": 0.1} if phase == "stream" else {},
    )


def _write(path, results):
    with ResultsWriter(path) as w:
        w.write(_run())
        for rid, peak, wall, status in results:
            w.write_many(
                [
                    _phase(rid, "stream", 0, peak=peak, wall=wall, status=status),
                    _phase(rid, "total", 1, peak=peak, wall=wall, status=status),
                    SampleRecord("20250101T000000Z-abcdef", rid, 0, 0.01, "stream", GiB, 0),
                ]
            )


def test_round_trip_and_summary(tmp_path):
    path = tmp_path / "host" / "run.jsonl"
    _write(path, [("a", 3 * GiB, 1.0, "ok"), ("b", 4 * GiB, 3.0, "ok"), ("c", 0, 0.0, "crashed")])
    res = read_results(tmp_path)
    assert res.errors == []
    assert len(res.runs) == 1 and res.runs.iloc[0]["allocator_env"] == {"XLA_FLAGS": "x"}
    assert list(res.phases.columns[: len(field_names(PhaseRecord))]) == field_names(PhaseRecord)
    assert len(res.phases) == 6 and len(res.samples) == 3
    assert res.phases[res.phases.phase == "stream"].iloc[0]["substeps_s"] == {"read": 0.1}
    assert res.phases.iloc[0]["peak_ratio"] == pytest.approx(2.0)
    s = summarize(res.phases)
    assert len(s) == 1
    row = s.iloc[0]
    assert row["status"] == "crashed" and row["repeats"] == 3 and row["ok_repeats"] == 2
    assert row["peak_ratio"] == pytest.approx(2.5)  # median of 2.0 and 3.0
    assert row["wall_s"] == pytest.approx(2.0) and row["wall_s_min"] == 1.0
    assert row["throughput_bytes_per_s"] == pytest.approx(GiB / 2.0)
    assert row["stream_wall_s"] == pytest.approx(1.0)


def test_truncated_last_line_is_skipped_and_reported_without_a_python_warning(tmp_path):
    path = tmp_path / "run.jsonl"
    _write(path, [("a", 3 * GiB, 1.0, "ok")])
    line = json.dumps(to_dict(_phase("z", "total", 1, peak=GiB, wall=1.0)))
    with open(path, "a") as fh:
        fh.write(line[: len(line) // 2])  # a kill mid-write
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a raw Python warning would fail here
        res = read_results(tmp_path)
    assert len(res.phases) == 2 and set(res.phases.result_id) == {"a"}
    assert len(res.errors) == 1 and "truncated" in res.errors[0][1]


def test_unknown_schema_version_names_the_file(tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    _write(good, [("a", 3 * GiB, 1.0, "ok")])
    bad.write_text(json.dumps({"schema_version": 99, "record": "run"}) + "\n")
    with pytest.raises(
        SchemaVersionError, match="bad.jsonl.*schema_version 99.*reads versions 1, 2"
    ):
        read_jsonl(bad)
    res = read_results(tmp_path)  # the rest is still read
    assert len(res.phases) == 2
    assert [f for f, _ in res.errors] == [str(bad)]


def test_empty_folder_has_schema_columns(tmp_path):
    res = read_results(tmp_path / "missing")
    assert res.phases.empty and "peak_rss_bytes" in res.phases and "t_s" in res.samples
    assert summarize(res.phases).empty


def test_parquet_export_reads_back(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "run.jsonl"
    _write(path, [("a", 3 * GiB, 1.0, "ok")])
    written = export_parquet(path)
    assert [p.name for p in written] == [
        "run.runs.parquet",
        "run.phases.parquet",
        "run.samples.parquet",
    ]
    phases = pd.read_parquet(written[1])
    assert len(phases) == 2 and json.loads(phases.iloc[0]["substeps_s"]) == {"read": 0.1}
    assert not math.isnan(phases.iloc[0]["peak_ratio"])
    mode = path.stat().st_mode & 0o777  # the writer's 0644 (less the umask)
    assert {p.stat().st_mode & 0o777 for p in written} == {mode} and mode & 0o044


def _as_v1(record) -> dict:
    """A record as schema v1 wrote it: version 1, and no `kind` (v1 had none)."""
    obj = to_dict(record)
    obj.pop("kind", None)
    return {**obj, "schema_version": 1}


def test_v1_files_are_read_with_the_kind_derived(tmp_path):
    from dataclasses import replace

    floor = replace(_phase("f", "total", 0, peak=2 * GiB, wall=1.0), strategy="floor")
    rows = [_run(), _phase("a", "total", 0, peak=3 * GiB, wall=1.0), floor]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(_as_v1(r)) + "\n" for r in rows))
    res = read_results(tmp_path)
    assert res.errors == [] and len(res.runs) == 1
    assert dict(zip(res.phases.strategy, res.phases.kind, strict=True)) == {
        "eager": STRATEGY,
        "floor": REFERENCE,
    }
    assert set(summarize(res.phases).kind) == {STRATEGY, REFERENCE}


def test_files_from_before_the_commit_and_backend_read_with_both_unknown(tmp_path):
    def as_v2(record) -> dict:
        obj = to_dict(record)
        for new in ("git_commit", "backend"):
            obj.pop(new, None)
        return obj

    rows = [_run(), _phase("a", "total", 0, peak=3 * GiB, wall=1.0)]
    (tmp_path / "v2.jsonl").write_text("".join(json.dumps(as_v2(r)) + "\n" for r in rows))
    res = read_results(tmp_path)
    assert res.errors == [] and res.runs["git_commit"].isna().all()
    assert res.phases["backend"].isna().all()


def test_a_run_record_names_the_commit_it_ran_from():
    from bench.machine.facts import git_commit, run_record

    commit = git_commit()  # None outside a git checkout (an installed wheel)
    assert run_record("r").git_commit == commit
    if commit is not None:
        assert len(commit.removesuffix("-dirty")) >= 7
