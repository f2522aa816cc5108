"""Overview: which strategy to use, and what each costs, per shape set.

Answers first, per shape set: on the host RAM given (default: the RAM of the machine that measured
the run; kept across pages), the judge's decision (`bench.analysis.judge`, in the one sentence the
bench summary and `loadbench recommend` print: the pick, the measure ranked, ties, unstable
times, limits), the least RAM that fits, whether the naive path fits, and the backend the runs
were on (what it means for the host RAM). Under it, for the shape set chosen, one answer drawn the
same way: each strategy's peak RSS against wall time (log scale) with the host's RAM and the
headline's margin as lines (`dashboard.scatter`), then the table that leads with the answer (the
recommended row first and marked, its absolute peak and its reason; skipped and failed rows last
with theirs),
and every run with its status. By default each shape set shows its newest complete, unconstrained
run; every run stays selectable. A shape set loaded over several routes (the local disk, s3 at
1Gbit with concurrency 1 and 64: `bench.records.results.route`) is answered one route at a time,
picked in "Loaded from", never pooled; a remote route's table holds its wall over the link's
ceiling and the bytes received. The whole view (run, host RAM, page cache, shape set, route,
configuration, strategies, "Peak as", log scales) is in the URL (`dashboard.link`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pandas as pd
import streamlit as st

from bench.records.results import LOCAL, ROUTE
from dashboard import answer, data, frames, link, scatter, style, widgets


def _machine_ram(results: Any, phases: pd.DataFrame) -> float | None:
    """The RAM of the machine that measured the newest run shown."""
    shown = results.runs[results.runs["run_id"].isin(set(phases["run_id"]))]
    known = shown.dropna(subset=["ram_bytes"]).sort_values("started_utc", ascending=False)
    return float(known["ram_bytes"].iloc[0]) if len(known) else None


def _rows(
    summary: pd.DataFrame,
    shapes: str,
    route: str | None,
    descriptions: dict[str, str],
    column: Any = st,
) -> pd.DataFrame:
    """The strategy rows of one shape set loaded over `route`, with a configuration picker in
    `column` when there are several (each device count its own: the judge decides per count)."""
    rows = summary[summary["shapes"] == shapes]
    rows = rows[rows[ROUTE] == route] if route is not None else rows
    configs = answer.configurations(rows)
    config = configs.iloc[0] if len(configs) else None  # the route's, where one was picked
    if len(configs) > 1:
        labels = [answer.config_label(c) for _, c in configs.iterrows()]
        key = _config_key(shapes)
        picked = link.bound(
            key,
            link.CONFIG,
            labels[0],
            lambda: column.selectbox("Configuration", labels, key=key),
            valid=labels.__contains__,
            omit=labels[0],
        )
        config = configs.iloc[labels.index(picked)]
    rows = answer.shape_set_rows(summary, shapes, config)
    return rows.assign(description=rows["base_strategy"].map(descriptions).fillna(""))


def _config_key(shapes: str) -> str:
    """The configuration picker's key for a shape set (its headline reads the same pick)."""
    return f"overview_config_{shapes}"


def _linked_config(shapes: str, labels: list[str]) -> str | None:
    """The configuration the picker will show, read before it is drawn (the headline stands
    above it): seeded from the URL the first time, as the picker itself would be, so that a link
    to the 2-device configuration heads its table with the 2-device answer."""
    if len(labels) < 2:
        return None
    key = _config_key(shapes)
    link.seed(key, link.CONFIG, labels[0], valid=labels.__contains__)
    return st.session_state[key]


def _headlines(
    results: Any, summary: pd.DataFrame, ram: int, first: str, route: str | None
) -> None:
    """One answer per shape set (the one shown first, over the route and in the configuration
    picked, then the largest checkpoint first), each naming the backend its runs were on, and its
    route where the shape set was loaded over several."""
    order = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False)
    for shapes in sorted(order.index, key=lambda s: s != first):
        mine = summary[summary["shapes"] == shapes]
        if shapes == first and route is not None:
            mine = mine[mine[ROUTE] == route]
        configs = answer.configurations(mine)
        labels = [answer.config_label(c) for _, c in configs.iterrows()]
        picked = _linked_config(shapes, labels) if shapes == first else None
        config = configs.iloc[labels.index(picked) if picked in labels else 0]
        head = answer.headline(answer.shape_set_rows(summary, shapes, config), ram, results)
        small = answer.small_checkpoint_note(order[shapes])
        note = " (checkpoint under 64 MiB: overhead, not a guide)" if small else ""
        several = summary.loc[summary["shapes"] == shapes, ROUTE].nunique() > 1
        where = answer.route_words(config[ROUTE]) if several or config[ROUTE] != LOCAL else ""
        box = st.success if head.fits else st.error
        box(
            f"**`{shapes}`** ({style.size(order[shapes])}{where}): {head.sentence}{note}",
            icon=":material/recommend:" if head.fits else ":material/block:",
        )


def _shade(row: pd.Series) -> list[str]:
    marked = str(row.name).startswith(answer.RECOMMENDED_MARK)
    return ["background-color: rgba(46, 125, 50, 0.14)" if marked else ""] * len(row)


