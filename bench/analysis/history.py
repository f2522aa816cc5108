"""History: each strategy's peak and time across runs, the runs where they stepped, and where its
configuration changed.

A series is one machine, shape set, strategy and layout (dtype, devices, processes, page cache,
model, route: local, or source, link and concurrency): runs from different machines are never one
series. Its points are the runs, ordered by when they started, each with its ok repeats'
peak over baseline (`peak_over_baseline_bytes`, median), time (`time_ratio`: the geometric mean
of the paired ratios, each repeat's wall over the reference timed beside it, with its 95%
interval; `bench.intervals`), wall time (`wall_s`, median; shown, never judged) and wall
over the same run's floor line (`floor_ratio`), labelled with its date and loadbench's git commit
(`label`), the versions of jax, flax and safetensors, and its configuration (`config`: budget,
threads, cache policy, staging, host-RAM, CPU and disk limits, model dtype, and the machine's CPU,
RAM and kernel). Link and concurrency are the route's, so another link is another series.

A change of configuration between two runs of a series is a `Boundary`, labelled with what
changed ("budget 256.0 MiB -> 32.0 MiB"), never a step: steps are looked for only between runs of
one configuration. Runs whose machine was shared (other processes took over a quarter of the
CPUs: `SHARED`) are judged only among themselves, and quiet runs among themselves; within those,
a split whose sides were shared differently (`bench.intervals.basis`) is not judged on
time: a CPU-heavy neighbour slows each strategy by its threads, which neither the reference
taken beside it nor CPU time undoes (on a real machine a CPU ratio fell 30% while the wall rose,
the code unchanged). A step is found by binary segmentation over those runs, judged on the time
(the paired ratios) and the peak only (absolute seconds follow the machine, which the paired
ratio does not), each by the one rule for "different?" (`bench.analysis.difference`: the 95%
interval of after / before, Welch's t on the logarithms of the repeats, widened by how far whole
runs stray from each other, `run_scatter`): a split is a candidate when that interval lies wholly
beyond `MIN_STEP` (a time 10%, a peak 5%) either way: a move neither the repeats nor the
run-to-run scatter can explain. Repeats of one run share its machine's state, so their interval
alone would call a machine drifting a few percent per run a step wherever it is cut.

The candidate with the largest move is a step, and each side is searched again. A step is
reported at the first run after it, with the values of the last run before it and of the first
run after it, as their rows show them, and the move between the segments either side in the
rule's words. A time step among runs beside other processes is `unstable`, not a verdict
(`Step.unstable`; the rule `compare` keeps): a neighbour slows each strategy by its threads, by
another amount each run, and moves its CPU ratio too, so neither ratio tells the code's doing
from the neighbour's. Where no step is found, `reach` says the smallest step each
series' runs could have shown: (1 + `MIN_STEP`) times the half-width of the tightest split's
interval, so "no steps" is never read as "nothing moved" where the runs could not tell.
Rows of older files carry no reference: their time is their wall over the same run's floor line,
and that change of reference is a boundary too. No jax.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypedDict

import pandas as pd

from bench.analysis.difference import MEMORY_MEASURE, TIME_MEASURE, Difference, difference
from bench.intervals import (
    PAIRED_BASIS,
    SHARED_LIMIT,
    basis,
    contention,
    interval,
)
from bench.records.configuration import ROW_CONFIGURATION, run_limits, value_text
from bench.records.results import (
    GROUP_KEYS,
    LOCAL,
    ROUTE,
    X_CEILING,
    X_FLOOR,
    Results,
    headline,
    routed,
    summarize,
    with_route,
)
from bench.vocabulary import OK
from loader.vocabulary import REFERENCE, TOTAL
from shapes.sizes import MISSING

PEAK = "peak_over_baseline_bytes"
TIME = "time_ratio"
WALL = "wall_s"
FLOOR = "floor_ratio"
OTHERS = "others_cpu_fraction"  # the share of the CPUs other processes took meanwhile
METRICS = (PEAK, TIME, WALL, FLOOR)
#: What steps are judged on: the peak, and the time against its own moment's reference.
STEP_METRICS = (PEAK, TIME)
#: The least relative move a step must make: peaks repeat closely, times less so.
MIN_STEP = {PEAK: 0.05, TIME: 0.10}
NORMAL_MAD = 0.6745  # a normal's median absolute deviation, in standard deviations
#: A series: the summary's configuration (`GROUP_KEYS`) on one machine, across runs.
SERIES_KEYS = ["machine", *(k for k in GROUP_KEYS if k != "run_id")]
LABELS = ["git_commit", "jax_version", "flax_version", "safetensors_version"]
#: A run's configuration beyond its series: what each part is called in a boundary's label (the
#: limits and options every row records, `bench.records.configuration`, and its time reference).
ROW_CONFIG = {**ROW_CONFIGURATION, "reference": "time reference"}
RUN_CONFIG = {
    "cpu_model": "CPU",
    "cpu_count": "CPUs",
    "ram_bytes": "RAM",
    "kernel": "kernel",
    "cpu_limit": "usable CPUs",
}
CONFIG = {**ROW_CONFIG, **RUN_CONFIG}
SHARED = "shared"  # the run's machine was shared: other processes took over `SHARED_LIMIT`
#: How the time of a row was referenced: the copy pass beside it, or (older files) the floor line.
MOMENT, FLOOR_LINE = "copy pass beside each repeat", "the run's floor line"


@dataclass(frozen=True)
class Step:
    """Where one metric of one series moved: `run_id` is the first run after the step; `before`
    and `after` the values on either side (within the segments around it: the medians of a
    peak, the geometric means of a time), and for a time `low` and `high`, the 95% interval of
    after / before."""

    shapes: str
    strategy: str
    metric: str
    run_id: str
    before: float
    after: float
    machine: str
    p_value: float | None  # Mann-Whitney's (peak), Welch's one-sided (time); None: too few
    route: str = LOCAL  # local, or `s3 · 1Gbit · c16` (`bench.records.results.route`)
    low: float | None = None
    high: float | None = None
    basis: str | None = None  # a time's: paired (wall over the reference beside each repeat)
    words: str = ""  # the move as `bench.analysis.difference` says it: `1.40x slower (95% CI ...)`
    unstable: bool = False  # a time step among runs beside other processes: no verdict

    @property
    def change(self) -> float:
        """The relative move, after / before - 1."""
        return self.after / self.before - 1 if self.before else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """`history --json`'s object: {shapes, strategy, metric, run_id, before, after, ...}."""
        return asdict(self)


