"""One rule for "faster", "lighter" and "too close to call", and the one sentence every view
prints of it: the bench summary, `recommend` (text and `--json`), the dashboard and the report.

A strategy is a `Candidate`: its time (a measured median, or a prediction) with a 95% interval
(`bench.analysis.intervals`: on a measured row, its paired ratio, wall over the same moment's
reference; on a prediction, the predicted seconds widened by the measured interval), and its peak
with the spread of its repeats.

- **Time.** Two candidates tie on time when their intervals overlap; otherwise the one whose
  interval lies lower is faster. A time with one repeat has no interval and ties with everything:
  one run cannot call two strategies apart.
- **Peak.** One is lighter only when its peak is lower by more than either's repeat spread (max -
  min over repeats) and more than `PEAK_TIE_FRACTION` of the lighter peak: two strategies that
  hold the model and nothing else differ by allocator noise, not by design.
- **The choice.** Among the candidates that fit, the fastest and those tied with it on time; of
  those the lightest (`lighter`), else the fastest. `Choice.sentence` says it with the figures:
  `pipelined (1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x) ties on time with builder (1.35 s; ...):
  their intervals overlap; pipelined is lighter (2.31 GiB against 2.55 GiB, beyond their repeat
  spreads)`. No jax.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.analysis.intervals import Interval
from shapes.sizes import format_bytes

#: Peaks nearer than this fraction of the lighter are as light, whatever their repeats show.
PEAK_TIE_FRACTION = 0.01
FASTER, SLOWER, TIE = "faster", "slower", "tie"
#: The unit a candidate's interval is in: its paired ratio (measured), or seconds (predicted).
PAIRED, SECONDS = "x ceiling", "s"


@dataclass(frozen=True)
class Candidate:
    """One strategy as the rule sees it.

    `seconds` is what the sentence quotes (a measured median, or a prediction); `time` is the
    95% interval the rule compares, in `unit` (PAIRED: the paired ratio; SECONDS); `peak_bytes`
    the median peak RSS and `peak_spread_bytes` its repeats' max - min (0 for a prediction);
    `unstable` says why its time is not to be trusted (`intervals.Instability.text`), if so.
    """

    strategy: str
    seconds: float
    time: Interval | None
    peak_bytes: float
    peak_spread_bytes: float = 0.0
    unit: str = PAIRED
    unstable: str | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        """The time interval's (low, high); unbounded without an interval of 2 or more repeats."""
        if self.time is None or self.time.n < 2:
            return 0.0, math.inf
        return self.time.low, self.time.high

    @property
    def time_text(self) -> str:
        """`1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x`, or `1.31 s, 95% CI 1.20-1.44 s` for a
        prediction, or `1.31 s (1 repeat)`."""
        if self.time is None:
            return f"{self.seconds:.2f} s (no interval)"
        if self.unit == SECONDS:
            if self.time.n < 2:
                return f"{self.seconds:.2f} s (1 run per shape set)"
            return f"{self.seconds:.2f} s, 95% CI {self.time.low:.2f}-{self.time.high:.2f} s"
        if self.time.n < 2:
            return f"{self.seconds:.2f} s (1 repeat)"
        return (
            f"{self.seconds:.2f} s; {self.time.estimate:.2f}x ceiling, "
            f"95% CI {self.time.low:.2f}-{self.time.high:.2f}x"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of a candidate (`recommend --json`'s `ties`, the summary's JSON)."""
        low, high = self.bounds
        return {
            "strategy": self.strategy,
            "seconds": self.seconds,
            "time_unit": self.unit,
            "time_estimate": self.time.estimate if self.time else None,
            "time_low": low if math.isfinite(high) else None,
            "time_high": high if math.isfinite(high) else None,
            "repeats": self.time.n if self.time else 0,
            "peak_bytes": self.peak_bytes,
            "peak_spread_bytes": self.peak_spread_bytes,
            "unstable": self.unstable,
        }


def time_order(a: Candidate, b: Candidate) -> str:
    """`a` against `b`: FASTER, SLOWER, or TIE where their intervals overlap."""
    (a_low, a_high), (b_low, b_high) = a.bounds, b.bounds
    if a_high < b_low:
        return FASTER
    if b_high < a_low:
        return SLOWER
    return TIE


def lighter(a: Candidate, b: Candidate) -> bool:
    """`a`'s peak is lower than `b`'s by more than either's repeat spread and more than
    `PEAK_TIE_FRACTION` of the lighter."""
    margin = max(a.peak_spread_bytes, b.peak_spread_bytes, PEAK_TIE_FRACTION * a.peak_bytes)
    return a.peak_bytes + margin < b.peak_bytes


@dataclass(frozen=True)
class Choice:
    """The candidate chosen, those tied with it on time, and why it was chosen over them."""

    best: Candidate
    ties: list[Candidate] = field(default_factory=list)
    by_peak: bool = False  # among ties: it is lighter than every one of them
    next_faster: Candidate | None = None  # without ties: the runner-up it was called apart from

    @property
    def sentence(self) -> str:
        """The one sentence every view prints of the choice, with its figures."""
        best = self.best
        head = f"{best.strategy} ({best.time_text})"
        if not self.ties:
            if self.next_faster is None:
                return f"{head} is the only one to choose from"
            nxt = self.next_faster
            return (
                f"{head} is faster than {nxt.strategy} ({nxt.time_text}): their 95% intervals "
                "do not overlap"
            )
        tied = ", ".join(f"{t.strategy} ({t.time_text})" for t in self.ties)
        said = f"{head} ties on time with {tied}: their 95% intervals overlap"
        if self.by_peak:
            peaks = ", ".join(format_bytes(t.peak_bytes) for t in self.ties)
            return (
                f"{said}; {best.strategy} is lighter ({format_bytes(best.peak_bytes)} against "
                f"{peaks}, beyond their repeat spreads)"
            )
        return f"{said}; no peak is lighter beyond the repeat spreads, so the fastest is named"

    def to_dict(self) -> dict[str, Any]:
        """`recommend --json`'s `choice`: best, ties (a list, empty where none), the sentence."""
        return {
            "best": self.best.to_dict(),
            "ties": [t.to_dict() for t in self.ties],
            "chosen_for_peak": self.by_peak,
            "sentence": self.sentence,
        }


def _centre(c: Candidate) -> float:
    return c.time.estimate if c.time is not None else c.seconds


def choose(candidates: Sequence[Candidate]) -> Choice | None:
    """The choice among `candidates` (those that fit, of one configuration, on one scale):
    the fastest and those tied with it; the lightest of them, else the fastest. None if empty.

    Example:
        >>> choose([pipelined, builder]).sentence
        'pipelined (1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x) is faster than builder (...)...'
    """
    if not candidates:
        return None
    ordered = sorted(candidates, key=_centre)
    fastest = ordered[0]
    group = [c for c in ordered if c is fastest or time_order(fastest, c) == TIE]
    light = [c for c in group if all(c is o or lighter(c, o) for o in group)]
    best = light[0] if light and len(group) > 1 else fastest
    ties = [c for c in group if c is not best]
    runner_up = next((c for c in ordered if c is not best and c not in ties), None)
    return Choice(best, ties, by_peak=bool(ties) and bool(light), next_faster=runner_up)
