"""`loadbench history RESULTS...`: each strategy's peak and time across runs, where they moved, and
where their configuration changed.

Reads every results folder given (`bench.analysis.history`): one table per series (machine, shape
set, strategy, layout, route), a row per run in the order they started, labelled with its date and
loadbench's git commit (and the jax, flax and safetensors versions); the time is each repeat over
the reference timed beside it (geometric mean and 95% interval), the peak over the baseline. A
step is marked on the first run after it, with the values of the runs either side (as their
rows show them) and the move in the rule's words; a time step beside other processes whose CPU
ratio did not move is marked `unstable` (not a verdict, not a step). A change of configuration
(budget, threads, limits, the machine) is a boundary, marked and named, never a step; where the
runs of a series differ in configuration, each row says its own. Each series says the smallest
step its runs could have shown (`bench.analysis.history.reach`), and so does "no steps".
`--json` prints `{"points": [...], "steps": [{shapes, strategy, metric, run_id, before, after,
...}], "unstable": [...], "boundaries": [...], "smallest_steps": [...]}` (`steps` is a
contract: `run_id` is the first run after the step). A folder
holding part of a run is refused unless `--allow-partial` (which says what is lost); no ok run at
all is an error (exit 2).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from bench.analysis.history import (
    FLOOR,
    PEAK,
    SERIES_KEYS,
    TIME,
    WALL,
    Boundary,
    Reach,
    Step,
    all_steps,
    metric_text,
    reach,
)
from bench.analysis.history import boundaries as history_boundaries
from bench.analysis.history import points as history_points
from bench.commands.common import add_allow_partial, add_json, example, read_whole
from bench.errors import BenchError
from bench.records.results import MEANINGS, ROUTE, X_CEILING, X_FLOOR, routed
from shapes.sizes import MISSING

NAMES = {PEAK: "peak - base", TIME: f"{X_CEILING} (95% CI)", WALL: "wall s", FLOOR: X_FLOOR}
SHOWN = (TIME, PEAK, WALL, FLOOR)


def _step_text(step: Step) -> str:
    """`x ceiling (95% CI) 2.14x -> 3.00x: 1.40x slower (95% CI 1.31-1.50)`: the rows either
    side of the step, and the move in the words of the one rule for "different?"."""
    words = f": {step.words}" if step.words else ""
    return (
        f"{NAMES[step.metric]} {metric_text(step.metric, step.before)} -> "
        f"{metric_text(step.metric, step.after)}{words}"
    )


def _reach_text(found: list[Reach]) -> str:
    """`x ceiling 1.12x, peak - base 1.05x`: the smallest step of each metric (a range over
    several series: `1.12x-1.40x`); empty where no series had two runs with repeats."""
    said = []
    for metric in (TIME, PEAK):
        factors = sorted(r.factor for r in found if r.metric == metric and r.factor == r.factor)
        if factors:
            lo, hi = factors[0], factors[-1]
            span = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x-{hi:.2f}x"
            said.append(f"{NAMES[metric]} {span}")
    return ", ".join(said)


def _configuration(series: pd.DataFrame) -> tuple[str, list[str]]:
    """The series' configuration line, and each run's own where they differ (else empty)."""
    configs = [str(c) for c in series["config"]]
    if len(set(configs)) <= 1:
        return f"  configuration: {configs[-1] if configs and configs[-1] else 'defaults'}", []
    parts = [set(c.split(", ")) if c else set() for c in configs]
    common = set.intersection(*parts)
    own = [", ".join(p for p in c.split(", ") if p not in common) or "-" for c in configs]
    shared = ", ".join(p for p in configs[-1].split(", ") if p in common) or "defaults"
    return f"  configuration: {shared}; differs by run (its own in the last column)", own


def _time_cell(p: pd.Series) -> str:
    low, high = p.get("time_low"), p.get("time_high")
    value = metric_text(TIME, float(p[TIME]))
    if low is None or high is None or low != low or high != high:
        return value
    return f"{value} ({low:.2f}-{high:.2f})"


def _table(series: pd.DataFrame, marks: dict[str, list[str]], own: list[str]) -> list[str]:
    head = ["run", "jax", "flax", "safetensors", *(NAMES[m] for m in SHOWN), "marks"]
    head += ["configuration"] if own else []
    rows = [head]
    for i, (_, p) in enumerate(series.iterrows()):
        versions = [
            str(p[k]) if isinstance(p[k], str) else MISSING
            for k in ("jax_version", "flax_version", "safetensors_version")
        ]
        metrics = [_time_cell(p), *(metric_text(m, float(p[m])) for m in SHOWN[1:])]
        row = [str(p["label"]), *versions, *metrics, "; ".join(marks.get(p["run_id"], []))]
        rows.append(row + ([own[i]] if own else []))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def _same(item: Step | Boundary | Reach, k: dict[str, Any]) -> bool:
    return (item.machine, item.shapes, item.strategy, item.route) == (
        k["machine"],
        k["shapes"],
        k["strategy"],
        k[ROUTE],
    )


def to_text(
    points: pd.DataFrame, found: list[Step], bounds: list[Boundary], reaches: Sequence[Reach] = ()
) -> str:
    """One block per series (its configuration under its title, each run's where they differ,
    the smallest step it could show), then a line per step, unstable move and boundary."""
    steps = [s for s in found if not s.unstable]
    unstable = [s for s in found if s.unstable]
    blocks = []
    for key, series in points.groupby(SERIES_KEYS, dropna=False, sort=True):
        k = dict(zip(SERIES_KEYS, key, strict=True))
        marks: dict[str, list[str]] = {}
        for s in found:
            if _same(s, k):
                what = "unstable (not a verdict)" if s.unstable else "step"
                marks.setdefault(s.run_id, []).append(f"{what}: {_step_text(s)}")
        for b in bounds:
            if _same(b, k):
                marks.setdefault(b.run_id, []).append(f"configuration changed: {b.change}")
        title = (
            f"{k['machine']} · {k['shapes']} · {routed(k['strategy'], k[ROUTE])} (dtype "
            f"{k['dtype']}, {k['devices']} device(s), {k['cache']} cache, {len(series)} run(s))"
        )
        config, own = _configuration(series)
        mine = _reach_text([r for r in reaches if _same(r, k)])
        could = [f"  smallest step its runs could show: {mine}"] if mine else []
        blocks.append("\n".join([title, config, *could, *_table(series, marks, own)]))
    summary = [
        f"step: {s.machine} {s.shapes} {routed(s.strategy, s.route)}: {_step_text(s)} at run "
        f"{s.run_id}"
        for s in steps
    ] or [_no_steps(reaches)]
    summary += [
        f"unstable: {s.machine} {s.shapes} {routed(s.strategy, s.route)}: {_step_text(s)} at run "
        f"{s.run_id} (rerun on a quieter machine)"
        for s in unstable
    ]
    summary.append("legend: " + "; ".join(f"{name}: {MEANINGS[name]}" for name in MEANINGS))
    summary += [
        f"boundary: {b.machine} {b.shapes} {routed(b.strategy, b.route)}: {b.change} at run "
        f"{b.run_id} (not a step: runs on either side are not compared)"
        for b in bounds
    ]
    return "\n\n".join(blocks) + "\n\n" + "\n".join(summary) + "\n"


def _no_steps(reaches: Sequence[Reach]) -> str:
    """`no steps: ...; the smallest step these runs could have shown: x ceiling 1.12x-1.40x`."""
    said = "no steps: no time or peak moved beyond its intervals and its least step"
    could = _reach_text(list(reaches))
    return f"{said}; the smallest step these runs could have shown: {could}" if could else said


def _json_points(points: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {str(k): (None if isinstance(v, float) and v != v else v) for k, v in record.items()}
        for record in points.to_dict(orient="records")
    ]


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench history`: exit 0 (steps are findings, not failures); 2 with no ok run."""
    results = read_whole(args.results, allow_partial=args.allow_partial, given_as="RESULTS")
    points = history_points(results)
    if points.empty:
        raise BenchError(
            f"no ok run to follow in {', '.join(args.results)}: run `loadbench bench run "
            f"--shapes gpt2 --out {args.results[0]}` (twice or more, to follow a history)"
        )
    found = all_steps(results)
    bounds = history_boundaries(results)
    reaches = reach(results)
    if args.json:
        body = {
            "points": _json_points(points),
            "steps": [s.to_dict() for s in found if not s.unstable],
            "unstable": [s.to_dict() for s in found if s.unstable],
            "boundaries": [b.to_dict() for b in bounds],
            "smallest_steps": [r.to_dict() for r in reaches],
        }
        print(json.dumps(body, indent=1, default=str))
    else:
        print(to_text(points, found, bounds, reaches), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench history`."""
    p = sub.add_parser(
        "history",
        help="each strategy's peak and time across runs, and the runs where they moved",
        description="Follow each strategy's time (over the reference timed beside each repeat), "
        "peak over baseline and wall time across runs (ordered by start time; machines apart), "
        "each run labelled with its date, git commit and jax/flax/safetensors versions; mark "
        "where a time or peak stepped beyond its intervals, and where the configuration changed.",
        **example("loadbench history results", "loadbench history results nightly/ --json"),
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results folder(s) to read")
    add_allow_partial(p)
    add_json(p, "one JSON object (points, steps, boundaries)")
    p.set_defaults(func=run_cli)
    return p
