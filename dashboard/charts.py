"""Altair charts of the dashboard, one function per chart; each takes a tidy DataFrame.

Bytes are drawn in MiB; the tooltips carry the exact numbers. Colours: one per strategy (the
legend, reference lines first, each strategy's description in its tooltip), one per
verdict/status where those are the point. Phase, status, kind and verdict words come from
`loader.vocabulary` and `bench.recommend`.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.recommend import VERDICTS
from dashboard.data import legend_order
from loader.vocabulary import PHASE_ORDER, REFERENCE, STATUSES

MIB = float(1 << 20)
VERDICT_COLORS = alt.Scale(domain=list(VERDICTS), range=["#2e7d32", "#f9a825", "#c62828"])
STATUS_SHAPES = alt.Scale(
    domain=list(STATUSES),
    range=["circle", "diamond", "triangle-up", "square", "cross", "triangle-down"],
)


def strategy_colors(rows: pd.DataFrame) -> alt.Color:
    """The strategy legend: one colour per strategy of `rows`, in `data.legend_order`."""
    scale = alt.Scale(domain=legend_order(rows))
    return alt.Color("strategy:N", title="strategy", scale=scale, legend=alt.Legend(labelLimit=260))


def _reference_rule(drawn: pd.DataFrame, y: str) -> alt.Chart | None:
    """A dotted rule at the first reference line's height (kind `reference`), if one is drawn."""
    reference = drawn[drawn["kind"] == REFERENCE]
    if reference.empty:
        return None
    rule = alt.Chart(reference.head(1)).mark_rule(color="#888", strokeDash=[2, 2])
    return rule.encode(y=f"{y}:Q", tooltip=["strategy", alt.Tooltip(f"{y}:Q", title="reference")])


def overview_scatter(df: pd.DataFrame, y: str, y_title: str) -> alt.LayerChart:
    """Peak over baseline (`y`) against wall time per strategy, the reference rule, the Pareto front.

    Args:
        df: one row per strategy with `strategy`, `kind`, `description`, `status`, `repeats`,
            `wall_s`, `peak_ratio`, `peak_over_baseline_mib`, `pareto` and column `y`.
        y: the y column (`peak_ratio` or `peak_over_baseline_mib`).
        y_title: the y axis title.
    """
    drawn = df[df["wall_s"].notna() & df[y].notna()]
    x_max = float(drawn["wall_s"].max()) * 1.15 if len(drawn) else 1.0  # room for the labels
    y_max = float(drawn[y].max()) * 1.1 if len(drawn) else 1.0
    base = alt.Chart(drawn).encode(
        x=alt.X("wall_s:Q", title="wall time (s, median)", scale=alt.Scale(domain=[0, x_max])),
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(domain=[0, y_max])),
    )
    points = base.mark_point(size=140, filled=True).encode(
        color=strategy_colors(drawn),
        shape=alt.Shape("status:N", scale=STATUS_SHAPES, title="status"),
        tooltip=["strategy", "description", "kind", "status", "repeats",
                 alt.Tooltip("wall_s:Q", format=".3f"),
                 alt.Tooltip("peak_ratio:Q", format=".2f", title="× checkpoint"),
                 alt.Tooltip("peak_over_baseline_mib:Q", format=",.1f", title="MiB over baseline"),
                 "pareto"],
    )  # fmt: skip
    labels = base.mark_text(align="left", dx=9, dy=-6).encode(text="strategy:N")
    front = drawn[drawn["pareto"]].sort_values("wall_s")
    layers = [points, labels]
    if len(front):
        layers.insert(
            0,
            alt.Chart(front)
            .mark_line(strokeDash=[6, 3], color="#555", point=False)
            .encode(x="wall_s:Q", y=f"{y}:Q", tooltip=[alt.Tooltip("strategy", title="Pareto")]),
        )
    rule = _reference_rule(drawn, y)
    if rule is not None:
        layers.insert(0, rule)
    return alt.layer(*layers).properties(height=340)


def phase_adds_bars(med: pd.DataFrame) -> alt.Chart:
    """What each phase adds to RSS at its peak, per strategy (grouped bars)."""
    data = med.assign(
        adds_mib=med["adds_bytes"] / MIB, peak_mib=med["peak_over_baseline_bytes"] / MIB
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("phase:N", sort=list(PHASE_ORDER), title="phase"),
            xOffset="strategy:N",
            y=alt.Y("adds_mib:Q", title="added at the phase's peak (MiB)"),
            color="strategy:N",
            tooltip=[
                "strategy",
                "phase",
                alt.Tooltip("adds_mib:Q", format=",.1f"),
                alt.Tooltip("peak_mib:Q", format=",.1f", title="peak over baseline (MiB)"),
                alt.Tooltip("phase_peak_ratio:Q", format=".2f", title="× checkpoint"),
            ],
        )  # fmt: skip
        .properties(height=300)
    )


