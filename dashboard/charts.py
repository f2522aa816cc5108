"""Altair charts of the dashboard and the report, one function per chart, each on a tidy frame.

Bytes are drawn in GiB (MiB below a GiB, `style.byte_unit`), seconds with 2 decimals. Strategies
keep their fixed colours (`style.strategy_scale`), phases the phase palette, and a legend lists only
what the chart draws. The Overview scatter lives in `scatter.py`, the timeline in `timeline.py`;
`report_figures` draws a report section's charts from its frames (`sections`) in one step.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from bench.analysis import history
from bench.analysis.recommend import VERDICTS
from bench.records.results import ROUTE
from dashboard import frames, scatter, style, timeline
from dashboard.sections import ShapeSetFrames
from loader.vocabulary import PHASE_ORDER

FACET_COLUMNS = 4  # panels per row before the facets wrap
COMPARE_METRICS = {"peak": "peak over baseline", "wall": "wall time"}
VERDICT_COLORS = alt.Scale(domain=list(VERDICTS), range=["#2e7d32", "#f9a825", "#c62828"])


def _scaled(med: pd.DataFrame, cols: list[str]) -> tuple[pd.DataFrame, str, str]:
    """`med` with `<col>_u` columns in one byte unit for all `cols`; the unit and its d3 format."""
    unit, div = style.byte_unit(max(float(med[c].abs().max()) for c in cols) if len(med) else 0)
    return med.assign(**{f"{c}_u": med[c] / div for c in cols}), unit, style.number_format(unit)


def phase_peak_bars(med: pd.DataFrame) -> alt.Chart:
    """Each phase's own high-water mark over the baseline, per strategy (grouped bars, strategy
    colours). Never a difference between phases: phases that ran at the same time share their
    RSS, and each bar is only what the RSS reached while its phase ran."""
    data, unit, fmt = _scaled(med, ["adds_bytes", "peak_over_baseline_bytes"])
    phases = [p for p in PHASE_ORDER if p in set(data["phase"])]
    tooltip = [
        "strategy",
        "phase",
        alt.Tooltip("peak_over_baseline_bytes_u:Q", format=fmt, title=f"high-water ({unit})"),
        alt.Tooltip("adds_bytes_u:Q", format=fmt, title=f"above the RSS it began at ({unit})"),
        alt.Tooltip("phase_peak_ratio:Q", format=".2f", title="x checkpoint"),
    ]
    y = alt.Y(
        "peak_over_baseline_bytes_u:Q",
        title=f"phase peak over baseline ({unit})",
        axis=alt.Axis(format=fmt),
    )
    color = alt.Color("strategy:N", title="strategy", scale=style.strategy_scale(data["strategy"]))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("phase:N", sort=phases, title="phase"),
            xOffset=alt.XOffset("strategy:N", sort=sorted(set(data["strategy"]))),
            y=y,
            color=color,
            tooltip=tooltip,
        )
        .properties(height=300)
    )


def anon_file_bars(med: pd.DataFrame) -> alt.FacetChart:
    """The highest RSS of each phase, anonymous vs file-backed, one panel per strategy (wrapping),
    each panel with its own phase labels; RSS at each phase's end for rows older than that
    split."""
    peak = all(c in med.columns and med[c].notna().all() for c in frames.PEAK_SPLIT)
    anon, file_ = frames.PEAK_SPLIT if peak else ("phase_anon_rss_bytes", "phase_file_rss_bytes")
    long = med.melt(
        id_vars=["strategy", "phase"],
        value_vars=[anon, file_],
        var_name="memory",
        value_name="bytes",
    )
    long["memory"] = long["memory"].map({anon: "anonymous", file_: "file-backed"})
    long, unit, fmt = _scaled(long, ["bytes"])
    phases = [p for p in PHASE_ORDER if p in set(long["phase"])]
    kinds = alt.Scale(domain=list(style.MEMORY_KINDS), range=list(style.MEMORY_KINDS.values()))
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("phase:N", sort=phases, title=None),
            xOffset=alt.XOffset("memory:N"),
            y=alt.Y(
                "bytes_u:Q",
                title=f"{'highest RSS in' if peak else 'RSS at'} phase ({unit})",
                axis=alt.Axis(format=fmt),
            ),
            color=alt.Color("memory:N", title="memory", scale=kinds),
            tooltip=[
                "strategy",
                "phase",
                "memory",
                alt.Tooltip("bytes_u:Q", format=fmt, title=unit),
            ],
        )
        .properties(width=190, height=200)
        .facet(facet=alt.Facet("strategy:N", title=None), columns=FACET_COLUMNS)
        .resolve_axis(x="independent")  # every panel names its phases, not the bottom row only
    )


def _spans(med: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, each phase's median start and end: recorded times where every phase of the
    strategy has them (overlaps show), else the phases end to end; `lane` separates overlaps."""
    parts = []
    for strategy, rows in med.sort_values("phase_order").groupby("strategy"):
        bands = frames.bands_of(rows.assign(label=strategy), str(strategy))
        parts.append(bands.rename(columns={"label": "strategy"}))
    return pd.concat(parts, ignore_index=True)


