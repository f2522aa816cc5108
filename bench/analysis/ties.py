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
close to call are reported, never counted as misses.

Peers (`loader.vocabulary.PEER`: another project's loader) are never the one to use in one's own
code: `own_choice` is the rule's choice among loadbench's own predictions, with the fastest peer
that fits named beside it (`verdicts.with_peers`) where it is faster than all of ours; and
`with_measured_peers` gives the bench summary's answer (its own strategies only) the fastest
measured peer that fits, with its costs, and says the peers were left out. No jax.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from bench.analysis.fit import FitModel
from bench.analysis.lead import Lead, candidate
from bench.analysis.predictions import Recommendation, StrategyPrediction, choice
from bench.analysis.recommend import verdict
from bench.analysis.verdicts import TIE, Candidate, Choice, choose, time_order, with_peers
from bench.vocabulary import FITS
from loader.vocabulary import PEER


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


def close_to_recommended(rec: Recommendation, judged: bool = False) -> list[StrategyPrediction]:
    """The other strategies that fit and cannot be called apart from the recommended one on
    time: tied (their 95% intervals overlap), or not judged (one run per shape set); `judged`:
    the tied ones only."""
    chosen = choice(rec.strategies)
    near = [*chosen.ties, *([] if judged else chosen.unjudged)] if chosen else []
    names = {c.strategy for c in near}
    return [s for s in rec.strategies if s.strategy in names]


def tie_sentences(rec: Recommendation) -> list[str]:
    """The rule's sentence where the recommended strategy ties with another on time, or was not
    judged on time against it (one run: why it was chosen, with the figures); nothing where it
    was called apart from the rest."""
    chosen = choice(rec.strategies)
    return [chosen.sentence] if chosen is not None and (chosen.ties or chosen.unjudged) else []


def _with_device(s: StrategyPrediction) -> Candidate:
    """The prediction as the rule sees it, with its device peak where `--accelerator` gave one."""
    c = s.candidate()
    return replace(c, device_peak_bytes=float(s.device.device_peak_bytes)) if s.device else c


def own_choice(rec: Recommendation, peers: Collection[str]) -> Choice | None:
    """The rule's choice among loadbench's own predictions that fit (`peers` left out), with
    the fastest peer that fits beside it (`verdicts.with_peers`: named where it is faster than
    every one of ours weighed); None where none of ours fits."""
    fits = [s for s in rec.strategies if s.verdict == FITS]
    own = choose([_with_device(s) for s in fits if s.strategy not in peers])
    named = [_with_device(s) for s in fits if s.strategy in peers]
    return with_peers(own, named, candidates=True)


def with_measured_peers(group: pd.DataFrame, answer: Lead) -> Lead:
    """The bench summary's answer (`bench.analysis.lead`: loadbench's own strategies only) with
    the measured peers that fit this host beside its choice: the fastest named with its host and
    device peaks where it is faster than every one of ours weighed, and the peers said to be left
    out (`verdicts.with_peers`); the device peak of the chosen one filled in where measured."""
    if answer.choice is None or answer.host_ram_bytes is None or "kind" not in group:
        return answer
    wall, peak = pd.to_numeric(group["wall_s"]), pd.to_numeric(group["peak_rss_bytes"])
    peers = group[(group["kind"] == PEER) & wall.notna() & peak.notna()]
    fitting = [verdict(int(p), answer.host_ram_bytes) == FITS for p in peers["peak_rss_bytes"]]
    peers = peers[pd.Series(fitting, index=peers.index, dtype=bool)]
    said = [_device(candidate(r), r) for _, r in peers.iterrows()]
    best = answer.choice.best
    mine = group[group["strategy"] == best.strategy]
    if len(mine):
        best = _device(best, mine.iloc[0])
    return replace(answer, choice=with_peers(replace(answer.choice, best=best), said))


def _device(c: Candidate, row: pd.Series) -> Candidate:
    device = row.get("device_peak_bytes")
    if device is None or pd.isna(device):
        return c
    return replace(c, device_peak_bytes=float(device))


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
