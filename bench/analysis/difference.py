"""Is NEW different from BASE? The one module that says so, for `compare`, `history` and the judge,
so that "faster", "slower", "lighter", "heavier", "same" and "ties" mean one thing.

Two samples of a positive measure (times as paired ratios or seconds, peaks as bytes) are compared
by the ratio of their geometric means, NEW over BASE, with its confidence interval: Welch's t test
on the logarithms (`scipy.stats.ttest_ind(..., equal_var=False)`), since load times are positive
and their noise multiplies, and the two sides may spread differently. Where several runs stand
behind each side, whole runs stray from each other more than one run's repeats do (a run shares
its machine's state); the caller says how much as `run_scatter`, the standard deviation that this
adds to log(NEW / BASE), and the interval widens by it (its normal quantile, added in quadrature).

NEW is `different` from BASE when that interval leaves out 1: then it is faster or slower (a time),
lighter or heavier (a peak). Where it holds 1, the two are the `same` as far as these repeats can
tell: "0.83x (95% CI 0.72-0.96)" is faster, never the same. With fewer than two positive values on
a side there is no interval, and no call (`judged` is False, `direction` UNDECIDED).

How large a difference must be to matter is a separate question, asked of the same record:
`beyond(factor)` says whether the whole interval lies beyond `factor` (a CI gate's
`--max-regression 5%` is `beyond(1.05)`; a history step of 10% is `beyond(1.10)`).

The judge (`bench.analysis.judge`) asks the same question of candidates it holds as summaries, not
samples: a summary row keeps each strategy's 95% interval of the measure
(`bench.intervals.Interval`, t on the logarithms of its repeats) and not the repeats behind it, and
a prediction has only the interval its fit measured. `intervals_tie` is the test it asks there: two
such intervals tie where they overlap. It lives here, beside `difference`, so that the rule for
"different?" is stated in one module; where the repeats are at hand, `difference` is the sharper
test (an overlap of two 95% intervals is stricter than Welch's 95% interval of their ratio leaving
out 1). No jax.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import norm, ttest_ind

from bench.intervals import Interval
from bench.vocabulary import FASTER, HEAVIER, LIGHTER, SAME, SLOWER, UNDECIDED

TIME_MEASURE, MEMORY_MEASURE = "time", "memory"  # what is compared: its direction words
_WORDS = {TIME_MEASURE: (FASTER, SLOWER), MEMORY_MEASURE: (LIGHTER, HEAVIER)}
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Difference:
    """NEW against BASE: `ratio` (NEW's geometric mean over BASE's) and its interval `low`-`high`
    at `confidence` (NaN without one), whether the interval leaves out 1 (`different`), which way
    (`direction`: FASTER/SLOWER for a time, LIGHTER/HEAVIER for a peak, SAME, or UNDECIDED with
    fewer than two values a side), the repeats' two-sided Welch `p` (NaN without an interval; it
    does not count `run_scatter`) and the values counted on each side."""

    ratio: float
    low: float
    high: float
    different: bool
    direction: str
    p: float
    n_base: int
    n_new: int
    measure: str = TIME_MEASURE
    confidence: float = CONFIDENCE

    @property
    def judged(self) -> bool:
        """Both sides had two values or more: there is an interval to judge on."""
        return self.direction != UNDECIDED

    def beyond(self, factor: float) -> bool:
        """The whole interval lies beyond `factor` from 1, either way (above `factor`, or below
        1 / `factor`): different by more than `factor`, with this confidence.

        Example:
            >>> difference([1.0, 1.01, 0.99], [1.3, 1.31, 1.29]).beyond(1.05)
            True
        """
        if not self.judged:
            return False
        return self.low > factor or self.high < 1 / factor

    @property
    def factor(self) -> float:
        """How many times faster, slower, lighter or heavier: `ratio` where NEW is the larger,
        1 / `ratio` where it is the smaller (>= 1, NaN without a ratio)."""
        return self.ratio if self.ratio >= 1 else 1 / self.ratio

    def text(self, digits: int = 2) -> str:
        """`1.32x faster (95% CI 1.20-1.45)`, `same (1.01x, 95% CI 0.97-1.05)`, or
        `1.50x slower (too few repeats)`: the factor and interval in the direction's own terms.

        Example:
            >>> difference([1.0, 1.01, 0.99], [1.3, 1.31, 1.29]).text()
            '1.30x slower (95% CI 1.27-1.33)'
        """
        if self.ratio != self.ratio:
            return "-"
        share = f"{self.confidence:.0%} CI"
        if not self.judged:
            larger, smaller = _WORDS[self.measure][1], _WORDS[self.measure][0]
            way = larger if self.ratio >= 1 else smaller
            return f"{self.factor:.{digits}f}x {way} ({UNDECIDED})"
        if not self.different:
            return (
                f"{SAME} ({self.ratio:.{digits}f}x, {share} "
                f"{self.low:.{digits}f}-{self.high:.{digits}f})"
            )
        low, high = (self.low, self.high) if self.ratio >= 1 else (1 / self.high, 1 / self.low)
        return (
            f"{self.factor:.{digits}f}x {self.direction} ({share} "
            f"{low:.{digits}f}-{high:.{digits}f})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON object: every field, NaN as None."""
        return {k: None if v != v else v for k, v in asdict(self).items()}


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0 and math.isfinite(v)]