def anon_file_bars(med: pd.DataFrame) -> alt.Chart:
    """RSS held at each phase's end, anonymous vs file-backed, one panel per strategy."""
    long = med.melt(
        id_vars=["strategy", "phase"],
        value_vars=["phase_anon_rss_bytes", "phase_file_rss_bytes"],
        var_name="kind",
        value_name="bytes",
    )
    long["kind"] = long["kind"].map({"phase_anon_rss_bytes": "anonymous", "phase_file_rss_bytes": "file-backed"})  # fmt: skip
    long["mib"] = long["bytes"] / MIB
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("phase:N", sort=list(PHASE_ORDER), title=None),
            y=alt.Y("mib:Q", title="RSS at phase end (MiB)"),
            color=alt.Color("kind:N", scale=alt.Scale(range=["#5c6bc0", "#ffb74d"])),
            tooltip=["strategy", "phase", "kind", alt.Tooltip("mib:Q", format=",.1f")],
        )
        .properties(width=160, height=240)
        .facet(column=alt.Column("strategy:N", title=None))
    )


def phase_time_bars(med: pd.DataFrame) -> alt.Chart:
    """Time per phase, stacked per strategy (the bar's length is the whole load)."""
    return (
        alt.Chart(med)
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", title=None),
            x=alt.X("phase_wall_s:Q", title="seconds (median)", stack="zero"),
            color=alt.Color("phase:N", sort=list(PHASE_ORDER)),
            order=alt.Order("phase_order:Q"),
            tooltip=["strategy", "phase", alt.Tooltip("phase_wall_s:Q", format=".3f")],
        )
        .properties(height=max(150, 50 * med["strategy"].nunique()))
    )


def timeline(samples: pd.DataFrame, bands: pd.DataFrame, stack: bool) -> alt.LayerChart:
    """Sampled RSS over time, one line per result (or anon/file stacked), phase bands behind.

    Args:
        samples: `label`, `t_s`, `rss_anon_bytes`, `rss_file_bytes` rows.
        bands: `phase`, `start_s`, `end_s` of the first chosen result.
        stack: draw one result as stacked anonymous/file-backed areas instead of total lines.
    """
    band = (
        alt.Chart(bands)
        .mark_rect(opacity=0.13)
        .encode(x="start_s:Q", x2="end_s:Q", color=alt.Color("phase:N", sort=list(PHASE_ORDER)))
    )
    text = alt.Chart(bands).mark_text(align="left", dx=3, dy=8, baseline="top", color="#555")
    text = text.encode(x="start_s:Q", y=alt.value(0), text="phase:N")
    if stack:
        long = samples.melt(id_vars=["t_s"], value_vars=["rss_anon_bytes", "rss_file_bytes"], var_name="kind", value_name="bytes")  # fmt: skip
        long["mib"] = long["bytes"] / MIB
        line = alt.Chart(long).mark_area(opacity=0.75).encode(
            x=alt.X("t_s:Q", title="seconds since baseline"),
            y=alt.Y("mib:Q", stack="zero", title="RSS (MiB)"),
            detail="kind:N", tooltip=["kind", "t_s", alt.Tooltip("mib:Q", format=",.1f")],
        )  # fmt: skip
    else:
        data = samples.assign(mib=(samples["rss_anon_bytes"] + samples["rss_file_bytes"]) / MIB)
        line = alt.Chart(data).mark_line(point=True).encode(
            x=alt.X("t_s:Q", title="seconds since baseline"),
            y=alt.Y("mib:Q", title="RSS, anonymous + file-backed (MiB)"),
            color=alt.Color("label:N", title="result"),
            tooltip=["label", "phase", "t_s", alt.Tooltip("mib:Q", format=",.1f")],
        )  # fmt: skip
    return alt.layer(band, text, line).resolve_scale(color="independent").properties(height=360)


def target_bars(rows: pd.DataFrame, host_ram_bytes: int) -> alt.LayerChart:
    """Predicted peak per strategy coloured by verdict, with the host RAM as a rule."""
    data = rows.assign(peak_mib=rows["predicted_peak_bytes"] / MIB)
    bars = alt.Chart(data).mark_bar().encode(
        y=alt.Y("strategy:N", sort="x", title=None),
        x=alt.X("peak_mib:Q", title="predicted peak RSS (MiB)"),
        color=alt.Color("verdict:N", scale=VERDICT_COLORS),
        tooltip=["strategy", "verdict", alt.Tooltip("peak_mib:Q", format=",.0f")],
    )  # fmt: skip
    ram = pd.DataFrame({"ram_mib": [host_ram_bytes / MIB], "what": ["host RAM"]})
    rule = alt.Chart(ram).mark_rule(color="black", strokeWidth=2).encode(x="ram_mib:Q", tooltip=["what"])  # fmt: skip
    return alt.layer(bars, rule).properties(height=max(160, 44 * len(rows)))


def compare_bars(ratios: pd.DataFrame) -> alt.LayerChart:
    """Ratio (run B / run A) of peak and wall time per strategy, with 1.0 marked."""
    long = ratios.melt(id_vars=["strategy"], value_vars=["peak_ratio_b_over_a", "wall_s_b_over_a"], var_name="metric", value_name="ratio")  # fmt: skip
    long["metric"] = long["metric"].map({"peak_ratio_b_over_a": "peak over baseline", "wall_s_b_over_a": "wall time"})  # fmt: skip
    bars = alt.Chart(long).mark_bar().encode(
        y=alt.Y("strategy:N", title=None), yOffset="metric:N",
        x=alt.X("ratio:Q", title="run B / run A"), color="metric:N",
        tooltip=["strategy", "metric", alt.Tooltip("ratio:Q", format=".2f")],
    )  # fmt: skip
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(color="black").encode(x="x:Q")
    return alt.layer(bars, one).properties(height=max(120, 50 * ratios["strategy"].nunique()))
