"""`recommend --probe`: the time model fitted on hand-made runs, scaled by a hand-made probe."""

from __future__ import annotations

import json

import pytest

from bench.analysis import time_model
from bench.analysis.recommend import TargetCheckpoint, spec_summary
from bench.analysis.target import predict_time
from bench.analysis.time_model import TimeModel, fit_time
from bench.cli import main
from bench.errors import BenchError
from bench.records.results import read_results
from bench.records.writer import ResultsWriter
from tests.unit.probe_records import (
    GB,
    K_BYTE,
    K_TENSOR,
    OVERLAP,
    P,
    hand_probe,
    slow_target,
    timed_rows,
)

# here: 2 GB/s per copy thread (4 GB/s on 2), first touch 5 GB/s at any size (0.2 s per GB)
HERE = hand_probe(probe_id="here-probe", machine="here")
# the target: one CPU's quota of two, half the per-thread copy speed and interpreter speed, a
# 250 MB/s disk, and fresh memory that slows past 1 GB: 0.5 s for 1 GB, 4 s for 5 GB (so 0.875 s
# per GB past 5 GB)
THERE = slow_target(first_touch={str(10**9): 2 * GB, str(5 * 10**9): 1.25 * GB})


def test_fresh_memory_is_charged_along_the_probes_first_touch_curve():
    assert time_model.touch_seconds(HERE, 9 * 10**9) == pytest.approx(1.8)
    assert time_model.touch_seconds(THERE, 10**9 / 2) == pytest.approx(0.25)
    assert time_model.touch_seconds(THERE, 3 * 10**9) == pytest.approx(0.5 + 1.75)
    assert time_model.touch_seconds(THERE, 9 * 10**9) == pytest.approx(4 + 3.5)


def test_the_prediction_scales_cpu_work_cores_and_the_disk():
    model = TimeModel("s", K_BYTE, K_TENSOR, P, OVERLAP, runs=4, shapes=("a", "b"))
    ckpt = TargetCheckpoint(9 * 10**9, 0, 1000)
    warm = predict_time(model, HERE, THERE, ckpt, "warm")
    # cpu 9 s x2 (copy speed) + 1 s x2 (interpreter) + 7.5 s of first touch there = 27.5 s, on
    # min(1.5, 1) CPUs
    assert warm.predicted_wall_s == pytest.approx(27.5)
    cold = predict_time(model, HERE, THERE, ckpt, "cold")
    # + 36 s of disk at 250 MB/s, half of the 27.5 s CPU hidden behind it
    assert cold.disk_s == pytest.approx(36.0) and cold.predicted_wall_s == pytest.approx(49.75)
    same_host = predict_time(model, HERE, HERE, ckpt, "warm")
    assert same_host.predicted_wall_s == pytest.approx((9 + 1 + 1.8) / P)


def test_a_cold_prediction_from_a_probe_without_a_disk_names_the_flag():
    model = TimeModel("s", K_BYTE, K_TENSOR, P, OVERLAP, runs=4, shapes=("a",))
    no_disk = hand_probe(cold_read_bytes_per_s=None, cold_read_threads=None, cold_read={})
    with pytest.raises(BenchError, match="--disk PATH"):
        predict_time(model, HERE, no_disk, TargetCheckpoint(1, 1, 1), "cold")


SIZES = [(10**9, 100), (3 * 10**9, 150)]


def _results(tmp_path):
    folder = tmp_path / "res"
    with ResultsWriter(folder / "m" / "measured.jsonl") as w:
        for cache in ("warm", "cold"):
            for ckpt, tensors in SIZES:
                for i in range(2):
                    rid = f"s-{ckpt}-{cache}-{i}"
                    w.write_many(timed_rows(ckpt, tensors, cache, HERE, result_id=rid, repeat=i))
    (folder / "m" / "probe-here.json").write_text(HERE.to_json())
    return folder


def test_the_fit_recovers_the_terms_of_hand_made_runs(tmp_path):
    folder = _results(tmp_path)
    rows = time_model.unlimited_runs(read_results(folder))
    model = fit_time("s", rows, HERE, time_model.build_cpu(read_results(folder).phases))
    assert model.cpu_s_per_byte == pytest.approx(K_BYTE, rel=1e-6)
    assert model.cpu_s_per_tensor == pytest.approx(K_TENSOR, rel=1e-6)
    assert model.parallelism == pytest.approx(P) and model.overlap == pytest.approx(OVERLAP)


def test_recommend_probe_prints_the_target_times(tmp_path, capsys):
    folder = _results(tmp_path)
    probe = tmp_path / "target.json"
    probe.write_text(THERE.to_json())
    argv = ["recommend", "--shapes", "gpt2", "--results", str(folder), "--probe", str(probe)]
    assert main([*argv, "--json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    gpt2 = spec_summary("gpt2")
    touch = time_model.touch_seconds(THERE, gpt2.checkpoint_bytes)
    cpu = 2 * K_BYTE * gpt2.checkpoint_bytes + 2 * K_TENSOR * gpt2.tensors + touch
    (s,) = out["strategies"]
    assert s["predicted_wall_s"] == pytest.approx(cpu / 1.0)
    assert out["inputs"]["host_ram_bytes"] == THERE.ram_bytes  # from the probe
    assert any("extrapolated to target" in n for n in out["notes"])
    # how the CPU work was scaled is the fit's detail, in --json only (plain words: item 4)
    assert any("CPU work scaled" in d for d in out["details"])
    assert not any("CPU work scaled" in n for n in out["notes"])
    assert main([*argv, "--cache", "cold", "--disk-read-speed", "1GB/s"]) == 2
    assert "drop --disk-read-speed" in capsys.readouterr().err