def phase_time_bars(med: pd.DataFrame) -> alt.Chart:
    """When each phase ran, per strategy (a bar from its start to its end, median over repeats):
    phases that ran at the same time overlap, on lanes of their own, never stacked."""
    spans = _spans(med)
    return (
        alt.Chart(spans)
        .mark_bar(stroke="white", strokeWidth=0.5)
        .encode(
            y=alt.Y("strategy:N", title=None, axis=alt.Axis(labelLimit=320)),  # with its route
            yOffset=alt.YOffset("lane:O"),
            x=alt.X(
                "start_s:Q", title="seconds since baseline (median)", axis=alt.Axis(format="~g")
            ),
            x2="end_s:Q",
            color=alt.Color("phase:N", title="phase", scale=style.phase_scale(spans["phase"])),
            tooltip=[
                "strategy",
                "phase",
                alt.Tooltip("start_s:Q", format=".2f", title="from s"),
                alt.Tooltip("end_s:Q", format=".2f", title="to s"),
            ],
        )
        .properties(height=max(200, 50 * spans["strategy"].nunique()))  # room for the legend
    )


OFF_CHART = 1.5  # a host RAM this far beyond the largest bar is drawn at the chart's right edge


def target_bars(rows: pd.DataFrame, host_ram_bytes: int) -> alt.LayerChart:
    """Predicted peak per strategy coloured by verdict, in the table's order, with a labelled
    RAM line; a RAM far beyond every bar (OFF_CHART times the largest) is drawn at the right
    edge and says so, so that the bars fill the chart."""
    largest = float(rows["predicted_peak_bytes"].max())
    far = host_ram_bytes > OFF_CHART * largest
    unit, div = style.byte_unit(largest if far else max(largest, host_ram_bytes))
    fmt = style.number_format(unit)
    edge = largest * 1.1 / div
    data = rows.assign(peak_u=rows["predicted_peak_bytes"] / div)
    shown = [v for v in VERDICT_COLORS.domain if v in set(data["verdict"])]
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", sort=list(data["strategy"]), title=None),
            x=alt.X(
                "peak_u:Q",
                title=f"predicted peak RSS ({unit})",
                axis=alt.Axis(format=fmt),
                scale=alt.Scale(domain=[0, edge], nice=False) if far else alt.Undefined,
            ),
            color=alt.Color(
                "verdict:N",
                scale=alt.Scale(
                    domain=shown,
                    range=[VERDICT_COLORS.range[VERDICT_COLORS.domain.index(v)] for v in shown],
                ),
            ),
            tooltip=["strategy", "verdict", alt.Tooltip("peak_u:Q", format=fmt, title=unit)],
        )
    )
    said = f"host RAM {style.size(host_ram_bytes)}"
    ram = pd.DataFrame(
        {
            "ram": [edge if far else host_ram_bytes / div],
            "text": [f"{said}, off the chart: every peak is far below" if far else said],
        }
    )
    rule = alt.Chart(ram).mark_rule(color="black", strokeWidth=2, strokeDash=[4, 3] if far else [])
    rule = rule.encode(x="ram:Q")
    label = alt.Chart(ram).mark_text(
        align="right", dx=-4, dy=-4, baseline="bottom", fontWeight="bold"
    )
    label = label.encode(x="ram:Q", y=alt.value(0), text="text:N")
    height = max(160, 40 * len(rows) + 20)
    return alt.LayerChart(layer=[bars, rule, label]).properties(height=height)


