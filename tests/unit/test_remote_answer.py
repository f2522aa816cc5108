"""What remote runs over shaped links answer: the concurrency a link wants (`recommend --link`,
the Target host page) and a load's time and host peak over a link that was not measured."""

from __future__ import annotations

import json

import pytest

from bench.analysis.recommend import ok_runs
from bench.analysis.remote import basis_sentence, concurrency_curves, predict_link
from bench.cli import main
from bench.errors import NoResultsError
from bench.link.shaping import Link
from bench.records.results import read_results
from bench.records.schema import to_json_line
from tests.records import run_record, total_row

MIB = 1 << 20
CKPT = 500 * MIB
BASE = 300 * MIB


def _remote(link: str, concurrency: int, wall: float, *, strategy="pipelined", source="http"):
    ceiling = Link.parse(link).ceiling_s(CKPT)
    return total_row(
        strategy=strategy,
        checkpoint_bytes=CKPT,
        baseline_rss_bytes=BASE,
        peak_rss_bytes=BASE + CKPT + 64 * MIB,
        wall_s=wall,
        source=source,
        link=link,
        concurrency=concurrency,
        ceiling_s=ceiling,
        ceiling_ratio=wall / ceiling,
    )


def _write(tmp_path, rows):
    path = tmp_path / "run.jsonl"
    path.write_text("".join(to_json_line(r) + "\n" for r in [*rows, run_record()]))
    return tmp_path


# 1Gbit: 500 MiB take 4.19 s at best; 10Gbit: 0.42 s at best
CURVE_1G = {1: (9.0, 9.4), 4: (4.9, 5.0), 16: (4.4, 4.5), 64: (4.7, 4.8)}
CURVE_10G = {1: (3.0, 3.1), 4: (1.2, 1.3), 16: (0.84, 0.86), 64: (0.60, 0.62)}


@pytest.fixture
def folder(tmp_path):
    rows = [
        _remote(link, c, w)
        for link, curve in (("1Gbit", CURVE_1G), ("10Gbit", CURVE_10G))
        for c, walls in curve.items()
        for w in walls
    ]
    rows.append(total_row(wall_s=0.3))  # a local load: answers no link question
    return _write(tmp_path, rows)


def test_each_link_wants_its_fastest_concurrency_and_the_default_is_placed(folder):
    curves = {c.link: c for c in concurrency_curves(read_results(folder))}
    assert set(curves) == {"1Gbit", "10Gbit"}
    slow, fast = curves["1Gbit"], curves["10Gbit"]
    assert slow.wanted.concurrency == 16 and slow.default_rank == 1
    assert slow.wanted.wall_s == pytest.approx(4.45) and slow.wanted.runs == 2
    assert "the default (16) is the fastest" in slow.sentence()
    assert fast.wanted.concurrency == 64 and fast.default_rank == 2
    assert "wants concurrency 64" in fast.sentence()
    assert "the default (16) is 2nd of 4, 1.39x the fastest's time" in fast.sentence()


def test_a_link_not_measured_is_predicted_from_the_closest_measured_link(folder):
    results = read_results(folder)
    (near_1g,) = predict_link(results, Link.parse("2Gbit"))
    ratio = 4.45 / Link.parse("1Gbit").ceiling_s(CKPT)  # 1Gbit is nearer 2Gbit than 10Gbit
    assert near_1g.basis_link == "1Gbit" and near_1g.basis_concurrency == 16
    assert near_1g.predicted_wall_s == pytest.approx(ratio * Link.parse("2Gbit").ceiling_s(CKPT))
    assert near_1g.predicted_peak_bytes == BASE + CKPT + 64 * MIB
    assert not near_1g.lower_bound
    (near_10g,) = predict_link(results, Link.parse("5Gbit"), checkpoint_bytes=2 * CKPT)
    ratio = 0.61 / Link.parse("10Gbit").ceiling_s(CKPT)
    assert near_10g.basis_link == "10Gbit" and near_10g.basis_concurrency == 64
    assert near_10g.predicted_wall_s == pytest.approx(
        ratio * Link.parse("5Gbit").ceiling_s(2 * CKPT)
    )
    assert near_10g.predicted_peak_bytes == pytest.approx(BASE + 2 * (CKPT + 64 * MIB), rel=1e-6)
    (beyond,) = predict_link(results, Link.parse("40Gbit"))
    assert beyond.lower_bound


def test_remote_runs_never_pool_into_the_local_fit(folder):
    rows = ok_runs(read_results(folder))
    assert list(rows["source"].unique()) == ["file"] and len(rows) == 1


def test_recommend_link_says_what_it_extrapolated_from(folder, capsys):
    assert main(["recommend", "--link", "1Gbit", "--results", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Extrapolated from 2 runs over http at 1Gbit" in out
    assert "Over http at 1Gbit" in out and "wants concurrency 16" in out
    assert main(["recommend", "--link", "1Gbit", "--results", str(folder), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    (pred,) = answer["predictions"]
    assert pred["predicted_wall_s"] == pytest.approx(4.45)  # the measured link: its own time
    assert [c["wanted"] for c in answer["concurrency"]] == [16]


def test_recommend_link_without_remote_runs_says_so_in_one_line(tmp_path, capsys):
    loopback = total_row(source="http", link="unshaped", concurrency=16)  # no bandwidth: no answer
    _write(tmp_path, [total_row(wall_s=0.3), loopback])
    with pytest.raises(NoResultsError):
        predict_link(read_results(tmp_path), Link.parse("1Gbit"))
    assert main(["recommend", "--link", "1Gbit", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no remote runs over a shaped link" in err and len(err.strip().splitlines()) == 1


def test_recommend_link_refuses_an_option_it_does_not_take(folder, capsys):
    assert main(["recommend", "--link", "1Gbit", "--accelerator", "--results", str(folder)]) == 2
    assert "--accelerator is not taken with --link" in capsys.readouterr().err


def test_a_prediction_from_a_tiny_checkpoint_says_it_is_overhead(tmp_path):
    tiny = total_row(
        shapes="tiny-gpt2",
        checkpoint_bytes=MIB,
        peak_rss_bytes=BASE + 2 * MIB,
        source="http",
        link="100Mbit",
        concurrency=16,
        ceiling_s=Link.parse("100Mbit").ceiling_s(MIB),
    )
    predictions = predict_link(read_results(_write(tmp_path, [tiny])), Link.parse("1Gbit"))
    assert "whose time is mostly per-load overhead" in basis_sentence(predictions)
