"""Predicted times too close to call, the typical repeat spread, and the ranking check."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.analysis.advice import Advice, AdviceInputs, sentences, to_json
from bench.analysis.fit import FitModel, repeat_spread, typical_repeat_spread
from bench.analysis.recommend import Recommendation, StrategyPrediction, TargetCheckpoint, rank
from bench.analysis.ties import check_ranking, close_to_recommended, too_close
from bench.commands import target as target_command
from bench.vocabulary import DOES_NOT_FIT, FITS

GiB = 1 << 30


def _model(typical: float, repeats: int = 3) -> FitModel:
    return FitModel(
        peak_bytes_per_checkpoint_byte=1.0,
        peak_bytes_per_largest_tensor_byte=0.0,
        peak_constant_bytes=0.0,
        wall_s_per_checkpoint_byte=1e-9,
        wall_constant_s=0.0,
        baseline_rss_bytes=0,
        runs=2 * repeats,
        shapes=("a", "b"),
        devices=(1,),
        largest_measured_checkpoint_bytes=GiB,
        extrapolation=1.0,
        peak_error=0.0,
        wall_error=0.0,
        wall_repeat_spread=10 * typical,  # the worst repeat: never what a tie is judged on
        most_repeats=repeats,
        wall_repeat_typical_spread=typical,
    )


def _pred(
    name: str, wall: float, typical: float, repeats: int = 3, verdict: str = FITS, peak: int = GiB
):
    return StrategyPrediction(name, peak, wall, _model(typical, repeats), verdict, GiB)


def test_times_within_the_larger_typical_spread_are_too_close_to_call():
    assert too_close(_pred("a", 10.0, 0.01), _pred("b", 10.4, 0.05))
    assert too_close(_pred("a", 10.4, 0.05), _pred("b", 10.0, 0.01))  # symmetric
    assert not too_close(_pred("a", 10.0, 0.01), _pred("b", 10.6, 0.05))
    # one run per shape set: no spread was measured, so nothing is too close to call
    assert not too_close(_pred("a", 10.0, 0.5, repeats=1), _pred("b", 10.1, 0.5, repeats=1))


def test_one_outlying_repeat_moves_the_worst_spread_not_the_typical_one():
    rows = pd.DataFrame(
        {
            "shapes": ["s"] * 3 + ["t"] * 3,
            "wall_s": [1.0, 1.01, 3.0, 2.0, 2.2, 1.9],
        }
    )
    assert repeat_spread(rows) == pytest.approx(1.99 / 1.01)
    # s: deviations 0.0099, 0, 1.97 -> median 0.0099; t: 0.05, 0.10, 0 -> median 0.05
    assert typical_repeat_spread(rows) == pytest.approx(0.1 / 2.0)


def test_the_recommendation_names_what_it_cannot_tell_from_it_that_fits():
    rec = rank(
        [
            _pred("fast", 10.0, 0.05),
            _pred("near", 10.3, 0.02),
            _pred("near-but-too-big", 10.2, 0.02, verdict=DOES_NOT_FIT),
            _pred("slow", 20.0, 0.05),
        ],
        [],
    )
    assert rec.recommended == "fast"
    assert [s.strategy for s in close_to_recommended(rec)] == ["near"]
    adv = _advice(rec)
    (said,) = [s for s in sentences(adv) if "too close to call" in s]
    assert said.startswith("fast (10.00 s, 1.00 GiB) is too close to call on time with near")
    assert "slow" not in said and "too-big" not in said
    assert to_json(adv)["too_close_to_call"] == ["near"]


def test_a_tie_on_time_goes_to_the_lighter():
    """hostcast 1.15 s at 349 MiB, pipelined 1.20 s at 316 MiB, within a repeat's spread: the
    lighter is recommended, first in the table, and the sentence says why."""
    MiB = 1 << 20
    rec = rank(
        [
            _pred("hostcast", 1.15, 0.07, peak=349 * MiB),
            _pred("pipelined", 1.20, 0.07, peak=316 * MiB),
            _pred("lighter-but-slow", 3.0, 0.07, peak=200 * MiB),
        ],
        [],
    )
    assert rec.recommended == "pipelined"
    assert [s.strategy for s in rec.strategies][:2] == ["pipelined", "hostcast"]
    (said,) = [s for s in sentences(_advice(rec)) if "too close to call" in s]
    assert "hostcast (1.15 s, 349 MiB)" in said and "for its lower predicted peak" in said
    assert sentences(_advice(rec))[0].startswith("Recommended: pipelined")


def test_nothing_is_said_when_every_other_time_is_called_apart():
    rec = rank([_pred("fast", 10.0, 0.01), _pred("slow", 12.0, 0.01)], [])
    assert not [s for s in sentences(_advice(rec)) if "too close" in s]
    assert to_json(_advice(rec))["too_close_to_call"] == []


def test_the_ranking_holds_on_the_pairs_called_apart_and_lists_the_rest():
    preds = [_pred("a", 10.0, 0.03), _pred("b", 10.2, 0.03), _pred("c", 20.0, 0.03)]
    got = check_ranking(preds, {"b": 9.0, "a": 9.5, "c": 15.0})
    assert got.too_close == [("a", "b")]
    assert got.called == [("a", "c"), ("b", "c")] and got.reversed == [] and got.held
    got = check_ranking(preds, {"a": 16.0, "b": 9.0, "c": 15.0})
    assert got.reversed == [("a", "c")] and not got.held
    # a strategy with no measured run is left out of every pair
    assert check_ranking(preds, {"a": 1.0, "c": 2.0}).called == [("a", "c")]


def test_the_check_prints_each_pair_and_the_strict_order(capsys):
    rec = rank([_pred("a", 10.0, 0.03), _pred("b", 10.2, 0.03), _pred("c", 20.0, 0.03)], [])
    assert target_command._ranking(_advice(rec), {"b": 9.0, "a": 9.5, "c": 15.0})
    out = capsys.readouterr().out
    assert "measured ['b', 'a', 'c'] (not the same order)" in out
    assert "pairs called apart: a < c, b < c: held" in out
    assert "too close to call (within the fits' time repeats): a < b" in out
    assert not target_command._ranking(_advice(rec), {"a": 16.0, "b": 9.0, "c": 15.0})
    assert "DID NOT HOLD (measured the other way: a < c)" in capsys.readouterr().out


def _advice(rec: Recommendation) -> Advice:
    inputs = AdviceInputs(
        shapes="t", host_ram_bytes=64 * GiB, devices=None, results="f", cache="warm"
    )
    return Advice(inputs, TargetCheckpoint(GiB, GiB // 10, 10), rec, None, None)


def test_lightest_first_treats_peaks_within_one_percent_as_equal():
    from bench.analysis.ties import lightest_first

    assert lightest_first([2.310e9, 2.311e9, 2.6e9], [2.9, 2.6, 2.0]) == [1, 0, 2]
    assert lightest_first([2.0e9, 2.5e9], [3.0, 1.0]) == [0, 1]  # clearly lighter wins
