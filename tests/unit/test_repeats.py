"""`bench.run.repeats`: a configuration is repeated until its interval settles, its cap, its
budget, or a failure; `--repeats` is always run."""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.run.repeats import RepeatPolicy, Tallies, Tally

POLICY = RepeatPolicy(min_repeats=3, max_repeats=6, budget_s=100.0)


def _tally(ratios, seconds=1.0, ok=True) -> Tally:
    tally = Tally()
    for r in ratios:
        tally.add(r, 0.0, ok, seconds)
    return tally


def test_a_settled_interval_wants_no_more():
    assert not _tally([2.00, 2.01, 1.99]).wants_more(POLICY)  # ±1.3%: settled


def test_a_wide_interval_wants_more_until_the_cap():
    wide = [2.0, 2.6, 1.7]
    assert _tally(wide).wants_more(POLICY)
    assert _tally(wide * 2).wants_more(POLICY) is False  # 6 runs: the cap


def test_the_minimum_always_runs_and_nothing_past_it_on_failure():
    assert not _tally([2.0, 2.6]).wants_more(POLICY)  # the minimum's rounds run it, not this
    failed = _tally([2.0, 2.6, 1.7])
    failed.add(None, None, False, 1.0)
    assert not failed.wants_more(POLICY)


def test_no_repeat_that_would_pass_the_budget():
    assert _tally([2.0, 2.6, 1.7], seconds=20.0).wants_more(POLICY)  # 60 s + 20 s <= 100 s
    assert not _tally([2.0, 2.6, 1.7], seconds=30.0).wants_more(POLICY)  # 90 + 30 > 100


def test_without_a_reference_there_is_nothing_to_settle():
    assert not _tally([None, None, None]).wants_more(POLICY)


def test_tallies_keep_run_order():
    tallies = Tallies(POLICY)
    for key, ratios in (("a", [2.0, 2.6, 1.7]), ("b", [2.0, 2.0, 2.0]), ("c", [1, 3, 2])):
        for r in ratios:
            tallies.of(key).add(r, None, True, 1.0)
    assert tallies.wanting(["c", "b", "a"]) == ["c", "a"]


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"min_repeats": 0}, "--repeats 0: give at least 1"),
        ({"min_repeats": 5, "max_repeats": 3}, "--max-repeats 3 is below --repeats 5"),
        ({"budget_s": -1.0}, "--repeat-budget -1"),
    ],
)
def test_a_policy_that_cannot_be_is_refused(kw, said):
    with pytest.raises(BenchError, match=said):
        RepeatPolicy(**kw)
