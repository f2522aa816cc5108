"""The one rule for "is it different?": an interval that leaves out 1 is a difference, named;
the same record from the repeats (`difference`) and from their 95% intervals
(`difference_of_summaries`, the judge's way in)."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import ttest_ind

from bench.analysis.difference import MEMORY_MEASURE, difference, difference_of_summaries
from bench.intervals import Interval, interval


def test_an_interval_below_one_is_faster_never_same():
    # issue 54: "0.83x (CI 0.72-0.96)" was printed as "same"
    base = [1.00, 1.10, 0.92, 1.05]
    new = [0.80, 0.90, 0.78, 0.86]
    d = difference(base, new)
    assert d.high < 1 and d.different and d.direction == "faster"
    assert d.text().startswith(f"{1 / d.ratio:.2f}x faster (95% CI ")


def test_relative_speed_reads_as_a_factor_with_its_interval():
    d = difference([1.32, 1.30, 1.34], [1.0, 1.01, 0.99])
    low, high = 1 / d.high, 1 / d.low
    assert d.text() == f"{1 / d.ratio:.2f}x faster (95% CI {low:.2f}-{high:.2f})"
    assert 1 < low < 1 / d.ratio < high


def test_overlapping_samples_are_the_same():
    d = difference([1.0, 1.05, 0.95], [1.02, 0.97, 1.04])
    assert not d.different and d.direction == "same" and d.low < 1 < d.high
    assert d.text().startswith("same (")


def test_peaks_are_lighter_or_heavier():
    heavier = difference([100.0, 101.0, 100.5], [130.0, 131.0, 129.0], measure=MEMORY_MEASURE)
    assert heavier.direction == "heavier" and heavier.beyond(1.05) and not heavier.beyond(1.4)
    lighter = difference([130.0, 131.0, 129.0], [100.0, 101.0, 100.5], measure=MEMORY_MEASURE)
    assert lighter.direction == "lighter" and lighter.beyond(1.05)


def test_run_scatter_widens_the_interval_until_it_holds_one():
    base, new = [1.0, 1.01, 0.99], [1.10, 1.11, 1.09]
    assert difference(base, new).different
    wide = difference(base, new, run_scatter=0.1)
    assert not wide.different and wide.low < 1 < wide.high


def test_one_repeat_is_no_call():
    d = difference([1.0], [1.5, 1.6])
    assert not d.judged and not d.different and not d.beyond(1.01)
    assert d.ratio == pytest.approx(math.exp((math.log(1.5) + math.log(1.6)) / 2))
    assert d.text() == f"{d.ratio:.2f}x slower (too few repeats)"


def test_constant_sides_are_exact():
    assert difference([2.0, 2.0], [2.0, 2.0]).direction == "same"
    apart = difference([2.0, 2.0], [3.0, 3.0])
    assert apart.different and apart.low == apart.high == pytest.approx(1.5)


def test_non_positive_values_are_left_out():
    d = difference([0.0, -1.0], [1.0, 1.0])
    assert d.ratio != d.ratio and d.text() == "-" and d.to_dict()["ratio"] is None


def _lognormal(seed: int, n: int, centre: float, spread: float) -> list[float]:
    draw = random.Random(seed)
    return [centre * math.exp(draw.gauss(0.0, spread)) for _ in range(n)]


#: (base, new) repeats: the issue's "0.83x" pair, a pair whose 95% intervals overlap while their
#: ratio's leaves out 1, unequal counts and spreads, a side that does not vary, a tie, and
#: lognormal draws of the size the bench takes (3 to 10 repeats).
SAMPLES = [
    ([1.00, 1.10, 0.92, 1.05], [0.80, 0.90, 0.78, 0.86]),
    ([2.30, 2.36, 2.42], [2.50, 2.56, 2.62]),
    ([1.31, 1.29, 1.35, 1.30, 1.33, 1.28], [1.40, 1.52, 1.37]),
    ([2.0, 2.0, 2.0], [2.1, 2.3, 2.2, 2.25]),
    ([1.0, 1.05, 0.95], [1.02, 0.97, 1.04]),
    (_lognormal(1, 3, 2.4, 0.05), _lognormal(2, 10, 2.5, 0.12)),
    (_lognormal(3, 8, 0.7, 0.30), _lognormal(4, 5, 0.9, 0.02)),
]


@pytest.mark.parametrize("measure", ["time", MEMORY_MEASURE])
@pytest.mark.parametrize("run_scatter", [0.0, 0.04])
@pytest.mark.parametrize(("base", "new"), SAMPLES)
def test_the_intervals_of_the_repeats_give_the_repeats_own_record(base, new, run_scatter, measure):
    """The judge keeps each side's 95% interval (`bench.intervals.interval`), not its repeats:
    from the intervals, Welch's test gives the record the repeats give, to rounding."""
    kw = {"measure": measure, "run_scatter": run_scatter}
    of_repeats = difference(base, new, **kw)
    of_summaries = difference_of_summaries(interval(base), interval(new), **kw)
    assert of_summaries.judged
    for field in ("ratio", "low", "high", "p"):
        assert getattr(of_summaries, field) == pytest.approx(getattr(of_repeats, field), rel=1e-9)
    same = ("different", "direction", "n_base", "n_new", "measure", "confidence")
    assert [getattr(of_summaries, f) for f in same] == [getattr(of_repeats, f) for f in same]


