"""How sure a measured time is: a configuration's paired ratio with its 95% confidence interval,
and whether it is stable enough to call.

Each ok repeat is judged by its paired ratio, `wall_s / reference_s`: its time over a bare copy
of the checkpoint timed on the same machine right before and after it (`bench.run.reference`;
over a shaped link, the link's ceiling). Over the repeats of one configuration the estimate is
the geometric mean of those ratios, and the interval is Student's t on their logarithms:

    exp(mean(log r) +- t(0.975, n - 1) * sd(log r) / sqrt(n))

Why t on the logarithms and not a bootstrap: the bench runs 3 to about 10 repeats. A percentile
bootstrap never reaches beyond the sample's own smallest and largest value, so with 3 repeats its
"95%" interval covers the true median about 75% of the time (the distribution-free interval
(min, max) needs 6 repeats to reach 95%). Load times are positive and their noise multiplies (a
machine at half speed doubles the whole load), so their logarithms are near normal; t's
interval then keeps its coverage at 3 repeats, and it widens honestly when repeats disagree.

A configuration's time is `settled` once the interval lies within +-`TARGET_HALF_WIDTH` (5%) of
the estimate: `bench run` repeats a configuration until it is (or a cap is reached). One that
stays wider is `unstable`, and says why (`Instability`): its spread, an outlying repeat, a
ratio below 1 (faster than a bare copy: the reference was taken in a slow moment), a machine
that changed speed during a child (`reference_drift`), or one shared with other processes
(`others_cpu_fraction`). No jax.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import t as student_t

CONFIDENCE = 0.95
TARGET_HALF_WIDTH = 0.05  # a settled interval lies within +-5% of its estimate
#: A repeat whose ratio is this far from the median of the others (and 3 robust deviations) is
#: an outlier: one slow moment the reference did not see.
OUTLIER_FACTOR = 1.25
#: The reference pass after a child this much slower or faster than the one before: the
#: machine changed speed during the child, so its pairing is loose.
DRIFT_LIMIT = 0.25
#: Other processes busy on more than this share of every CPU's time while a child ran: the
#: machine was shared, and a reference copy pass cannot stand for every strategy's threads.
SHARED_LIMIT = 0.25
#: A ratio under this: the load beat a bare copy of its own bytes, which only noise explains.
FASTEST_PLAUSIBLE = 0.95


def spread_text(half_width: float) -> str:
    """An interval's half width as a percentage, `±13%`; with one decimal below 10% (`±5.3%`), so
    that a spread just past the +-5% a settled time needs never reads as `±5%`."""
    return f"±{half_width:.1%}" if half_width < 0.1 else f"±{half_width:.0%}"


@dataclass(frozen=True)
class Interval:
    """A ratio's estimate and its 95% confidence interval over `n` repeats (`low` = `high` =
    `estimate` with one repeat: no interval)."""

    estimate: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        """The interval's larger side relative to the estimate (`high / estimate - 1`; inf with
        one repeat, which says nothing of its spread)."""
        if self.n < 2:
            return math.inf
        return max(self.high / self.estimate - 1, 1 - self.low / self.estimate)

    @property
    def settled(self) -> bool:
        """The interval lies within +-`TARGET_HALF_WIDTH` of the estimate."""
        return self.half_width <= TARGET_HALF_WIDTH

    def text(self, unit: str = "x", digits: int = 2) -> str:
        """`2.36x (95% CI 2.28-2.45x)`, or `2.36x (1 repeat)`."""
        value = f"{self.estimate:.{digits}f}{_sep(unit)}"
        if self.n < 2:
            return f"{value} (1 repeat)"
        return f"{value} (95% CI {self.low:.{digits}f}-{self.high:.{digits}f}{_sep(unit)})"


def _sep(unit: str) -> str:
    return unit if unit == "x" else f" {unit}"


def interval(ratios: Sequence[float]) -> Interval | None:
    """The geometric mean of positive `ratios` and its 95% interval (t on the logarithms);
    None without a positive finite ratio.

    Example:
        >>> iv = interval([2.0, 2.1, 1.9])
        >>> round(iv.estimate, 3), round(iv.low, 2), round(iv.high, 2)
        (1.997, 1.77, 2.25)
    """
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        value = math.exp(mean)
        return Interval(value, value, value, 1)
    half = float(student_t.ppf((1 + CONFIDENCE) / 2, len(logs) - 1)) * statistics.stdev(logs)
    half /= math.sqrt(len(logs))
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


@dataclass(frozen=True)
class Instability:
    """Why a configuration's time is not to be trusted, in words, with what to do about it."""

    reasons: tuple[str, ...]

    @property
    def text(self) -> str:
        """`unstable: 95% CI ±8% after 10 repeats; repeat 4 took 1.60x the others' median`."""
        return "unstable: " + "; ".join(self.reasons)