def _ratios_long(ratios: pd.DataFrame) -> pd.DataFrame:
    """One row per (strategy, metric): the ratio and its spread, for the compare bars."""
    parts = [
        ratios.assign(
            metric=label,
            ratio=ratios[f"{m}_ratio"],
            lo=ratios[f"{m}_ratio_lo"],
            hi=ratios[f"{m}_ratio_hi"],
        )
        for m, label in COMPARE_METRICS.items()
    ]
    return pd.concat(parts)[["strategy", "metric", "ratio", "lo", "hi", "verdict"]]


def compare_bars(ratios: pd.DataFrame) -> alt.LayerChart:
    """NEW / BASE of peak over baseline and wall time per strategy, spread as error bars, 1.0
    marked."""
    long = _ratios_long(ratios)
    metric = alt.Scale(domain=list(COMPARE_METRICS.values()), range=["#5c6bc0", "#8d6e63"])
    y = alt.Y("strategy:N", title=None)
    tooltip = [
        "strategy",
        "metric",
        "verdict",
        alt.Tooltip("ratio:Q", format=".2f"),
        alt.Tooltip("lo:Q", format=".2f", title="spread from"),
        alt.Tooltip("hi:Q", format=".2f", title="spread to"),
    ]
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=y,
            yOffset="metric:N",
            x=alt.X("ratio:Q", title="new / base", axis=alt.Axis(format=".2f")),
            color=alt.Color("metric:N", scale=metric),
            tooltip=tooltip,
        )
    )
    spread = alt.Chart(long).mark_rule(color="black")
    spread = spread.encode(y=y, yOffset="metric:N", x="lo:Q", x2="hi:Q")
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(color="black", strokeDash=[4, 2])
    height = max(120, 56 * ratios["strategy"].nunique())
    return alt.LayerChart(layer=[bars, spread, one.encode(x="x:Q")]).properties(height=height)


HISTORY_METRICS = {  # what the History page and the report plot, and their y titles
    history.TIME: "time / reference beside it (x, judged)",
    history.PEAK: "peak over baseline (GiB, judged)",
    history.WALL: "wall time (s, follows the machine)",
    history.FLOOR: "time / floor line (x, compares machines)",
}
BOUNDARY_COLOR = "#6d4c41"


def history_frame(points: pd.DataFrame, steps: list[history.Step], metric: str) -> pd.DataFrame:
    """Tidy rows to draw (`history.points` of the series shown): one per (series, run), the
    metric's value (and a time's 95% interval), the run's label on the axis (date · commit,
    the run id's tail where two share it), its series and its step."""
    marks: dict[tuple[str, ...], str] = {
        (s.machine, s.shapes, s.strategy, s.route, s.run_id): f"step {s.change:+.0%}"
        for s in steps
        if s.metric == metric
    }
    scale = (1 << 30) if metric == history.PEAK else 1
    named = frames.route_labelled(points)["strategy"]  # `pipelined · s3 · 1Gbit · c16`
    keys = zip(
        *(points[k] for k in ("machine", "shapes", "strategy", ROUTE, "run_id")), strict=True
    )
    low = points["time_low"] if metric == history.TIME else points[metric]
    high = points["time_high"] if metric == history.TIME else points[metric]
    return points.assign(
        value=points[metric] / scale,
        low=low / scale,
        high=high / scale,
        series=points["machine"].astype(str) + " · " + named.astype(str),
        step=[marks.get(tuple(map(str, k)), "") for k in keys],
        run=_run_labels(points),
    )


def _run_labels(points: pd.DataFrame) -> pd.Series:
    """Each point's run on the axis: its `label` (date · commit), with the run id's last six
    characters where two runs share a label."""
    runs = points.drop_duplicates("run_id").set_index("run_id")["label"].astype(str)
    twice = runs.duplicated(keep=False)
    named = runs.where(~twice, runs + " · " + runs.index.str[-6:])
    return points["run_id"].map(named)


