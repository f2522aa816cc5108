"""History: each strategy's peak over baseline and time across runs, and where they stepped.

Answers: did a commit or a jax/flax/safetensors upgrade move a peak or a time, and at which run.
The points and the steps are `bench.analysis.history`'s (what `loadbench history` prints): one
series per machine, shape set, strategy and route (local, or `s3 · 1Gbit · c16`), a run per
point in the order the runs started, each labelled with its git commit and versions; a step is
marked on the first run after it, with its size. No jax.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from bench.analysis import history
from bench.records.results import ROUTE
from dashboard import frames, link, widgets

METRIC_NAMES = {
    history.TIME: "time / reference beside it (×, judged)",
    history.PEAK: "peak over baseline (GiB, judged)",
    history.WALL: "wall time (s, follows the machine)",
    history.FLOOR: "time / floor line (×, compares machines)",
}
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


def chart_frame(rows: pd.DataFrame, steps: list[history.Step], metric: str) -> pd.DataFrame:
    """Tidy rows to draw: one per (series, run), the metric's value, its labels and its step."""
    marks = {
        (s.machine, s.shapes, s.strategy, s.route, s.run_id): f"step {s.change:+.0%}"
        for s in steps
        if s.metric == metric
    }
    value = rows[metric] / (1 << 30) if metric == history.PEAK else rows[metric]
    named = frames.route_labelled(rows)["strategy"]  # `pipelined · s3 · 1Gbit · c16`
    series = rows["machine"].astype(str) + " · " + named.astype(str)
    keys = zip(
        rows["machine"], rows["shapes"], rows["strategy"], rows[ROUTE], rows["run_id"], strict=True
    )
    step = [marks.get((str(m), str(sh), str(s), str(ro), str(r)), "") for m, sh, s, ro, r in keys]
    return rows.assign(value=value, series=series, step=step)


def history_chart(frame: pd.DataFrame, metric: str) -> alt.LayerChart | alt.FacetChart:
    """A line per series over the runs in start order, points labelled by commit and versions, and
    a large ring on each run where a step was found."""
    order = list(dict.fromkeys(frame.sort_values("started_utc")["run_id"]))
    x = alt.X("run_id:N", sort=order, title="run (by start time)", axis=alt.Axis(labelAngle=-30))
    y = alt.Y("value:Q", title=METRIC_NAMES[metric], scale=alt.Scale(zero=True))
    tooltip = [
        "series:N",
        "run_id:N",
        "started_utc:N",
        "git_commit:N",
        "jax_version:N",
        "flax_version:N",
        "safetensors_version:N",
        alt.Tooltip("value:Q", format=".3f"),
        "step:N",
    ]
    legend = alt.Legend(labelLimit=400)  # `machine · pipelined · s3 · 1Gbit · c16` in full
    color = alt.Color("series:N", title="series", legend=legend)
    base = alt.Chart(frame).encode(x=x, y=y, color=color)
    lines = base.mark_line(point=True).encode(tooltip=tooltip)
    rings = (
        alt.Chart(frame[frame["step"] != ""])
        .mark_point(size=400, strokeWidth=2, color="#c62828")
        .encode(x=x, y=y, tooltip=tooltip)
    )
    return alt.layer(lines, rings)


def _steps_table(steps: list[history.Step], rows: pd.DataFrame) -> None:
    shown = set(zip(rows["machine"], rows["shapes"], rows["strategy"], rows[ROUTE], strict=True))
    said = [s for s in steps if (s.machine, s.shapes, s.strategy, s.route) in shown]
    if not said:
        st.caption("No steps: no metric moved beyond its repeats' spread and its least step.")
        return
    st.dataframe(history.steps_table(said), hide_index=True)


def main() -> None:
    st.title("History")
    st.caption(
        "Each strategy across runs, in the order they started; one line per machine, strategy "
        "and route (local disk, or source · link · concurrency). "
        "A red ring marks the first run after a step (Mann-Whitney between the runs either side)."
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
    steps = history.steps(results)
    st.altair_chart(history_chart(chart_frame(rows, steps, metric), metric), width="stretch")
    _steps_table([s for s in steps if s.metric == metric], rows)
    with st.expander("The runs"):
        st.dataframe(rows, hide_index=True)


main()