@dataclass(frozen=True)
class Boundary:
    """Where a series' configuration changed: `run_id` is the first run of the new one, and
    `change` says what changed (`budget 256.0 MiB -> 32.0 MiB`)."""

    machine: str
    shapes: str
    strategy: str
    route: str
    run_id: str
    change: str

    def to_dict(self) -> dict[str, Any]:
        """`history --json`'s object under `boundaries`."""
        return asdict(self)


def config_value(name: str, value: Any) -> str:
    """One part of a configuration as a boundary says it (`configuration.value_text`)."""
    return value_text(name, value)


def repeats(results: Results) -> pd.DataFrame:
    """One row per ok repeat of a model-loading strategy: its series keys, run, start time, labels,
    configuration and the metrics (the time over its own reference; older rows, over the run's
    median floor line)."""
    rows = with_route(headline(results.phases))
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK)]
    runs = results.runs.drop_duplicates("run_id", keep="last")
    run_columns = [c for c in ("run_id", "machine", "started_utc", *LABELS, *RUN_CONFIG) if c]
    runs = runs[[c for c in run_columns if c in runs]]
    rows = rows.drop(columns=[c for c in ("machine",) if c in rows]).merge(runs, on="run_id")
    if "model" not in rows:
        rows = rows.assign(model="spec")
    wall = pd.to_numeric(rows["wall_s"])
    floor_keys = ["run_id", "shapes", "cache"]
    floor = rows[rows["kind"] == REFERENCE].groupby(floor_keys)["wall_s"].median()
    floor_wall = rows.join(floor.rename("floor_wall"), on=floor_keys)["floor_wall"]
    paired = pd.to_numeric(rows.get("paired_ratio", pd.Series(index=rows.index, dtype=float)))
    by_floor = wall / pd.to_numeric(floor_wall)
    floor_paired = rows[rows["kind"] == REFERENCE].assign(p=paired).groupby(floor_keys)["p"]
    mine = rows.join(floor_paired.median().rename("fp"), on=floor_keys)["fp"]
    out = rows.copy()
    out[PEAK] = pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"])
    out[WALL] = wall
    out[TIME] = paired.where(paired.notna(), by_floor)
    out[FLOOR] = (paired / mine).where(paired.notna() & mine.notna(), by_floor)
    out["reference"] = [MOMENT if p == p else FLOOR_LINE for p in paired]
    out[OTHERS] = pd.to_numeric(rows.get(OTHERS, pd.Series(index=rows.index, dtype=float)))
    for name in ROW_CONFIG:
        if name not in out:
            out[name] = None
    shared = out.groupby("run_id")[OTHERS].agg(lambda o: _shared(o.tolist()))
    out[SHARED] = out["run_id"].map(shared).astype(bool)
    return out[out["kind"] != REFERENCE]


