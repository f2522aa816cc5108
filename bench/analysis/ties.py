"""`recommend`'s predictions under the one tie rule (`bench.analysis.verdicts`), and whether a
measured ranking bore them out.

A prediction's time carries an interval: the predicted seconds times the 95% interval its fit
measured on its largest shape set, relative to that estimate (`FitModel.wall_interval_low` and
`_high`: the paired ratios' interval where the runs carried a reference, else the walls'). A fit
with one run per shape set has no interval, so it ties with every other: one run cannot call two
strategies apart. The recommendation is `verdicts.choose` over the predictions that fit: the
fastest, and among those whose intervals overlap its own, the lighter beyond the peaks' noise;
`tie_sentences` prints the rule's one sentence, `recommend --json` its `choice` (with `ties`).
`recommend --probe T.json --check` holds the measured ranking against the pairs the prediction
called apart: the ranking held when every such pair came out in the predicted order; pairs too
close to call are reported, never counted as misses. No jax.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from bench.analysis.fit import FitModel
from bench.analysis.predictions import Recommendation, StrategyPrediction, choice
from bench.analysis.verdicts import TIE, time_order


def repeats_text(model: FitModel) -> str:
    """The table's "time repeats": the 95% interval its fit measured on its largest shape set,
    relative (`-3% +4% (95% CI, 6 repeats)`), or `1 run` where no shape set was repeated."""
    if model.wall_interval_repeats <= 1:
        return "1 run" if model.most_repeats <= 1 else "no interval"
    low, high = model.wall_interval_low - 1, model.wall_interval_high - 1
    return f"{low:+.0%} {high:+.0%} (95% CI, {model.wall_interval_repeats} repeats)"


def lightest_of_ties(predictions: list[StrategyPrediction]) -> StrategyPrediction | None:
    """The strategy to recommend: `choice`'s (None: none fits)."""
    chosen = choice(predictions)
    if chosen is None:
        return None
    return next(s for s in predictions if s.strategy == chosen.best.strategy)


def close_to_recommended(rec: Recommendation) -> list[StrategyPrediction]:
    """The other strategies that fit, with times too close to call with the recommended one's."""
    chosen = choice(rec.strategies)
    tied = {c.strategy for c in chosen.ties} if chosen else set()
    return [s for s in rec.strategies if s.strategy in tied]


def tie_sentences(rec: Recommendation) -> list[str]:
    """The rule's sentence where the recommended strategy ties with another on time (why it was
    chosen, with the figures); nothing where it was called apart from the rest."""
    chosen = choice(rec.strategies)
    return [chosen.sentence] if chosen is not None and chosen.ties else []


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
        if time_order(fast.candidate(), slow.candidate()) == TIE:
            close.append(pair)
            continue
        called.append(pair)
        if measured_wall_s[fast.strategy] > measured_wall_s[slow.strategy]:
            wrong.append(pair)
    return RankingCheck(called, close, wrong)