@pytest.mark.parametrize(("base", "new"), [s for s in SAMPLES if len(set(s[0])) > 1])
def test_the_repeats_record_is_welchs_t_as_scipy_computes_it(base, new):
    logs_base, logs_new = [math.log(v) for v in base], [math.log(v) for v in new]
    test = ttest_ind(logs_new, logs_base, equal_var=False)
    ci = test.confidence_interval(confidence_level=0.95)
    d = difference(base, new)
    assert (d.low, d.high, d.p) == pytest.approx(
        (math.exp(ci.low), math.exp(ci.high), test.pvalue), rel=1e-9
    )


def test_overlapping_intervals_can_differ():
    """The judge's old test (two 95% intervals overlap) tied this pair; the one rule does not."""
    base, new = interval([2.30, 2.36, 2.42]), interval([2.50, 2.56, 2.62])
    assert base.low <= new.high and new.low <= base.high  # the intervals overlap
    d = difference_of_summaries(base, new)
    assert d.different and d.text() == "1.08x slower (95% CI 1.03-1.15)"


def test_a_summary_of_one_repeat_is_no_call_as_the_repeat_is():
    d = difference_of_summaries(interval([1.0]), interval([1.5, 1.6]))
    of_repeats = difference([1.0], [1.5, 1.6]).to_dict()
    assert d.to_dict() == {**of_repeats, "ratio": pytest.approx(of_repeats["ratio"], rel=1e-12)}
    assert not d.judged and d.text() == f"{d.ratio:.2f}x slower (too few repeats)"


def test_an_interval_lopsided_on_the_log_scale_is_read_by_its_wider_side():
    """An interval rounded or written by hand: the standard error is taken from the wider side,
    never understated."""
    base = interval([2.30, 2.36, 2.42])
    lopsided = Interval(base.estimate, base.low, base.high * 1.05, base.n)
    wider = Interval(base.estimate, base.low / 1.05, base.high * 1.05, base.n)
    new = interval([2.50, 2.56, 2.62])
    assert difference_of_summaries(lopsided, new) == difference_of_summaries(wider, new)
    assert difference_of_summaries(wider, new).high > difference_of_summaries(base, new).high


def test_an_interval_that_is_no_interval_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="base interval .*expected finite 0 < low <= high"):
        difference_of_summaries(Interval(2.0, 2.2, 2.1, 3), interval([1.0, 1.1]))
    with pytest.raises(ValueError, match="new interval .*build it with that function"):
        difference_of_summaries(interval([1.0, 1.1]), Interval(2.0, 0.0, 2.1, 3))


def test_peaks_a_few_pages_apart_that_never_vary_are_the_same():
    """Issue 71: identical peaks, each the same in every repeat, read "1.00x heavier (95% CI
    1.00-1.00)"; an interval within `RESOLUTION` of 1 is the same."""
    base = [745.0 * (1 << 20)] * 3
    new = [745.0 * (1 << 20) + 8192] * 3
    d = difference(base, new, measure="memory")
    assert (d.different, d.direction) == (False, "same")
    assert d.text() == "same (1.00x, 95% CI 1.00-1.00)"
    assert difference(base, [v * 1.02 for v in base], measure="memory").direction == "heavier"


def test_the_interval_keeps_no_rule_of_its_own_for_different():
    """One rule for "different?" (issue 72): `bench.analysis.difference`; an interval keeps its
    figures and no second test (`overlaps` went, and `scaled`: no product code used them)."""
    from bench.intervals import Interval

    assert not hasattr(Interval, "overlaps") and not hasattr(Interval, "scaled")