def _shared(others: list[float | None]) -> bool:
    """A run beside other processes: they took over `SHARED_LIMIT` of the CPUs (the median over
    its repeats, every strategy's and the reference's); unknown reads as not shared."""
    taken = contention(others)
    return taken is not None and taken > SHARED_LIMIT


def _label(started: Any, commit: Any, limits: Sequence[str] = ()) -> str:
    """`2026-12-03 18:40 · 1a2b3c4`: when a run started and what code it ran, then the limits its
    children ran under where it had any (`· 1 CPU`)."""
    when = str(started)[:16].replace("T", " ") if isinstance(started, str) else "?"
    said = f"{when} · {commit}" if isinstance(commit, str) and commit else when
    return "".join([said, *(f" · {limit}" for limit in limits)])


def _run_limits(results: Results) -> dict[str, list[str]]:
    """Run id -> the limits its children ran under (`configuration.run_limits`)."""
    phases = results.phases
    return {
        str(run["run_id"]): run_limits(run, phases[phases["run_id"] == run["run_id"]])
        for run in results.runs.to_dict("records")
    }


def _config_text(frame: pd.DataFrame) -> pd.Series:
    """`budget 256.0 MiB, CPU AMD EPYC, CPUs 2, ...`: the parts of each point's configuration
    that are set."""
    return frame[list(CONFIG)].apply(
        lambda r: ", ".join(
            f"{CONFIG[k]} {config_value(k, r[k])}" for k in CONFIG if config_value(k, r[k]) != "-"
        ),
        axis=1,
    )


def points(results: Results) -> pd.DataFrame:
    """One row per (series, run), ordered by series then the run's start: the peak's and the
    wall's medians over its ok repeats, the time's geometric mean and 95% interval
    (`time_low`, `time_high`), the floor ratio, the repeats counted, the run's labels, its
    `label` (date and commit) and its configuration (`config`, and each part's own column)."""
    reps = repeats(results)
    keys = [*SERIES_KEYS, "run_id", "started_utc"]
    if reps.empty:
        return pd.DataFrame(columns=[*keys, *LABELS, *METRICS, "repeats", "label", "config"])
    for name in CONFIG:
        if name not in reps:
            reps[name] = None
    grouped = reps.groupby(keys, dropna=False, sort=False)
    frame = grouped[[PEAK, WALL, FLOOR]].median()
    times = [interval(v.dropna().tolist()) for _, v in grouped[TIME]]
    frame[TIME] = [iv.estimate if iv else float("nan") for iv in times]
    frame["time_low"] = [iv.low if iv and iv.n > 1 else float("nan") for iv in times]
    frame["time_high"] = [iv.high if iv and iv.n > 1 else float("nan") for iv in times]
    frame = frame.join(grouped[[*LABELS, *CONFIG]].first())
    frame = frame.join(grouped.size().rename("repeats")).reset_index()
    limits = _run_limits(results)
    frame = frame.assign(
        label=[
            _label(s, c, limits.get(str(r), []))
            for s, c, r in zip(frame["started_utc"], frame["git_commit"], frame["run_id"])
        ],
        config=_config_text(frame),
        **{FLOOR: _floor_ratios(results, frame)},
    )
    return frame.sort_values([*SERIES_KEYS, "started_utc", "run_id"], kind="stable")


