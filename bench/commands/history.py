"""`loadbench history RESULTS...`: each strategy's peak and time across runs, and where they moved.

Reads every results folder given (`bench.analysis.history`): one table per series (machine, shape
set, strategy, configuration), a row per run in the order they started, labelled with loadbench's
git commit and the jax, flax and safetensors versions; a step is marked on the first run after it,
with its size. `--json` prints `{"points": [...], "steps": [{shapes, strategy, metric, run_id,
before, after, ...}]}` (`steps` is a contract: `run_id` is the first run after the step).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import pandas as pd

from bench.analysis.history import (
    FLOOR,
    LABELS,
    METRICS,
    PEAK,
    SERIES_KEYS,
    WALL,
    Step,
    metric_text,
)
from bench.analysis.history import points as history_points
from bench.analysis.history import steps as history_steps
from bench.commands.common import add_json, example, existing_results
from bench.records.results import ROUTE, Results, read_results, routed

NAMES = {PEAK: "peak - base", WALL: "wall s", FLOOR: "x floor"}


def _read(folders: list[str]) -> Results:
    """Every folder's results, read as one (a missing folder is named)."""
    parts = [read_results(existing_results(f)) for f in folders]
    return Results(
        runs=pd.concat([p.runs for p in parts], ignore_index=True),
        phases=pd.concat([p.phases for p in parts], ignore_index=True),
        samples=parts[0].samples.iloc[0:0],
        errors=[e for p in parts for e in p.errors],
    )


def _step_text(step: Step) -> str:
    change = "" if math.isinf(step.change) else f" ({step.change:+.0%})"
    return (
        f"{NAMES[step.metric]} {metric_text(step.metric, step.before)} -> "
        f"{metric_text(step.metric, step.after)}{change}"
    )


def _table(series: pd.DataFrame, marks: dict[str, list[Step]]) -> list[str]:
    head = ["run", "commit", "jax", "flax", "safetensors", *(NAMES[m] for m in METRICS), "step"]
    rows = [head]
    for _, p in series.iterrows():
        said = "; ".join(_step_text(s) for s in marks.get(str(p["run_id"]), []))
        labels = [str(p[k]) if isinstance(p[k], str) else "-" for k in LABELS]
        rows.append(
            [str(p["run_id"]), *labels, *(metric_text(m, float(p[m])) for m in METRICS), said]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def to_text(points: pd.DataFrame, steps: list[Step]) -> str:
    """One block per series, then a line per step."""
    if points.empty:
        return "no ok runs to follow\n"
    blocks = []
    for key, series in points.groupby(SERIES_KEYS, dropna=False, sort=True):
        k = dict(zip(SERIES_KEYS, key, strict=True))
        marks: dict[str, list[Step]] = {}
        for s in steps:
            same = (s.machine, s.shapes, s.strategy, s.route) == (
                k["machine"],
                k["shapes"],
                k["strategy"],
                k[ROUTE],
            )
            if same and s.run_id in set(series["run_id"]):
                marks.setdefault(s.run_id, []).append(s)
        title = (
            f"{k['machine']} · {k['shapes']} · {routed(k['strategy'], k[ROUTE])} (dtype "
            f"{k['dtype']}, "
            f"{k['devices']} device(s), {k['cache']} cache, {len(series)} run(s))"
        )
        blocks.append("\n".join([title, *_table(series, marks)]))
    summary = [
        f"step: {s.machine} {s.shapes} {routed(s.strategy, s.route)}: {_step_text(s)} at run "
        f"{s.run_id}"
        for s in steps
    ] or ["no steps: no metric moved beyond its repeats' spread and its least step"]
    return "\n\n".join(blocks) + "\n\n" + "\n".join(summary) + "\n"


def _json_points(points: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {str(k): (None if isinstance(v, float) and v != v else v) for k, v in record.items()}
        for record in points.to_dict(orient="records")
    ]


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench history`: exit 0 (steps are findings, not failures)."""
    results = _read(args.results)
    points = history_points(results)
    steps = history_steps(results)
    if args.json:
        body = {"points": _json_points(points), "steps": [s.to_dict() for s in steps]}
        print(json.dumps(body, indent=1, default=str))
    else:
        print(to_text(points, steps), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench history`."""
    p = sub.add_parser(
        "history",
        help="each strategy's peak and time across runs, and the runs where they moved",
        description="Follow each strategy's peak over baseline, wall time and wall over the floor "
        "line across runs (ordered by start time; machines apart), each run labelled with its git "
        "commit and jax/flax/safetensors versions, and mark where a metric stepped.",
        **example("loadbench history results", "loadbench history results nightly/ --json"),
    )
    p.add_argument("results", nargs="+", help="results folder(s) to read, e.g. results")
    add_json(p, "one JSON object (points, steps)")
    p.set_defaults(func=run_cli)
    return p
