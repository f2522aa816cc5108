"""History: each strategy's peak and time across runs, and the runs where they moved.

A series is one machine, shape set, strategy and configuration (dtype, devices, processes, page
cache, model, route: local, or source, link and concurrency): runs from different machines are
never one series. Its points are the runs, ordered by when they started, each with the median
over its ok repeats of three metrics -- peak over baseline (`peak_over_baseline_bytes`), wall
time (`wall_s`) and wall over the same run's floor line (`floor_ratio`, which compares across
machines) -- and labelled with what ran: loadbench's git commit and the versions of jax, flax and
safetensors (`RunRecord`).

Steps are found by binary segmentation with a Mann-Whitney U test (scipy), as asv's users expect a
regression to be marked: within a segment of runs, a split is a candidate when the repeats on its
two sides are separated -- every repeat on one side beyond every repeat on the other (beyond the
spread, as `compare` asks), and a two-sided Mann-Whitney p below `ALPHA` where enough repeats
stand on each side for the test to reach it -- and their medians differ by more than the metric's
`MIN_STEP` and than a typical run's own repeats stray (relative: `typical_spread`); the candidate
with the largest move is a step, and each side is searched again. So a time on a shared machine
that moved no more than its repeats do, or with one noisy repeat inside the other side's range, is
no step. A step is reported at the first run after it, with the medians before and after (within
its segments). No jax.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import comb
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu

from bench.records.results import (
    GROUP_KEYS,
    LOCAL,
    ROUTE,
    Results,
    headline,
    routed,
    with_route,
)
from bench.vocabulary import OK
from loader.vocabulary import REFERENCE, TOTAL

PEAK = "peak_over_baseline_bytes"
WALL = "wall_s"
FLOOR = "floor_ratio"
METRICS = (PEAK, WALL, FLOOR)
#: The least relative move a step must make: peaks repeat closely, times less so.
MIN_STEP = {PEAK: 0.05, WALL: 0.15, FLOOR: 0.15}
ALPHA = 0.05
#: A series: the summary's configuration (`GROUP_KEYS`) on one machine, across runs.
SERIES_KEYS = ["machine", *(k for k in GROUP_KEYS if k != "run_id")]
LABELS = ["git_commit", "jax_version", "flax_version", "safetensors_version"]


@dataclass(frozen=True)
class Step:
    """Where one metric of one series moved: `run_id` is the first run after the step; `before`
    and `after` the medians of the repeats on either side (within the segments around it)."""

    shapes: str
    strategy: str
    metric: str
    run_id: str
    before: float
    after: float
    machine: str
    p_value: float | None  # Mann-Whitney's; None where too few repeats for the test
    route: str = LOCAL  # local, or `s3 · 1Gbit · c16` (`bench.records.results.route`)

    @property
    def change(self) -> float:
        """The relative move, after / before - 1."""
        return self.after / self.before - 1 if self.before else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """`history --json`'s object: {shapes, strategy, metric, run_id, before, after, ...}."""
        return asdict(self)


def repeats(results: Results) -> pd.DataFrame:
    """One row per ok repeat of a model-loading strategy: its series keys, run, start time, labels
    and the three metrics (the floor ratio against its run's median floor line)."""
    rows = with_route(headline(results.phases))
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK)]
    runs = results.runs.drop_duplicates("run_id", keep="last")
    runs = runs[["run_id", "machine", "started_utc", *LABELS]]
    rows = rows.drop(columns=[c for c in ("machine",) if c in rows]).merge(runs, on="run_id")
    if "model" not in rows:
        rows = rows.assign(model="spec")
    wall = pd.to_numeric(rows["wall_s"])
    floor_keys = ["run_id", "shapes", "cache"]
    floor = rows[rows["kind"] == REFERENCE].groupby(floor_keys)["wall_s"].median()
    floor_wall = rows.join(floor.rename("floor_wall"), on=floor_keys)["floor_wall"]
    out = rows.assign(
        **{
            PEAK: pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"]),
            WALL: wall,
            FLOOR: wall / pd.to_numeric(floor_wall),
        }
    )
    return out[out["kind"] != REFERENCE]


def points(results: Results) -> pd.DataFrame:
    """One row per (series, run), ordered by series then the run's start: the medians of the
    metrics over its ok repeats, the repeats counted, and the run's labels."""
    reps = repeats(results)
    keys = [*SERIES_KEYS, "run_id", "started_utc"]
    if reps.empty:
        return pd.DataFrame(columns=[*keys, *LABELS, *METRICS, "repeats"])
    grouped = reps.groupby(keys, dropna=False, sort=False)
    frame = grouped[list(METRICS)].median().join(grouped[LABELS].first())
    frame = frame.join(grouped.size().rename("repeats")).reset_index()
    return frame.sort_values([*SERIES_KEYS, "started_utc", "run_id"], kind="stable")