def _floor_ratios(results: Results, frame: pd.DataFrame) -> list[float]:
    """Each point's `x floor`, as every surface says it (`bench.records.results.
    with_floor_ratio`, over the run's summary); the repeats' median where no summary row
    matches."""
    summary = summarize(results.phases)
    if summary.empty:
        return list(frame[FLOOR])
    by_key = {
        tuple(str(v) for v in key): ratio
        for key, ratio in zip(
            summary[GROUP_KEYS].itertuples(index=False), summary["floor_ratio"], strict=True
        )
    }
    own = frame[GROUP_KEYS].itertuples(index=False)
    return [by_key.get(tuple(str(v) for v in k), f) for k, f in zip(own, frame[FLOOR], strict=True)]


def _median(samples: list[list[float]]) -> float:
    return float(pd.Series([v for run in samples for v in run]).median())


@dataclass(frozen=True)
class _Move:
    """A candidate split's move: relative size, p, the ratio's 95% interval and (a time) what it
    was judged on."""

    size: float
    p: float | None
    low: float | None = None
    high: float | None = None
    basis: str | None = None
    words: str = ""
    unstable: bool = False


#: One repeat of a time: its paired ratio and the share of the CPUs others took meanwhile (None:
#: not recorded).
Timed = tuple[float, float | None]


def run_scatter(samples: list[list[float]]) -> float:
    """How far one run's value strays from the next's, beyond its own repeats: the standard
    deviation of a run's log mean from run to run, from the median move between neighbouring
    runs (a robust estimate: one step among them does not inflate it); 0 with fewer than 4
    runs, where it cannot be told from a step.

    Repeats within a run share that run's machine state (its first-touch speed, what else ran),
    so their interval says nothing of how the next run will land: a series whose runs drift
    by a few percent each would otherwise show a "step" wherever it is cut.
    """
    means = []
    for run in samples:
        logs = [math.log(v) for v in run if v is not None and v > 0]
        if logs:
            means.append(sum(logs) / len(logs))
    moves = [abs(b - a) for a, b in zip(means, means[1:])]
    if len(moves) < 3:
        return 0.0
    return float(pd.Series(moves).median()) / (NORMAL_MAD * math.sqrt(2))


def _between(scatter: float, before: list[Any], after: list[Any]) -> float:
    """The run-to-run scatter of the mean of `before`'s runs against the mean of `after`'s."""
    return scatter * math.sqrt(1 / len(before) + 1 / len(after))


def _peak_move(
    before: list[list[float]], after: list[list[float]], scatter: dict[str, float]
) -> _Move | None:
    """A step of the peak: NEW's repeats different from BEFORE's (`bench.analysis.difference`,
    widened by the run-to-run scatter) with the whole interval beyond `MIN_STEP`; None where
    not."""
    found = difference(
        [v for r in before for v in r],
        [v for r in after for v in r],
        measure=MEMORY_MEASURE,
        run_scatter=_between(scatter[PEAK], before, after),
    )
    if not found.beyond(1 + MIN_STEP[PEAK]):
        return None
    return _Move(abs(found.ratio - 1), found.p, found.low, found.high, words=found.text())


def _shared_alike(before: list[list[Timed]], after: list[list[Timed]]) -> bool:
    """The two sides of a split ran on machines shared alike (`intervals.basis`: their median
    shares of the CPUs others took within `CONTENTION_GAP`), so their paired ratios compare."""
    others = [[t[1] for r in side for t in r] for side in (before, after)]
    return basis(*others) == PAIRED_BASIS


