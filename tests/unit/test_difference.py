"""The one rule for "is it different?": an interval that leaves out 1 is a difference, named."""

from __future__ import annotations

import math

import pytest

from bench.analysis.difference import MEMORY_MEASURE, difference


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