def _separated(before: list[float], after: list[float]) -> tuple[bool, float | None]:
    """(the two samples are separated: every value of one beyond every value of the other, and
    Mann-Whitney's p below `ALPHA` where the test can reach it; that p, else None)."""
    apart = max(before) < min(after) or max(after) < min(before)
    smallest_p = 2.0 / comb(len(before) + len(after), len(before))
    if smallest_p >= ALPHA:  # too few repeats for the test to call anything: separation alone
        return apart, None
    p = float(mannwhitneyu(before, after, alternative="two-sided").pvalue)
    return apart and p < ALPHA, p


def _median(samples: list[list[float]]) -> float:
    return float(pd.Series([v for run in samples for v in run]).median())


def typical_spread(samples: list[list[float]]) -> float:
    """How far a typical run's repeats stray: the median over runs of (max - min) / median (0
    where no run was repeated)."""
    spreads = [
        (max(run) - min(run)) / abs(_median([run]))
        for run in samples
        if len(run) > 1 and _median([run])
    ]
    return float(pd.Series(spreads).median()) if spreads else 0.0


def _split(samples: list[list[float]], min_step: float) -> tuple[int, float | None] | None:
    """The best split of `samples` (one list of repeats per run) that is a step, or None."""
    least = max(min_step, typical_spread(samples))
    best: tuple[float, int, float | None] | None = None  # (move, split, p): the largest move
    for k in range(1, len(samples)):
        before = [v for run in samples[:k] for v in run]
        after = [v for run in samples[k:] for v in run]
        lo, hi = _median(samples[:k]), _median(samples[k:])
        move = abs(hi - lo) / abs(lo) if lo else float("inf")
        if move <= least:
            continue
        separated, p = _separated(before, after)
        if not separated:
            continue
        if best is None or move > best[0]:
            best = (move, k, p)
    return (best[1], best[2]) if best else None


def _segment(samples: list[list[float]], min_step: float, lo: int, hi: int) -> list[tuple]:
    """Steps in runs [lo, hi): (index of the first run after, p, median before, median after)."""
    found = _split(samples[lo:hi], min_step)
    if found is None:
        return []
    k, p = found
    cut = lo + k
    left = _segment(samples, min_step, lo, cut)
    right = _segment(samples, min_step, cut, hi)
    # the medians of the segments adjoining the step, once both sides are split further
    start = max([s[0] for s in left], default=lo)
    end = min([s[0] for s in right], default=hi)
    step = (cut, p, _median(samples[start:cut]), _median(samples[cut:end]))
    return sorted([*left, step, *right])


def steps(results: Results, metrics: tuple[str, ...] = METRICS) -> list[Step]:
    """Every step of every series, by machine, shape set, strategy, metric, then run order."""
    reps = repeats(results)
    out: list[Step] = []
    if reps.empty:
        return out
    reps = reps.sort_values(["started_utc", "run_id"], kind="stable")
    for key, series in reps.groupby(SERIES_KEYS, dropna=False, sort=True):
        labels = dict(zip(SERIES_KEYS, key, strict=True))
        runs = list(dict.fromkeys(series["run_id"]))
        for metric in metrics:
            by_run = [series.loc[series["run_id"] == r, metric].dropna().tolist() for r in runs]
            kept = [(r, v) for r, v in zip(runs, by_run, strict=True) if v]
            samples = [v for _, v in kept]
            for cut, p, before, after in _segment(samples, MIN_STEP[metric], 0, len(samples)):
                out.append(
                    Step(
                        shapes=str(labels["shapes"]),
                        strategy=str(labels["strategy"]),
                        metric=metric,
                        run_id=str(kept[cut][0]),
                        before=before,
                        after=after,
                        machine=str(labels["machine"]),
                        p_value=p,
                        route=str(labels[ROUTE]),
                    )
                )
    return out


METRIC_WORDS = {PEAK: "peak over baseline", WALL: "wall time", FLOOR: "wall / floor line"}


def metric_text(metric: str, value: float) -> str:
    """A metric's value as history shows it: `0.586 GiB` (a peak), `1.23 s`, `2.00x`; `-` NaN."""
    if value != value:
        return "-"
    if metric == PEAK:
        return f"{value / (1 << 30):.3f} GiB"
    return f"{value:.2f}x" if metric == FLOOR else f"{value:.2f} s"


def steps_table(found: list[Step]) -> pd.DataFrame:
    """The steps as a table to show (the History page, the report): where, what, the first run
    after, the medians before and after (GiB for a peak, s or x otherwise), the change."""

    return pd.DataFrame(
        {
            "machine": [s.machine for s in found],
            "shapes": [s.shapes for s in found],
            "strategy": [routed(s.strategy, s.route) for s in found],
            "metric": [METRIC_WORDS[s.metric] for s in found],
            "first run after": [s.run_id for s in found],
            "before": [metric_text(s.metric, s.before) for s in found],
            "after": [metric_text(s.metric, s.after) for s in found],
            "change": [f"{s.change:+.0%}" for s in found],
        }
    )