def _time_move(
    before: list[list[Timed]], after: list[list[Timed]], scatter: dict[str, float]
) -> _Move | None:
    """A step of the time: after against before on the paired ratios
    (`bench.analysis.difference`, widened by the series' run-to-run scatter for the number of
    runs on each side), its whole interval beyond `MIN_STEP` either way; None where not, and
    where the sides' machines were shared differently: a neighbour slows each strategy by its
    threads, which neither the reference beside it nor CPU time undoes (measured: a CPU ratio
    30% down while the wall rose, the code unchanged). A step among runs beside other processes
    (over `SHARED_LIMIT` of the CPUs, the median of their repeats) is `unstable`."""
    if not _shared_alike(before, after):
        return None
    found = _time_difference(before, after, scatter)
    if not found.beyond(1 + MIN_STEP[TIME]):
        return None
    move = _Move(abs(found.ratio - 1), found.p, found.low, found.high, PAIRED_BASIS, found.text())
    taken = contention([t[1] for r in before + after for t in r])
    if taken is None or taken <= SHARED_LIMIT:
        return move
    said = f"{found.text()} beside other processes ({taken:.0%} of the CPUs): not a verdict"
    return replace(move, unstable=True, words=said)


def _time_difference(
    before: list[list[Timed]], after: list[list[Timed]], scatter: dict[str, float]
) -> Difference:
    """After against before on the paired ratios, widened by the run-to-run scatter."""
    return difference(
        [t[0] for r in before for t in r],
        [t[0] for r in after for t in r],
        measure=TIME_MEASURE,
        run_scatter=_between(scatter[TIME], before, after),
    )


def _split(
    samples: list[list[Any]], metric: str, scatter: dict[str, float]
) -> tuple[int, _Move] | None:
    """The best split of `samples` (one list of repeats per run: values of a peak, `Timed` of a
    time) that is a step, or None; `scatter`: a time's run-to-run scatter per basis."""
    best: tuple[int, _Move] | None = None
    for k in range(1, len(samples)):
        before, after = samples[:k], samples[k:]
        if metric == TIME:
            move = _time_move(before, after, scatter)
        else:
            move = _peak_move(before, after, scatter)
        if move is not None and (best is None or move.size > best[1].size):
            best = (k, move)
    return best


def _centre(samples: list[list[Any]], metric: str) -> float:
    """What a segment's value is said as: a time's geometric mean, a peak's median."""
    if metric == TIME:
        iv = interval([float(t[0]) for run in samples for t in run])
        return iv.estimate if iv else float("nan")
    return _median(samples)


def _segment(
    samples: list[list[Any]], metric: str, lo: int, hi: int, scatter: dict[str, float]
) -> list[tuple]:
    """Steps in runs [lo, hi): (index of the first run after, move, value before, after)."""
    found = _split(samples[lo:hi], metric, scatter)
    if found is None:
        return []
    k, move = found
    cut = lo + k
    left = _segment(samples, metric, lo, cut, scatter)
    right = _segment(samples, metric, cut, hi, scatter)
    # the values of the runs either side, as their rows show them
    step = (
        cut,
        move,
        _centre(samples[cut - 1 : cut], metric),
        _centre(samples[cut : cut + 1], metric),
    )
    return sorted([*left, step, *right], key=lambda t: t[0])


def _segments(series: pd.DataFrame, runs: list[str]) -> list[list[str]]:
    """The runs of a series cut where its configuration changes (runs in start order)."""
    configs = series.drop_duplicates("run_id").set_index("run_id")["config_key"]
    out: list[list[str]] = []
    for run in runs:
        if out and configs[out[-1][-1]] == configs[run]:
            out[-1].append(run)
        else:
            out.append([run])
    return out


def _change(before: pd.Series, after: pd.Series) -> str:
    """`budget 256.0 MiB -> 32.0 MiB; threads - -> 4`: the parts of a configuration that moved."""
    said = [
        f"{CONFIG[k]} {config_value(k, before[k])} -> {config_value(k, after[k])}"
        for k in CONFIG
        if config_value(k, before[k]) != config_value(k, after[k])
    ]
    return "; ".join(said)


