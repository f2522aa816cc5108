"""What `loadbench report` shows, as frames: the results of one run made into report sections.

The report is a straight line, results -> frames -> charts -> one HTML: this module is the
frames step. `report_frames(results, run_id)` picks the run (by default each shape set's newest
complete, unconstrained run), and per shape set computes, once, everything the report prints or
draws: per configuration the answer (`answer.headline`, with its backend), the strategy rows and
the table that leads with the answer (`answer.cost_table`), the ceiling; the phase medians; the
timeline's panels (one per strategy, a multi-process load as its process's own RSS beside the
group's total: `frames.group_traces`) and phase bands; every child run with its status; and
where a metric stepped across the folder's runs (`bench.analysis.history`). A route is a
configuration: a local load and one over s3 at concurrency 16 are two sections, and their phase
medians and timeline panels are named apart (`pipelined · s3 · 1Gbit · c16`). No charts and no
HTML here (`charts.report_figures` and `report` do those); no Streamlit, no jax.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis import advice, history
from bench.analysis.judge import default_devices
from bench.analysis.recommend import TargetCheckpoint
from bench.errors import BenchError
from bench.records.results import LOCAL, ROUTE, Results, summarize
from bench.vocabulary import OK
from dashboard import answer, comparison, frames, scatter, style
from loader.vocabulary import TOTAL

DEFAULT_RAM = 16 << 30  # the host RAM answered for when no run recorded its machine's


@dataclass(frozen=True)
class CostFrames:
    """One configuration of a shape set: its title, answer, strategy rows and table, ceiling."""

    title: str
    headline: answer.Headline
    note: str | None
    rows: pd.DataFrame
    table: pd.DataFrame
    ceiling: scatter.CeilingLine | None


@dataclass(frozen=True)
class ShapeSetFrames:
    """One shape set: its configurations, phase medians, timeline panels and bands."""

    shapes: str
    costs: tuple[CostFrames, ...]
    medians: pd.DataFrame
    panels: pd.DataFrame  # strategy, trace, t_s, rss (bytes over baseline)
    bands: pd.DataFrame  # strategy, phase, start_s, end_s


@dataclass(frozen=True)
class TargetFrames:
    """The Target host view of one shape set: `loadbench recommend`'s sentences, its table and
    the predicted peaks to draw, for a host of `ram` bytes with `devices` devices (`sentences`
    alone where nothing could be predicted)."""

    shapes: str
    ram: int
    devices: int
    sentences: tuple[str, ...]
    table: pd.DataFrame
    predicted: pd.DataFrame  # one row per strategy: strategy, predicted_peak_bytes, verdict


@dataclass(frozen=True)
class HistoryFrames:
    """The History view across every run in the folder: the points, the steps and the changes
    of configuration, and the two as tables."""

    points: pd.DataFrame
    steps: list[history.Step]
    boundaries: list[history.Boundary]
    steps_table: pd.DataFrame
    boundaries_table: pd.DataFrame


@dataclass(frozen=True)
class ReportFrames:
    """The whole report as frames: which run, the host RAM answered for, each shape set (the
    largest checkpoint first), every child run, and the Target host, Compare and History
    views."""

    run: str
    ram: int
    shape_sets: tuple[ShapeSetFrames, ...]
    every_run: pd.DataFrame
    targets: tuple[TargetFrames, ...] = ()
    compared: tuple[comparison.Compared, ...] = ()  # each run shown against its default base
    history: HistoryFrames | None = None


EVERY_RUN = {
    "shapes": "shape set",
    "strategy": "strategy",
    "repeat": "repeat",
    "status": "status",
    "peak_ratio": "x checkpoint",
    "wall_s": "wall",
    "error": "error",
}


def chosen_phases(results: Results, run_id: str | None) -> pd.DataFrame:
    """The phase rows the report shows: run `run_id`, or each shape set's default run (the
    newest complete, unconstrained one; `frames.default_phases`)."""
    if run_id is None:
        return frames.default_phases(results.runs, results.phases)
    known = set(results.phases["run_id"])
    if run_id not in known:
        raise BenchError(
            f"--run {run_id}: no such run in the results; runs there: {', '.join(sorted(known))}"
        )
    return results.phases[results.phases["run_id"] == run_id]


def report_frames(
    results: Results, run_id: str | None = None, ram: int | None = None, folder: str = ""
) -> ReportFrames:
    """Every frame of the report of run `run_id` (default: each shape set's newest complete,
    unconstrained run), answered for a host of `ram` bytes (default: the RAM of the machine
    that measured it); `folder` is the results folder (`recommend`'s probes are read there)."""
    phases = chosen_phases(results, run_id)
    shown = results.runs[results.runs["run_id"].isin(set(phases["run_id"]))]
    known = shown.dropna(subset=["ram_bytes"]).sort_values("started_utc", ascending=False)
    ram = ram or (int(known["ram_bytes"].iloc[0]) if len(known) else DEFAULT_RAM)
    labels = frames.run_labels(results.runs, results.phases)
    summary = summarize(phases)
    order = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False).index
    return ReportFrames(
        run="; ".join(labels.get(r, r) for r in phases["run_id"].unique()),
        ram=ram,
        shape_sets=tuple(_shape_set(results, phases, summary, s, ram) for s in order),
        every_run=_every_run(phases),
        targets=tuple(_target(results, phases, s, ram, folder) for s in order),
        compared=_compared(results, list(phases["run_id"].unique())),
        history=_history(results),
    )


