"""Is NEW different from BASE? The one rule, for `compare`, `history` and the judge, so that
"faster", "slower", "lighter", "heavier", "same" and "ties" mean one thing.

Two samples of a positive measure (times as paired ratios or seconds, peaks as bytes) are compared
by the ratio of their geometric means, NEW over BASE, with its confidence interval: Welch's t on
the logarithms (each side's log mean and the standard error of that mean; the degrees of freedom
by Welch-Satterthwaite), since load times are positive and their noise multiplies, and the two
sides may spread differently. Where several runs stand behind each side, whole runs stray from
each other more than one run's repeats do (a run shares its machine's state); the caller says how
much as `run_scatter`, the standard deviation that this adds to log(NEW / BASE), and the interval
widens by it (its normal quantile, added in quadrature).

NEW is `different` from BASE when that interval leaves out 1 and reaches beyond `RESOLUTION`
(0.5%) of it: then it is faster or slower (a time), lighter or heavier (a peak). Where it holds
1, the two are the `same` as far as these repeats can tell: "0.83x (95% CI 0.72-0.96)" is
faster, never the same. Two peaks a few pages apart, each the same in every repeat, have an
interval of no width just off 1: "1.00x heavier (95% CI 1.00-1.00)" says nothing a reader can
use, so that is `same` too. With fewer than two positive values on
a side there is no interval, and no call (`judged` is False, `direction` UNDECIDED).

How large a difference must be to matter is a separate question, asked of the same record:
`beyond(factor)` says whether the whole interval lies beyond `factor` (a CI gate's
`--max-regression 5%` is `beyond(1.05)`; a history step of 10% is `beyond(1.10)`).

Two ways in, one test (`_welch`): `difference` takes each side's repeats (`compare`, `history`);
`difference_of_summaries` takes each side's `bench.intervals.Interval`, for the judge
(`bench.analysis.judge`), whose candidates are summary rows that keep each strategy's 95% interval
of the measure and not the repeats behind it. That interval (Student's t on the logarithms of its
n repeats) keeps all that Welch's test reads of them: the log mean is log(estimate), the standard
error of that mean is the interval's half-width on the log scale over t(0.975, n - 1), and n gives
the degrees of freedom. So both ways give one record for the same repeats, and a tie is never
decided by whether two intervals overlap (a test stricter than this one: two 95% intervals can
overlap while the interval of their ratio leaves out 1).

A prediction (`judge.prediction_candidate`) carries the 95% interval its fit measured on its
largest shape set (n repeats, the same t on the logarithms), moved onto its predicted seconds; it
is judged the same way with that n, and so on those repeats' noise only: the fit's own error in
extrapolating to the target is not in the interval (`recommend` states it beside, as the fit's
error). No jax.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import norm
from scipy.stats import t as student_t

from bench import intervals
from bench.intervals import Interval
from bench.vocabulary import FASTER, HEAVIER, LIGHTER, SAME, SLOWER, UNDECIDED

TIME_MEASURE, MEMORY_MEASURE = "time", "memory"  # what is compared: its direction words
_WORDS = {TIME_MEASURE: (FASTER, SLOWER), MEMORY_MEASURE: (LIGHTER, HEAVIER)}
CONFIDENCE = 0.95
#: A move whose whole interval lies within this of 1 either way (it reads `1.00-1.00` at two
#: digits) is the SAME: no measure here resolves it, and "1.00x heavier" would say nothing.
RESOLUTION = 0.005


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


@dataclass(frozen=True)
class _LogMean:
    """One side on the log scale, as Welch's test reads it: the mean of its `n` logarithms and
    the variance of that mean (its standard error, squared)."""

    mean: float
    variance: float
    n: int

    @classmethod
    def of_repeats(cls, logs: list[float]) -> _LogMean:
        """From the logarithms themselves (two or more)."""
        return cls(statistics.fmean(logs), statistics.variance(logs) / len(logs), len(logs))

    @classmethod
    def of_interval(cls, iv: Interval, side: str) -> _LogMean:
        """From a 95% interval of two or more repeats (`bench.intervals.interval`: t on their
        logarithms, around their geometric mean, the estimate): the log mean is log(estimate),
        its standard error the half-width on the log scale over t(0.975, n - 1). An interval
        that is not symmetric on the log scale about its estimate (one rounded on its way
        through a file, one written by hand, an estimate a hair outside it from rounding) is
        read by its wider side, so its standard error is never understated.

        Raises:
            ValueError: the interval is not finite and 0 < low <= high, 0 < estimate.
        """
        values = (iv.low, iv.estimate, iv.high)
        if not (
            all(math.isfinite(v) for v in values) and 0 < iv.low <= iv.high and iv.estimate > 0
        ):
            raise ValueError(
                f"{side} interval {iv}: expected finite 0 < low <= high and estimate > 0, as "
                "bench.intervals.interval builds from positive repeats; build it with that "
                "function, or give one repeat (n=1) where there is no interval"
            )
        centre = math.log(iv.estimate)
        half = max(math.log(iv.high) - centre, centre - math.log(iv.low))
        quantile = float(student_t.ppf((1 + intervals.CONFIDENCE) / 2, iv.n - 1))
        return cls(centre, (half / quantile) ** 2, iv.n)


def _check_measure(measure: str) -> None:
    if measure not in _WORDS:
        raise ValueError(f"measure {measure!r}: give {TIME_MEASURE!r} or {MEMORY_MEASURE!r}")


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if _positive(v)]


def _positive(value: float) -> bool:
    return value > 0 and math.isfinite(value)


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
    _check_measure(measure)
    a, b = _logs(new), _logs(base)
    nan = float("nan")
    if not a or not b:
        return Difference(nan, nan, nan, False, UNDECIDED, nan, len(b), len(a), measure, confidence)
    if len(a) < 2 or len(b) < 2:  # a ratio, but one repeat says nothing of the noise
        ratio = math.exp(statistics.fmean(a) - statistics.fmean(b))
        return Difference(
            ratio, nan, nan, False, UNDECIDED, nan, len(b), len(a), measure, confidence
        )
    return _welch(_LogMean.of_repeats(b), _LogMean.of_repeats(a), measure, run_scatter, confidence)


def difference_of_summaries(
    base: Interval,
    new: Interval,
    *,
    measure: str = TIME_MEASURE,
    run_scatter: float = 0.0,
    confidence: float = CONFIDENCE,
) -> Difference:
    """NEW against BASE where each side is kept as its 95% interval (`bench.intervals.interval`
    of its repeats) and not the repeats: the record `difference` gives for those repeats (the
    module doc says why the interval is enough). The judge's test for "tied?" on time.

    Args:
        base, new: each side's estimate and 95% interval over its `n` repeats; an interval of
            one repeat (n=1) has no spread, and the record is no call (UNDECIDED).
        measure, run_scatter, confidence: as `difference`'s.

    Example:
        >>> base, new = interval([2.30, 2.36, 2.42]), interval([2.50, 2.56, 2.62])
        >>> difference_of_summaries(base, new).text()  # the two intervals overlap; still apart
        '1.08x slower (95% CI 1.03-1.15)'

    Raises:
        ValueError: an interval of two or more repeats that is not 0 < low <= high (the module's
            `_LogMean.of_interval` says what it reads).
    """
    _check_measure(measure)
    nan = float("nan")
    n_base = base.n if _positive(base.estimate) else 0
    n_new = new.n if _positive(new.estimate) else 0
    if not n_base or not n_new:
        return Difference(nan, nan, nan, False, UNDECIDED, nan, n_base, n_new, measure, confidence)
    if n_base < 2 or n_new < 2:
        ratio = new.estimate / base.estimate
        return Difference(
            ratio, nan, nan, False, UNDECIDED, nan, n_base, n_new, measure, confidence
        )
    return _welch(
        _LogMean.of_interval(base, "base"),
        _LogMean.of_interval(new, "new"),
        measure,
        run_scatter,
        confidence,
    )


def _welch(
    base: _LogMean, new: _LogMean, measure: str, run_scatter: float, confidence: float
) -> Difference:
    """The one test: Welch's interval of log(NEW) - log(BASE), the Welch-Satterthwaite degrees
    of freedom, and its two-sided p; widened by `run_scatter`. Where neither side varies, the
    difference is exact: no width, and p 0 (apart) or 1 (equal)."""
    shift = new.mean - base.mean
    variance = base.variance + new.variance
    if variance == 0:
        half, p = 0.0, (0.0 if shift != 0 else 1.0)
    else:
        df = variance**2 / (base.variance**2 / (base.n - 1) + new.variance**2 / (new.n - 1))
        half = float(student_t.ppf((1 + confidence) / 2, df)) * math.sqrt(variance)
        p = float(2 * student_t.sf(abs(shift) / math.sqrt(variance), df))
    if run_scatter > 0:
        half = math.hypot(half, float(norm.ppf((1 + confidence) / 2)) * run_scatter)
    low, high = math.exp(shift - half), math.exp(shift + half)
    resolved = low > 1 + RESOLUTION or high < 1 / (1 + RESOLUTION)
    different = (low > 1 or high < 1) and resolved
    smaller, larger = _WORDS[measure]
    direction = (larger if shift > 0 else smaller) if different else SAME
    return Difference(
        math.exp(shift), low, high, different, direction, p, base.n, new.n, measure, confidence
    )