def _with_config_key(reps: pd.DataFrame) -> pd.DataFrame:
    for name in CONFIG:
        if name not in reps:
            reps[name] = None
    key = reps[list(CONFIG)].apply(lambda r: tuple(config_value(k, r[k]) for k in CONFIG), axis=1)
    return reps.assign(config_key=key)


def boundaries(results: Results) -> list[Boundary]:
    """Every change of configuration between two runs of one series, at the first run after."""
    reps = repeats(results)
    if reps.empty:
        return []
    reps = _with_config_key(reps.sort_values(["started_utc", "run_id"], kind="stable"))
    out = []
    for key, series in reps.groupby(SERIES_KEYS, dropna=False, sort=True):
        labels = dict(zip(SERIES_KEYS, key, strict=True))
        first = series.drop_duplicates("run_id").set_index("run_id")
        parts = _segments(series, list(first.index))
        for prev, nxt in zip(parts, parts[1:]):
            out.append(
                Boundary(
                    **_series(labels),
                    run_id=str(nxt[0]),
                    change=_change(first.loc[[prev[-1]]].iloc[0], first.loc[[nxt[0]]].iloc[0]),
                )
            )
    return out


def steps(results: Results, metrics: tuple[str, ...] = STEP_METRICS) -> list[Step]:
    """Every step of every series (`all_steps`) that is a verdict: not `unstable`."""
    return [s for s in all_steps(results, metrics) if not s.unstable]


def all_steps(results: Results, metrics: tuple[str, ...] = STEP_METRICS) -> list[Step]:
    """Every step of every series, by machine, shape set, strategy, metric, then run order; only
    between runs of one configuration (`boundaries` says where it changed); the unstable ones
    (`Step.unstable`) among them."""
    out: list[Step] = []
    for labels, series, stretches in _judged_together(results):
        for alike in stretches:
            for metric in metrics:
                out += _steps_of(series, alike, metric, labels) if alike else []
    return out


def _judged_together(
    results: Results,
) -> Iterator[tuple[dict[str, Any], pd.DataFrame, list[list[str]]]]:
    """Per series (its labels, its repeats in start order): the stretches of its runs judged
    together, one configuration and one sharing of the machine each (quiet, then shared)."""
    reps = repeats(results)
    if reps.empty:
        return
    reps = _with_config_key(reps.sort_values(["started_utc", "run_id"], kind="stable"))
    for key, series in reps.groupby(SERIES_KEYS, dropna=False, sort=True):
        runs = list(dict.fromkeys(series["run_id"]))
        shared = series.drop_duplicates("run_id").set_index("run_id")[SHARED]
        stretches = [
            alike
            for part in _segments(series, runs)
            for alike in ([r for r in part if not shared[r]], [r for r in part if shared[r]])
        ]
        yield dict(zip(SERIES_KEYS, key, strict=True)), series, stretches


class _Series(TypedDict):
    """What names a series on each of its records (a `Step`, `Boundary` or `Reach`)."""

    machine: str
    shapes: str
    strategy: str
    route: str


def _series(labels: dict[str, Any]) -> _Series:
    """A series' labels (`SERIES_KEYS`, as grouped) as its records name it."""
    return _Series(
        machine=str(labels["machine"]),
        shapes=str(labels["shapes"]),
        strategy=str(labels["strategy"]),
        route=str(labels[ROUTE]),
    )


def _steps_of(
    series: pd.DataFrame, runs: list[str], metric: str, labels: dict[str, Any]
) -> list[Step]:
    by_run = [_samples(series[series["run_id"] == r], metric) for r in runs]
    kept = [(r, v) for r, v in zip(runs, by_run, strict=True) if v]
    samples = [v for _, v in kept]
    # over the whole series of one configuration, not each segment
    values = [[t[0] for t in run] for run in samples] if metric == TIME else samples
    scatter = {metric: run_scatter(values)}
    return [
        Step(
            **_series(labels),
            metric=metric,
            run_id=str(kept[cut][0]),
            before=before,
            after=after,
            p_value=move.p,
            low=move.low,
            high=move.high,
            basis=move.basis,
            words=move.words,
            unstable=move.unstable,
        )
        for cut, move, before, after in _segment(samples, metric, 0, len(samples), scatter)
    ]


