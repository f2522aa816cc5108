"""History: each strategy's peak over baseline and time across runs, and where they stepped.

Answers: did a commit or a jax/flax/safetensors upgrade move a peak or a time, and at which run.
The points and the steps are `bench.analysis.history`'s (what `loadbench history` prints): one
series per machine, shape set, strategy and route (local, or `s3 · 1Gbit · c16`), a run per
point in the order the runs started, each labelled with its git commit and versions; a step is
marked on the first run after it, with its size. No jax.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.analysis import history
from bench.records.results import ROUTE
from dashboard import charts, frames, link, style, widgets

METRIC_NAMES = charts.HISTORY_METRICS
METRIC = link.choice(  # in the URL as `metric=time|peak|wall|floor`
    "metric", dict(zip(METRIC_NAMES, ("time", "peak", "wall", "floor"), strict=True))
)


def _series(points: pd.DataFrame) -> pd.DataFrame:
    """Narrow the points to one shape set, the strategies picked and (where the shape set was
    loaded over several) the routes picked."""
    cols = st.columns([1, 2, 2])
    shapes = widgets.pick_shapes(points, key="history_shapes", column=cols[0])
    rows = points[points["shapes"] == shapes]
    names = sorted(rows["strategy"].unique())
    picked = widgets.pick_strategies(names, key="history_strategies", column=cols[1])
    rows = rows[rows["strategy"].isin(picked)]
    routes = frames.route_order(rows)
    if len(routes) > 1:
        every = routes
        routes = link.bound(
            "history_routes",
            link.ROUTES,
            every,
            lambda: cols[2].multiselect(
                "Loaded from",
                every,
                format_func=lambda r: widgets.ROUTE_WORDS.get(r, r),
                key="history_routes",
                help="each route (local disk, or source · link · concurrency) is a series of its "
                "own",
            ),
            valid=lambda chosen: set(chosen) <= set(every),
            omit=every,
        )
    return rows[rows[ROUTE].isin(routes)]


def runs_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The points shown, one per (series, run), each figure with its unit (- where none)."""
    named = frames.route_labelled(rows)
    return pd.DataFrame(
        {
            "run": rows["label"],
            "run id": rows["run_id"],
            "machine": rows["machine"],
            "strategy": named["strategy"],
            "repeats": rows["repeats"],
            "peak over baseline": rows[history.PEAK].map(style.size),
            "time / reference": [
                f"{style.ratio(t)} ({style.ratio(lo)}-{style.ratio(hi)})"
                if pd.notna(lo)
                else style.ratio(t)
                for t, lo, hi in zip(rows[history.TIME], rows["time_low"], rows["time_high"])
            ],
            "wall": rows[history.WALL].map(style.seconds),
            "time / floor": rows[history.FLOOR].map(style.ratio),
            "configuration": rows["config"].fillna("").replace("", style.UNKNOWN),
        }
    )


def _boundaries(changes: list[history.Boundary], rows: pd.DataFrame) -> None:
    """Where a series' configuration changed: a boundary, never a step."""
    shown = set(zip(rows["machine"], rows["shapes"], rows["strategy"], rows[ROUTE], strict=True))
    said = [b for b in changes if (b.machine, b.shapes, b.strategy, b.route) in shown]
    if said:
        st.markdown("**Configuration changes** (boundaries, never steps):")
        st.dataframe(pd.DataFrame([b.to_dict() for b in said]), hide_index=True)


def _steps_table(steps: list[history.Step], rows: pd.DataFrame) -> None:
    shown = set(zip(rows["machine"], rows["shapes"], rows["strategy"], rows[ROUTE], strict=True))
    said = [s for s in steps if (s.machine, s.shapes, s.strategy, s.route) in shown]
    if not said:
        st.caption("No steps: no metric moved beyond its intervals and its least step.")
        return
    st.dataframe(history.steps_table(said), hide_index=True)


def main() -> None:
    st.title("History")
    st.caption(
        "Each strategy across runs, in the order they started; one line per machine, strategy "
        "and route (local disk, or source · link · concurrency). "
        "A red ring marks the first run after a step (judged on the time against the reference "
        "beside it and on the peak, beyond their intervals); a brown dashed rule, a change of "
        "configuration (a boundary, never a step)."
    )
    results = widgets.page_results()
    points = history.points(results)
    if points.empty:
        st.info("No ok runs to follow yet.")
        return
    rows = _series(points)
    metric = link.bound(
        "history_metric",
        METRIC,
        history.TIME,
        lambda: st.radio(
            "Metric",
            list(METRIC_NAMES),
            format_func=METRIC_NAMES.__getitem__,
            horizontal=True,
            key="history_metric",
        ),
        omit=history.TIME,
    )
    steps, changes = history.steps(results), history.boundaries(results)
    frame = charts.history_frame(rows, steps, metric)
    st.altair_chart(charts.history_chart(frame, metric, changes), width="stretch")
    _steps_table([s for s in steps if s.metric == metric], rows)
    _boundaries(changes, rows)
    with st.expander("The runs"):
        st.dataframe(runs_table(rows), hide_index=True)


main()
