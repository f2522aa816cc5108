"""Which predicted times are too close to call, and whether a measured ranking bore them out.

A prediction cannot separate two strategies by less than the runs it was fitted on repeat
themselves: each fit carries `wall_repeat_typical_spread`, how far a typical repeat here strayed
from its shape set's median time (the median deviation per shape set, the largest over them; one
outlying run of three, which sets the table's "time repeats" maximum, does not move it). Two
predicted times are too close to call when their gap, relative to the faster one, is at most the
larger of the two strategies' typical spreads. A fit with one run per shape set has no spread,
so its times are always called apart.

Ties go to the lighter: among the strategies that fit and are too close to call with the fastest
of them (`tie_group`), `recommend` names the one with the lowest predicted peak, and says why in
one sentence (`tie_sentences`).
`recommend --probe T.json --check` holds the measured ranking against the pairs the prediction
called apart: the ranking held when every such pair came out in the predicted order; pairs too
close to call are reported, never counted as misses. No jax.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.analysis.fit import FitModel
from bench.units import format_bytes
from bench.vocabulary import FITS

if TYPE_CHECKING:  # recommend.py imports this module to pick among ties
    from bench.analysis.recommend import Recommendation, StrategyPrediction


#: peaks within this fraction of the lightest are too close to call as well: the faster of them
#: is recommended (two strategies that hold the model and nothing else differ by allocator noise)
PEAK_TIE_FRACTION = 0.01


def repeats_text(model: FitModel) -> str:
    """The table's "time repeats": how far a typical repeat and the worst strayed from their
    median (`±2% (worst ±12%)`), or `1 run` where no shape set was repeated."""
    if model.most_repeats <= 1:
        return "1 run"
    return f"±{model.wall_repeat_typical_spread:.0%} (worst ±{model.wall_repeat_spread:.0%})"


def spread(s: StrategyPrediction) -> float:
    """How far a typical repeat of the strategy strayed here (0 with one run per shape set)."""
    return s.model.wall_repeat_typical_spread if s.model.most_repeats > 1 else 0.0


def too_close(a: StrategyPrediction, b: StrategyPrediction) -> bool:
    """The two predicted times are nearer than either strategy's runs repeat themselves."""
    fast = min(a.predicted_wall_s, b.predicted_wall_s)
    if fast <= 0:
        return a.predicted_wall_s == b.predicted_wall_s
    gap = abs(a.predicted_wall_s - b.predicted_wall_s) / fast
    return gap <= max(spread(a), spread(b))


def _recommended(rec: Recommendation) -> StrategyPrediction | None:
    return next((s for s in rec.strategies if s.strategy == rec.recommended), None)


def lightest_first(peak_bytes: list[float], walls: list[float]) -> list[int]:
    """Indices of strategies tied on time, lightest first: peaks within `PEAK_TIE_FRACTION` of the
    lightest count as equal (a few KiB of allocator noise must not pick a slower strategy), and
    among those the faster comes first.

    Example:
        >>> lightest_first([2.310e9, 2.311e9, 2.6e9], [2.9, 2.6, 2.0])
        [1, 0, 2]
    """
    least = min(peak_bytes)
    return sorted(
        range(len(peak_bytes)),
        key=lambda i: (peak_bytes[i] > least * (1 + PEAK_TIE_FRACTION), walls[i], peak_bytes[i]),
    )


def tie_group(predictions: list[StrategyPrediction]) -> list[StrategyPrediction]:
    """The strategies that fit whose times are too close to call with the fastest that fits
    (the fastest included), lightest first (`lightest_first`); empty when none fits."""
    fits = [s for s in predictions if s.verdict == FITS]
    if not fits:
        return []
    fastest = min(fits, key=lambda s: s.predicted_wall_s)
    group = [s for s in fits if s is fastest or too_close(fastest, s)]
    order = lightest_first(
        [s.predicted_peak_bytes for s in group], [s.predicted_wall_s for s in group]
    )
    return [group[i] for i in order]


def lightest_of_ties(predictions: list[StrategyPrediction]) -> StrategyPrediction | None:
    """The strategy to recommend: among those too close to call on time with the fastest that
    fits, the one with the lowest predicted peak (None: none fits).

    Example:
        >>> # hostcast 1.15 s and 349 MiB; pipelined 1.20 s and 316 MiB, within a repeat's spread
        >>> lightest_of_ties(rec.strategies).strategy
        'pipelined'
    """
    group = tie_group(predictions)
    return group[0] if group else None


def close_to_recommended(rec: Recommendation) -> list[StrategyPrediction]:
    """The other strategies that fit, with times too close to call with the recommended one's."""
    return [s for s in tie_group(rec.strategies) if s.strategy != rec.recommended]


def tie_sentences(rec: Recommendation) -> list[str]:
    """One sentence: which strategies the recommended one could not be told from on time, and
    that it was chosen for its lower predicted peak."""
    close, best = close_to_recommended(rec), _recommended(rec)
    if not close or best is None:
        return []
    others = ", ".join(
        f"{s.strategy} ({s.predicted_wall_s:.2f} s, {format_bytes(s.predicted_peak_bytes)})"
        for s in close
    )
    why = (
        "its lower predicted peak"
        if strictly_lighter(best.predicted_peak_bytes, [s.predicted_peak_bytes for s in close])
        else f"a peak as light (within {PEAK_TIE_FRACTION:.0%}) and a faster time"
    )
    return [
        f"{best.strategy} ({best.predicted_wall_s:.2f} s, "
        f"{format_bytes(best.predicted_peak_bytes)}) is too close to call on time with {others}; "
        f"it is recommended for {why}."
    ]


def strictly_lighter(peak: float, others: list[float]) -> bool:
    """`peak` is lighter than every one of `others` by more than `PEAK_TIE_FRACTION`."""
    return all(peak * (1 + PEAK_TIE_FRACTION) < other for other in others)


@dataclass(frozen=True)
class RankingCheck:
    """Pairs (faster, slower) as predicted: those called apart, and those too close to call;
    `reversed`: the called pairs whose measured times came out the other way round."""

    called: list[tuple[str, str]]
    too_close: list[tuple[str, str]]
    reversed: list[tuple[str, str]]

    @property
    def held(self) -> bool:
        """Every pair the prediction called apart was measured in its predicted order."""
        return not self.reversed


def check_ranking(
    predictions: list[StrategyPrediction], measured_wall_s: Mapping[str, float]
) -> RankingCheck:
    """Hold the measured times against each pair of predictions (strategies measured only)."""
    timed = sorted(
        (s for s in predictions if s.strategy in measured_wall_s),
        key=lambda s: s.predicted_wall_s,
    )
    called, close, wrong = [], [], []
    for fast, slow in itertools.combinations(timed, 2):
        pair = (fast.strategy, slow.strategy)
        if too_close(fast, slow):
            close.append(pair)
            continue
        called.append(pair)
        if measured_wall_s[fast.strategy] > measured_wall_s[slow.strategy]:
            wrong.append(pair)
    return RankingCheck(called, close, wrong)