@dataclass(frozen=True)
class Reach:
    """The smallest step one metric of one series could have shown: `factor` (1.25: a move of
    25% either way), over the runs of one configuration and one sharing (`runs` of them); NaN
    with fewer than two runs with repeats."""

    machine: str
    shapes: str
    strategy: str
    route: str
    metric: str
    factor: float
    runs: int

    def to_dict(self) -> dict[str, Any]:
        """`history --json`'s object under `smallest_steps`."""
        return {k: None if isinstance(v, float) and v != v else v for k, v in asdict(self).items()}


def _smallest(samples: list[list[Any]], metric: str) -> float:
    """The least move a step between these runs must make to be found: over every split, the
    rule's interval (widened by the run-to-run scatter) must lie wholly beyond `MIN_STEP`, so a
    true move of r is found where r / e^half > 1 + `MIN_STEP`; the tightest split's (NaN: no
    split with an interval)."""
    values = [[t[0] for t in run] for run in samples] if metric == TIME else samples
    scatter = run_scatter(values)
    widths = []
    for k in range(1, len(values)):
        before, after = values[:k], values[k:]
        found = difference(
            [v for r in before for v in r],
            [v for r in after for v in r],
            measure=TIME_MEASURE if metric == TIME else MEMORY_MEASURE,
            run_scatter=_between(scatter, before, after),
        )
        if found.judged:
            widths.append(math.sqrt(found.high / found.low))
    return (1 + MIN_STEP[metric]) * min(widths) if widths else float("nan")


def reach(results: Results, metrics: tuple[str, ...] = STEP_METRICS) -> list[Reach]:
    """The smallest step each series could have shown, per metric, over its longest stretch of
    runs judged together (one configuration, one sharing of the machine: as `all_steps` judges).

    Example:
        >>> [(r.strategy, r.metric, round(r.factor, 2)) for r in reach(results)]
        [('pipelined', 'peak_over_baseline_bytes', 1.05), ('pipelined', 'time_ratio', 1.12)]
    """
    out: list[Reach] = []
    for labels, series, stretches in _judged_together(results):
        longest = max(stretches, key=len)
        for metric in metrics:
            samples = [
                v for v in (_samples(series[series["run_id"] == r], metric) for r in longest) if v
            ]
            out.append(
                Reach(
                    **_series(labels),
                    metric=metric,
                    factor=_smallest(samples, metric),
                    runs=len(samples),
                )
            )
    return out


def _samples(run: pd.DataFrame, metric: str) -> list[Any]:
    """One run's repeats of `metric`: values of a peak; `Timed` pairs of a time."""
    if metric != TIME:
        return run[metric].dropna().tolist()
    known = run[run[TIME].notna()]
    return [
        (float(t), None if o != o else float(o))
        for t, o in zip(known[TIME], known[OTHERS], strict=True)
    ]


METRIC_WORDS = {
    PEAK: "peak over baseline",
    TIME: X_CEILING,
    WALL: "wall time",
    FLOOR: X_FLOOR,
}


def metric_text(metric: str, value: float) -> str:
    """A metric's value as history shows it: `0.586 GiB` (a peak), `1.23 s`, `2.00x`; `-` NaN."""
    if value != value:
        return MISSING
    if metric == PEAK:
        return f"{value / (1 << 30):.3f} GiB"
    return f"{value:.2f} s" if metric == WALL else f"{value:.2f}x"


def steps_table(found: list[Step]) -> pd.DataFrame:
    """The steps as a table to show (the History page, the report): where, what, the first run
    after, the values before and after (GiB for a peak, x for a time), the change."""
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
            "difference": [s.words for s in found],
        }
    )
