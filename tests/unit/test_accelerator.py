"""`recommend --accelerator` and the backend every answer names (issue 36 item 1, CLI side)."""

from __future__ import annotations

import json

import pytest

from bench.analysis.accelerator import Accelerator
from bench.analysis.advice import advise, sentences, to_text
from bench.analysis.recommend import TargetCheckpoint
from bench.cli import main
from bench.records.results import read_results
from bench.records.writer import ResultsWriter
from bench.vocabulary import DOES_NOT_FIT, FITS
from tests.records import total_row

MiB, GiB = 1 << 20, 1 << 30
BASE = 300 * MiB
SETS = [
    ("small", 100 * MiB, 10 * MiB),
    ("mid", 500 * MiB, 20 * MiB),
    ("big", 1000 * MiB, 100 * MiB),
]
TARGET = TargetCheckpoint(8 * GiB, 72 * MiB, 997)  # like sa3-medium
RING, BUDGET = 40 * MiB, 64 * MiB
NOT_MEASURED = "predicted from CPU staged runs, not measured on a device"


def _rows(staged: bool = True, **extra):
    """CPU runs of `lean` (peak: the checkpoint over baseline) and `eager` (3x); with `staged`,
    `lean`'s staged runs too: a 40 MiB ring under a 64 MiB budget, and slow (never fitted on)."""
    rows = []
    for shapes, ckpt, largest in SETS:
        for i in range(2):
            common = dict(shapes=shapes, checkpoint_bytes=ckpt, largest_tensor_bytes=largest)
            common |= dict(baseline_rss_bytes=BASE, repeat=i, **extra)
            rows.append(total_row(strategy="lean", peak_rss_bytes=BASE + ckpt, wall_s=1, **common))
            rows.append(
                total_row(strategy="eager", peak_rss_bytes=BASE + 3 * ckpt, wall_s=5, **common)
            )
            if staged:
                rows.append(
                    total_row(
                        strategy="lean",
                        peak_rss_bytes=BASE + ckpt + RING,
                        wall_s=60,
                        staging_memory="pageable",
                        inflight_peak_bytes=RING,
                        budget_bytes=BUDGET,
                        **common,
                    )
                )
    return rows


def _results(tmp_path, rows):
    with ResultsWriter(tmp_path / "m" / "r.jsonl") as w:
        w.write_many(rows)
    return read_results(tmp_path)


def test_a_cpu_answer_names_its_backend_and_never_fits_the_model_in_a_small_host(tmp_path):
    adv = advise(_results(tmp_path, _rows()), TARGET, 4 * GiB, None, shapes="t", folder="f")
    assert all(s.verdict == DOES_NOT_FIT for s in adv.rec.strategies)
    said = sentences(adv)
    assert "CPU backend: the weights live in host RAM." in said
    assert "With a GPU/TPU the weights land in device memory: add --accelerator." in said
    # staged runs are not how a CPU host loads: lean's time is its plain runs' 1 s, not 60 s
    lean = next(s for s in adv.rec.strategies if s.strategy == "lean")
    assert lean.predicted_wall_s == pytest.approx(1.0, rel=1e-3)


def test_accelerator_fits_a_staged_strategy_in_host_ram_from_its_ring(tmp_path):
    res = _results(tmp_path, _rows())
    adv = advise(res, TARGET, 4 * GiB, None, shapes="t", folder="f", accelerator=Accelerator())
    lean = adv.rec.strategies[0]
    assert adv.rec.recommended == "lean" and lean.strategy == "lean"
    assert lean.predicted_peak_bytes == BASE + BUDGET  # the ring's bound, over its baseline
    assert lean.verdict == FITS and lean.device is not None
    assert lean.device.host_basis == "staged ring" and lean.device.ring_measured_bytes == RING
    assert lean.device.device_peak_bytes == TARGET.checkpoint_bytes + TARGET.largest_tensor_bytes
    assert lean.device.device_verdict is None  # no --device-ram
    eager = adv.rec.strategies[1]
    assert eager.device.host_basis == "CPU runs" and eager.verdict == DOES_NOT_FIT
    text = to_text(adv)
    assert "and an accelerator (device RAM not given)" in text
    assert NOT_MEASURED in text and "Give --device-ram" in text
    assert "Accelerator host: the weights land in device memory" in text


def test_the_device_verdict_counts_against_device_ram(tmp_path):
    res = _results(tmp_path, _rows())
    kw = dict(shapes="t", folder="f")
    small = advise(res, TARGET, 4 * GiB, None, accelerator=Accelerator(8 * GiB), **kw)
    assert small.rec.recommended is None
    lean = small.rec.strategies[0]
    assert lean.device.host_verdict == FITS and lean.device.device_verdict == DOES_NOT_FIT
    big = advise(res, TARGET, 4 * GiB, None, accelerator=Accelerator(80 * GiB), **kw)
    assert big.rec.recommended == "lean" and big.rec.strategies[0].device.device_verdict == FITS


def test_without_staged_runs_the_accelerator_answer_says_what_to_run(tmp_path):
    res = _results(tmp_path, _rows(staged=False))
    adv = advise(res, TARGET, 4 * GiB, None, shapes="t", folder="f", accelerator=Accelerator())
    assert adv.rec.recommended is None
    assert any("bench run --staging --strategies pipelined" in s for s in sentences(adv))


def test_runs_on_a_gpu_backend_say_so(tmp_path):
    res = _results(tmp_path, _rows(staged=False, backend="gpu"))
    said = sentences(advise(res, TARGET, 64 * GiB, None, shapes="t", folder="f"))
    assert any(s.startswith("GPU backend: the weights land in device memory") for s in said), said


def test_recommend_accelerator_on_the_command_line(tmp_path, capsys):
    _results(tmp_path, _rows())
    argv = ["recommend", "--shapes", "sa3-medium", "--host-ram", "4GiB", "--results", str(tmp_path)]
    assert main(argv) == 1  # nothing fits a CPU-only host of 4 GiB
    assert "no strategy fits 4.00 GiB, with 10% to spare" in capsys.readouterr().out
    assert main([*argv, "--accelerator", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommended"] == "lean" and out["inputs"]["accelerator"] is True
    device = out["strategies"][0]["device"]
    assert device["host_basis"] == "staged ring" and device["measured_on_device"] is False
    assert any(NOT_MEASURED in n for n in out["notes"])


def test_a_target_probe_with_an_accelerator_answers_as_accelerator_does():
    import argparse

    from bench.commands.recommend import _accelerator, _take_probe_accelerator
    from tests.unit.probe_records import hand_probe

    args = argparse.Namespace(accelerator=False, device_ram=None)
    _take_probe_accelerator(args, hand_probe())  # a CPU-only host's probe: nothing changes
    assert _accelerator(args) is None
    gpu = hand_probe(accelerator="gpu", device_memory_bytes=24 * GiB)
    _take_probe_accelerator(args, gpu)
    assert _accelerator(args) == Accelerator(24 * GiB)
    args = argparse.Namespace(accelerator=False, device_ram="80GiB")  # given: it stands
    _take_probe_accelerator(args, gpu)
    assert _accelerator(args) == Accelerator(80 * GiB)