#: What to do about an unstable time: said once under the rows that are.
ADVICE = (
    "unstable times are no verdict: add repeats (--max-repeats, --repeat-budget) or run on a "
    "quieter machine"
)


def outliers(ratios: Sequence[float]) -> list[int]:
    """Indices of the repeats whose ratio is over `OUTLIER_FACTOR` away from the median of the
    others and beyond 3 robust deviations (1.4826 x the median absolute deviation) of them."""
    found = []
    for i, r in enumerate(ratios):
        others = [math.log(v) for j, v in enumerate(ratios) if j != i and v > 0]
        if len(others) < 2 or r <= 0:
            continue
        centre = statistics.median(others)
        mad = 1.4826 * statistics.median(abs(v - centre) for v in others)
        gap = abs(math.log(r) - centre)
        if gap > math.log(OUTLIER_FACTOR) and gap > 3 * mad:
            found.append(i)
    return found


def instability(
    ratios: Sequence[float],
    drifts: Sequence[float | None] = (),
    others: Sequence[float | None] = (),
) -> Instability | None:
    """Why a configuration with these paired ratios (in repeat order), reference drifts and
    shares of the CPUs other processes took is not settled, or None where its interval is within
    +-5% and nothing else looks wrong."""
    iv = interval(ratios)
    if iv is None:
        return None
    reasons = []
    if iv.n >= 2 and not iv.settled:
        reasons.append(f"95% CI {spread_text(iv.half_width)} after {iv.n} repeats (wanted ±5%)")
    for i in outliers(ratios):
        rest = statistics.median(v for j, v in enumerate(ratios) if j != i)
        reasons.append(f"repeat {i + 1} took {ratios[i] / rest:.2f}x the others' median")
    fast = [r for r in ratios if r < FASTEST_PLAUSIBLE]
    if fast:
        reasons.append(
            f"{len(fast)} repeat(s) faster than a bare copy of the checkpoint "
            f"({min(fast):.2f}x): the reference was timed in a slow moment"
        )
    moved = [d for d in drifts if d is not None and abs(d) > DRIFT_LIMIT]
    if moved:
        worst = max(moved, key=abs)
        reasons.append(
            f"the machine changed speed during {len(moved)} repeat(s) (reference {worst:+.0%} "
            "after against before)"
        )
    shared = [o for o in others if o is not None and o > SHARED_LIMIT]
    if shared:
        reasons.append(
            f"other processes took up to {max(shared):.0%} of the CPUs during {len(shared)} "
            "repeat(s): a strategy that uses more threads loses more to them than its reference"
        )
    return Instability(tuple(reasons)) if reasons else None


#: Two sets of repeats whose machines were shared this differently (the median share of every
#: CPU's time other processes took: `others_cpu_fraction`) are not judged on wall time.
CONTENTION_GAP = 0.15
PAIRED_BASIS, CPU_BASIS, WALL_BASIS = "paired", "cpu", "wall"  # what a time was judged on


def contention(others: Sequence[float | None]) -> float | None:
    """The median share of the CPUs other processes took over a set of repeats (None: unknown)."""
    known = [o for o in others if o is not None and o == o]
    return statistics.median(known) if known else None


def basis(a: Sequence[float | None], b: Sequence[float | None]) -> str:
    """What two sets of repeats (their `others_cpu_fraction`s) can be judged on across runs:
    `PAIRED_BASIS`, their wall over the reference beside each repeat, where the machine was
    shared alike on both sides; `CPU_BASIS`, their CPU seconds over the reference's, where it was
    not. Another process taking a core slows a strategy by its threads (a two-thread load by
    about 1.3x, a one-thread load not at all, on 2 cores) and the reference by its own, so no
    wall reference holds for every strategy across such a change; CPU time does not move with
    it (measured: `docs/results.md`, "The reference under a CPU-heavy neighbour"). What CPU time
    cannot see is a change in how a load overlaps its work: the output says which basis ruled."""
    ca, cb = contention(a), contention(b)
    if ca is None or cb is None or abs(ca - cb) <= CONTENTION_GAP:
        return PAIRED_BASIS
    return CPU_BASIS