def _target(
    results: Results, phases: pd.DataFrame, shapes: str, ram: int, folder: str
) -> TargetFrames:
    """`loadbench recommend --shapes SHAPES --host-ram RAM` for the measured shape set, on the
    device count the judge takes where none is asked (`judge.default_devices`)."""
    mine = phases[phases["shapes"] == shapes]
    devices = default_devices(summarize(mine)) or 1
    row = mine.iloc[0]
    small = row.get("small_tensor_bytes")
    target = TargetCheckpoint(
        int(row["checkpoint_bytes"]),
        int(row["largest_tensor_bytes"]),
        int(row["tensors"]),
        None if small is None or pd.isna(small) else int(small),
    )
    empty = pd.DataFrame()
    try:
        adv = advice.advise(results, target, ram, devices, shapes=shapes, folder=folder)
    except BenchError as e:  # nothing (large enough) measured to predict from: say what to run
        return TargetFrames(shapes, ram, devices, (f"No prediction: {e}",), empty, empty)
    return TargetFrames(
        shapes,
        ram,
        devices,
        tuple(advice.sentences(adv)),  # the verdict sentence: `loadbench recommend`'s own
        pd.DataFrame(advice.table_rows(adv)),
        pd.DataFrame(list(adv.rec.strategies)),
    )


def _compared(results: Results, runs: list[str]) -> tuple[comparison.Compared, ...]:
    """Each run shown against its default base (`comparison.default_base`), where it has one,
    at `loadbench compare`'s example threshold."""
    out = []
    for new in runs:
        base = comparison.default_base(results, new)
        if base is not None:
            out.append(comparison.compared(results, base, new, comparison.DEFAULT_THRESHOLD))
    return tuple(out)


def _history(results: Results) -> HistoryFrames | None:
    """The History view over every run in the folder (None where no run is ok)."""
    points = history.points(results)
    if points.empty:
        return None
    steps, changes = history.steps(results), history.boundaries(results)
    return HistoryFrames(
        points,
        steps,
        changes,
        history.steps_table(steps),
        pd.DataFrame([b.to_dict() for b in changes]),
    )


def _shape_set(
    results: Results, phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, ram: int
) -> ShapeSetFrames:
    mine = phases[phases["shapes"] == shapes]
    configs = answer.configurations(summary[summary["shapes"] == shapes])
    costs = []
    for _, config in configs.iterrows():
        rows = answer.shape_set_rows(summary, shapes, config)
        ckpt = rows["checkpoint_bytes"].iloc[0]
        remote = config.get(ROUTE, LOCAL) != LOCAL  # a remote section always says its route
        which = f" ({answer.config_label(config)})" if len(configs) > 1 or remote else ""
        title = (
            f"Shape set {shapes}{which}: checkpoint {style.size(ckpt)}, "
            f"{int(rows['tensors'].iloc[0])} tensors"
        )
        costs.append(
            CostFrames(
                title,
                answer.headline(rows, ram, results),
                answer.small_checkpoint_note(ckpt),
                rows,
                answer.cost_table(rows, ram),
                scatter.ceiling_line(frames.ceiling_rows(mine, rows)),
            )
        )
    panels, bands = _timeline(results, mine)
    return ShapeSetFrames(shapes, tuple(costs), frames.phase_medians(mine), panels, bands)


def _timeline(results: Results, phases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ok repeat of each strategy and route (`frames.route_labelled`): its traces
    (`frames.group_traces`) and bands."""
    phases = frames.route_labelled(phases)
    totals = frames.whole_run(phases)
    totals = totals[(totals["phase"] == TOTAL) & (totals["status"] == OK)]
    firsts = totals.sort_values("repeat").drop_duplicates("strategy").sort_values("strategy")
    sampled = set(results.samples["result_id"]) if not results.samples.empty else set()
    panels, bands = [], []
    for first in firsts.itertuples():
        rid = str(first.result_id)
        if rid not in sampled:
            continue
        name = str(first.strategy)
        mine = results.samples[results.samples["result_id"] == rid]
        rows = phases[phases["result_id"] == rid]
        baselines = {
            (rid, int(p)): float(b)
            for p, b in zip(rows["process_index"], rows["baseline_rss_bytes"], strict=True)
        }
        panels.append(frames.group_traces(mine, baselines).assign(strategy=name))
        bands.append(
            frames.bands_of(frames.whole_run(rows), name).rename(columns={"label": "strategy"})
        )
    if not panels:
        return pd.DataFrame(), pd.DataFrame()
    return pd.concat(panels, ignore_index=True), pd.concat(bands, ignore_index=True)


def _every_run(phases: pd.DataFrame) -> pd.DataFrame:
    totals = frames.route_labelled(frames.whole_run(phases))
    totals = totals[totals["phase"] == TOTAL].sort_values(["shapes", "strategy", "repeat"])
    table = totals.assign(
        repeat=totals["repeat"].map(style.repeat_number),
        peak_ratio=totals["peak_ratio"].map(style.ratio),
        wall_s=totals["wall_s"].map(style.seconds),
        error=totals["error"].fillna(""),
    )[list(EVERY_RUN)]
    return table.rename(columns=EVERY_RUN)