def history_chart(
    frame: pd.DataFrame, metric: str, boundaries: list[history.Boundary]
) -> alt.LayerChart:
    """A line per series over the runs in start order (each labelled with its date and commit),
    a time's 95% interval as a whisker, a large red ring on each run where a step was found, and
    a brown dashed rule before each run whose configuration changed, labelled with the change."""
    order = list(dict.fromkeys(frame.sort_values("started_utc")["run"]))
    x = alt.X("run:N", sort=order, title="run (date · commit, by start time)")
    x = x.axis(labelAngle=-30, labelLimit=220)
    y = alt.Y("value:Q", title=HISTORY_METRICS[metric], scale=alt.Scale(zero=False))
    tooltip = [
        "series:N",
        "run_id:N",
        "started_utc:N",
        "git_commit:N",
        "jax_version:N",
        "flax_version:N",
        "safetensors_version:N",
        "config:N",
        alt.Tooltip("value:Q", format=".3f"),
        "step:N",
    ]
    legend = alt.Legend(labelLimit=400)  # `machine · pipelined · s3 · 1Gbit · c16` in full
    color = alt.Color("series:N", title="series", legend=legend)
    base = alt.Chart(frame).encode(x=x, color=color)
    layers = [
        base.mark_line(point=True).encode(y=y, tooltip=tooltip),
        base.mark_rule(opacity=0.6).encode(y="low:Q", y2="high:Q"),
        alt.Chart(frame[frame["step"] != ""])
        .mark_point(size=400, strokeWidth=2, color="#c62828")
        .encode(x=x, y=y, tooltip=tooltip),
    ]
    shown = set(frame["run_id"])
    changes = [b for b in boundaries if b.run_id in shown]
    if changes:
        runs = frame.drop_duplicates("run_id").set_index("run_id")["run"]
        marks = pd.DataFrame(
            {"run": [runs[b.run_id] for b in changes], "change": [b.change for b in changes]}
        ).drop_duplicates()
        rule = alt.Chart(marks).mark_rule(color=BOUNDARY_COLOR, strokeDash=[6, 3], strokeWidth=2)
        text = alt.Chart(marks).mark_text(
            align="left", baseline="top", dx=4, dy=4, angle=0, color=BOUNDARY_COLOR, fontSize=10
        )
        layers += [
            rule.encode(x=alt.X("run:N", sort=order), tooltip="change:N"),
            text.encode(x=alt.X("run:N", sort=order), y=alt.value(0), text="change:N"),
        ]
    return alt.LayerChart(layer=layers).properties(height=320)


@dataclass(frozen=True)
class ReportFigures:
    """The charts of one shape set in the report: one cost chart per configuration (None where
    nothing ran), the three phase charts, the timeline's small multiples (None where none)."""

    costs: tuple[alt.TopLevelMixin | None, ...]
    phases: tuple[alt.TopLevelMixin, ...]
    timeline: alt.TopLevelMixin | None


def report_figures(shape_set: ShapeSetFrames, ram: int) -> ReportFigures:
    """Every chart of a shape set's report section, drawn from its frames (`sections`): the
    Overview's chart (absolute peak, log scales, the host RAM and the headline's margin), the
    Phases page's charts, and one timeline panel per strategy."""
    costs: list[alt.TopLevelMixin | None] = []
    for cost in shape_set.costs:
        rows = cost.rows
        peak = pd.to_numeric(rows["peak_rss_bytes"])
        unit, divisor = style.byte_unit(peak.max())
        rows = rows.assign(peak_unit=peak / divisor)
        if not rows[["wall_s", "peak_unit"]].notna().all(axis=1).any():
            costs.append(None)
            continue
        host = scatter.host_line(rows, ram, False, divisor)
        chart = scatter.overview_scatter(
            rows,
            "peak_unit",
            f"peak RSS ({unit})",
            style.number_format(unit),
            host,
            cost.ceiling,
            log=True,
        )
        costs.append(chart.properties(width=800))
    med = shape_set.medians
    phases = (
        ()
        if med.empty
        else (
            phase_peak_bars(med).properties(width=800),
            anon_file_bars(med),
            phase_time_bars(med).properties(width=800),
        )
    )
    drawn = None
    if not shape_set.panels.empty:
        drawn = timeline.small_multiples(shape_set.panels, shape_set.bands)
    return ReportFigures(tuple(costs), phases, drawn)
