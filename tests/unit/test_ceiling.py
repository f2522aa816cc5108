"""Every row held against the machine's ceiling: the probe's bandwidth for its situation, cached."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.analysis.compare import sides_text
from bench.analysis.summary import tables
from bench.limits import pagecache
from bench.records.results import read_results
from bench.run import ceiling
from bench.run.config import RunConfig
from bench.run.runner import run_bench
from tests.unit.probe_records import GB, hand_probe


def test_the_ceiling_is_the_bandwidth_of_the_rows_situation():
    probe = hand_probe()
    assert ceiling.ceiling_fields(probe, 8 * 10**9, "warm", None)["ceiling_s"] == 2.0
    assert ceiling.ceiling_fields(probe, 8 * 10**9, "cold", None)["ceiling_s"] == 8.0
    capped = ceiling.ceiling_fields(probe, 8 * 10**9, "cold", 250_000_000)
    assert capped == {"ceiling_s": 32.0, "ceiling_probe_id": probe.probe_id}
    assert ceiling.bandwidth(probe, "cold", int(2 * GB)) == GB  # the slower of disk and cap
    no_disk = hand_probe(cold_read_bytes_per_s=None, cold_read_threads=None, cold_read={})
    assert ceiling.ceiling_fields(no_disk, 8 * 10**9, "cold", None) == {}
    assert ceiling.ceiling_fields(None, 8 * 10**9, "warm", None) == {}


def test_a_partly_cached_warm_run_is_held_against_the_disk_for_what_was_not_cached():
    probe = hand_probe()  # warm copy 4 GB/s, disk 1 GB/s
    ckpt = 8 * 10**9

    def seconds(cache, resident):
        return ceiling.ceiling_fields(probe, ckpt, cache, None, resident)["ceiling_s"]

    assert seconds("warm", 1.0) == 2.0 and seconds("warm", None) == 2.0  # all cached, or unknown
    assert seconds("warm", 0.5) == 4.0  # 4 GB off the disk take longer than 8 GB copied
    assert seconds("warm", 0.9) == 2.0  # 0.8 GB off the disk: the copy is the slower
    assert seconds("cold", 0.3) == 8.0  # a cold run's stray cached pages do not count
    no_disk = hand_probe(cold_read_bytes_per_s=None, cold_read_threads=None, cold_read={})
    assert ceiling.ceiling_fields(no_disk, ckpt, "warm", None, 0.5)["ceiling_s"] == 2.0


def test_the_runner_gives_a_row_the_ceiling_of_its_measured_page_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "lbcache"))
    probe = hand_probe()
    monkeypatch.setattr(ceiling.Ceiling, "probe", lambda self, nbytes: probe)
    half = pagecache.CacheOutcome("warm", resident_fraction=0.25)
    monkeypatch.setattr(pagecache, "with_growth", lambda outcome, files: half)
    row = _run(tmp_path)
    disk_s = 0.75 * row.checkpoint_bytes / probe.cold_read_bytes_per_s
    assert row.resident_fraction == 0.25
    assert row.ceiling_s == pytest.approx(max(row.checkpoint_bytes / (4 * GB), disk_s))


def test_compare_shows_each_sides_x_ceiling():
    two = pd.Series({"ceiling_base": 2.4, "ceiling_new": 2.1})
    assert sides_text(two, "ceiling") == "2.40x -> 2.10x"
    assert sides_text(pd.Series({"floor_base": float("nan"), "floor_new": 1.0}), "floor") == (
        "- -> 1.00x"
    )


def _run(tmp_path, reprobe=False):
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=["floor"],
        repeats=1,
        out=tmp_path / "results",
        progress=False,
        reprobe=reprobe,
    )
    res = read_results(run_bench(config).jsonl)
    row = res.phases[res.phases.phase == "total"].iloc[0]
    # the column holds the paired ratio: the wall over the copy pass timed beside the child
    assert "x ceiling" in tables(res) and f"{row.paired_ratio:.2f}x (n=1)" in tables(res)
    assert row.reference_s > 0 and row.paired_ratio == pytest.approx(row.wall_s / row.reference_s)
    return row


def test_a_run_probes_once_caches_the_probe_and_reprobes_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "lbcache"))
    row = _run(tmp_path)
    (cached,) = (tmp_path / "results").glob("*/probe-*.json")
    probe = ceiling.read_probe(cached)
    assert row.ceiling_probe_id == probe.probe_id
    assert row.ceiling_s == pytest.approx(row.checkpoint_bytes / probe.warm_copy_bytes_per_s)
    assert row.ceiling_ratio == pytest.approx(row.wall_s / row.ceiling_s)
    assert _run(tmp_path).ceiling_probe_id == probe.probe_id  # the cached probe, reused
    assert _run(tmp_path, reprobe=True).ceiling_probe_id != probe.probe_id


def test_a_blocks_title_gives_its_ceiling_though_its_first_row_was_skipped():
    from bench.analysis.summary import words as summary

    rows = pd.DataFrame({"ceiling_s": [float("nan"), 0.42, 0.42], "strategy": ["a", "b", "c"]})
    assert summary._ceiling(rows) == "0.42 s"
    assert summary._ceiling(rows.assign(ceiling_s=float("nan"))) == ""
    # rows held to different bytes (several processes' shares beside a checkpoint): each said
    apart = rows.assign(ceiling_s=[0.42, 0.5, float("nan")])
    assert summary._ceiling(apart) == "0.42 s a, 0.50 s b"


def test_each_row_is_held_against_its_runs_floor_on_the_same_shapes_and_cache(tmp_path):
    from bench.analysis.summary import tables
    from bench.records.results import read_results, summarize
    from bench.records.writer import ResultsWriter
    from loader.vocabulary import REFERENCE
    from tests.records import total_row

    with ResultsWriter(tmp_path / "m" / "r.jsonl") as w:
        for cache, floor_wall in (("warm", 0.5), ("cold", 2.0)):
            w.write(total_row(strategy="floor", kind=REFERENCE, wall_s=floor_wall, cache=cache))
            w.write(total_row(strategy="pipelined", wall_s=1.0, cache=cache))
    results = read_results(tmp_path)
    summary = summarize(results.phases).set_index(["strategy", "cache"])["floor_ratio"]
    assert summary[("pipelined", "warm")] == 2.0 and summary[("pipelined", "cold")] == 0.5
    assert summary[("floor", "warm")] == 1.0
    assert "x floor" in tables(results) and "2.00x" in tables(results)