def _table(shown: pd.DataFrame, ram: int) -> None:
    """The cost table as a static table: every column and reason on screen, wrapped, never
    scrolled sideways; the recommended row shaded."""
    table = answer.cost_table(shown, ram).set_index("strategy")
    figures: list[Hashable] = [c for c in table.columns if c != answer.COLUMNS["reason"]]
    styler = table.style.apply(_shade, axis=1).set_properties(
        subset=figures, **{"white-space": "nowrap"}
    )
    st.table(styler)
    st.caption(answer.LEGEND)


PEAK_AXES = ("peak RSS", "x checkpoint")  # the chart's y: absolute (the headline's), or a ratio
PEAK = link.choice("peak", dict(zip(PEAK_AXES, ("rss", "checkpoint"), strict=True)))  # in the URL


def _chart(shown: pd.DataFrame, view: dict, ceiling: scatter.CeilingLine | None) -> bool:
    """The cost chart with the host line, the headline's margin and the machine's ceiling; False
    where there was nothing to plot."""
    as_ratio = view["peak_as"] == PEAK_AXES[1]
    peak = pd.to_numeric(shown["peak_rss_bytes"])
    unit, divisor = style.byte_unit(peak.max())
    shown = shown.assign(peak_unit=peak / divisor)
    y, title, fmt = (
        ("peak_ratio", "peak over baseline (x checkpoint)", ".2f")
        if as_ratio
        else ("peak_unit", f"peak RSS ({unit})", style.number_format(unit))
    )
    if not shown[["wall_s", y]].notna().all(axis=1).any():
        st.info("No successful run among the chosen strategies to plot.")
        return False
    host = scatter.host_line(shown, view["ram"], as_ratio, divisor)
    chart = scatter.overview_scatter(shown, y, title, fmt, host, ceiling, log=view["log"])
    st.altair_chart(chart, width="stretch")
    return True


def _shape_set(phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, view: dict) -> None:
    descriptions, problem = data.strategy_descriptions()
    if problem:
        st.warning(f"Strategy descriptions unavailable: {problem}")
    rows = _rows(summary, shapes, view["route"], descriptions, view["config_column"])
    shown = rows[rows["base_strategy"].isin(view["chosen"])]
    ckpt = rows["checkpoint_bytes"].iloc[0]
    note = answer.small_checkpoint_note(ckpt)
    if note:
        st.badge(note, icon=":material/warning:", color="orange")
    ceiling = scatter.ceiling_line(frames.ceiling_rows(phases, shown))
    plotted = _chart(shown, view, ceiling)
    _table(shown, view["ram"])
    if plotted:  # under the table, so that the first screen holds the recommended row
        lines = scatter.caption(host=True, ceiling=ceiling is not None, log=view["log"])
        st.caption(f"The chart above: {lines}")
    route = rows[ROUTE].iloc[0]
    st.caption(
        f"`{shapes}`{answer.route_words(route) if route != LOCAL else ''}: checkpoint "
        f"{style.size(ckpt)} · {int(rows['tensors'].iloc[0])} tensors · "
        f"largest tensor {style.size(rows['largest_tensor_bytes'].iloc[0])} · "
        f"{answer.backend(rows).rstrip('.')} · run "
        + ", ".join(view["labels"].get(r, r) for r in phases["run_id"].unique())
    )
    with st.expander("What each strategy does"):
        st.markdown(
            "\n".join(f"- **{s}**: {d}" for s, d in zip(rows["strategy"], rows["description"]) if d)
        )
    st.markdown("**Every run** (failed ones included):")
    widgets.status_table(phases[phases[ROUTE] == route] if view["route"] else phases)


def main() -> None:
    st.title("Overview")
    results = widgets.page_results()
    top = st.columns([4, 1, 1])
    with top[0]:
        run_id = widgets.pick_run(results, key="overview_run", newest=True)
    phases = widgets.run_phases(results, run_id)
    help_text = "default: the RAM of the machine that measured the run; kept across pages"
    ram = widgets.host_ram(
        top[2], _machine_ram(results, phases), key="overview_ram_gib", help=help_text
    )
    phases = widgets.pick_cache(phases, key="overview_cache")
    summary = data.summarize(phases)
    by_size = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False)
    shapes = widgets.pick_shapes(
        phases, key="overview_shapes", options=list(by_size.index), column=top[1]
    )
    route = widgets.pick_route(summary[summary["shapes"] == shapes], key="overview_route")
    _headlines(results, summary, ram, shapes, route)
    strategies = sorted(summary["strategy"].unique())
    chosen = widgets.pick_strategies(strategies, key="overview_strategies", column=st.sidebar)
    axes = st.columns([1, 1, 2])
    peak_as = link.bound(
        "overview_unit",
        PEAK,
        PEAK_AXES[0],
        lambda: axes[0].radio("Peak as", PEAK_AXES, horizontal=True, key="overview_unit"),
        omit=PEAK_AXES[0],
    )
    log = link.bound(
        "overview_log",
        link.LOG,
        True,
        lambda: axes[1].toggle(
            "Log scales",
            key="overview_log",
            help="both axes logarithmic: strategies 1 and 2 s apart stay apart beside one of 20 s",
        ),
        omit=True,
    )
    labels = frames.run_labels(results.runs, results.phases)
    view = {
        "chosen": chosen,
        "peak_as": peak_as,
        "log": log,
        "ram": ram,
        "labels": labels,
        "route": route,
        "config_column": axes[2],  # beside the chart's toggles: the chart stays on the first screen
    }
    _shape_set(phases[phases["shapes"] == shapes], summary, shapes, view)


main()