def difference(
    base: Sequence[float],
    new: Sequence[float],
    *,
    measure: str = TIME_MEASURE,
    run_scatter: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Difference:
    """NEW against BASE (positive values; others are left out): see the module doc.

    Args:
        base, new: the repeats of each side (paired ratios or seconds of a time; bytes of a peak).
        measure: TIME_MEASURE (faster/slower) or MEMORY_MEASURE (lighter/heavier).
        run_scatter: the standard deviation, on the log scale, that whole runs add to
            log(NEW / BASE) beyond their repeats (0: the repeats are all the noise there is).
        confidence: the interval's level.

    Example:
        >>> d = difference([1.0, 1.02, 0.98], [0.76, 0.77, 0.75])
        >>> d.direction, d.different, round(d.ratio, 2)
        ('faster', True, 0.76)
    """
    if measure not in _WORDS:
        raise ValueError(f"measure {measure!r}: give {TIME_MEASURE!r} or {MEMORY_MEASURE!r}")
    a, b = _logs(new), _logs(base)
    nan = float("nan")
    if not a or not b:
        return Difference(nan, nan, nan, False, UNDECIDED, nan, len(b), len(a), measure, confidence)
    shift = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:  # a ratio, but one repeat says nothing of the noise
        return Difference(
            math.exp(shift), nan, nan, False, UNDECIDED, nan, len(b), len(a), measure, confidence
        )
    half, p = _welch_half_width(a, b, shift, confidence)
    if run_scatter > 0:
        half = math.hypot(half, float(norm.ppf((1 + confidence) / 2)) * run_scatter)
    low, high = math.exp(shift - half), math.exp(shift + half)
    different = low > 1 or high < 1
    smaller, larger = _WORDS[measure]
    direction = (larger if shift > 0 else smaller) if different else SAME
    return Difference(
        math.exp(shift), low, high, different, direction, p, len(b), len(a), measure, confidence
    )


def _welch_half_width(
    a: list[float], b: list[float], shift: float, confidence: float
) -> tuple[float, float]:
    """Half the width of Welch's interval of mean(a) - mean(b) and its two-sided p. Where neither
    side varies, the difference is exact: no width, and p 0 (apart) or 1 (equal)."""
    if statistics.variance(a) == 0 and statistics.variance(b) == 0:
        return 0.0, (0.0 if shift != 0 else 1.0)
    with warnings.catch_warnings():  # scipy warns of "precision loss" for a side whose values
        warnings.simplefilter("ignore", RuntimeWarning)  # are all equal: its variance is 0
        test = ttest_ind(a, b, equal_var=False)
        ci = test.confidence_interval(confidence_level=confidence)
    return (float(ci.high) - float(ci.low)) / 2, float(test.pvalue)


def intervals_tie(a: Interval, b: Interval) -> bool:
    """Two 95% intervals of one measure (each of 2 or more repeats) tie on it: they share a value,
    so neither is called faster. The judge's test for "different?" over summaries (the module doc).

    Example:
        >>> intervals_tie(Interval(2.0, 1.9, 2.1, 3), Interval(2.15, 2.05, 2.25, 3))
        True

    Raises:
        ValueError: an interval of fewer than 2 repeats (it says nothing of its spread).
    """
    for side in (a, b):
        if side.n < 2:
            raise ValueError(
                f"interval {side.text()}: a tie needs 2 or more repeats a side; "
                "a candidate of one run is not judged on time"
            )
    return a.overlaps(b)
