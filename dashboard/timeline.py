"""The Timeline chart: sampled RSS over time, and under it each overlaid result's own phase bands.

RSS is drawn over each result's baseline by default (as on every other page), absolute as an
option. A pause in sampling longer than GAP_FACTOR times the result's median interval is drawn as a
gap, never as a line between the samples either side, since nothing was measured there. The
anonymous / file-backed split is two lines (anonymous, and anonymous + file-backed) with their
own legend. Phase bands sit at their recorded times, overlapping phases on lanes of their own.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from dashboard import style

GAP_FACTOR = 4.0
HEIGHT = 340
WIDTH = 740  # px, both panels (a vertical concat cannot stretch to its container)


def with_segments(samples: pd.DataFrame) -> pd.DataFrame:
    """`samples` (one result or several, by `result_id`) with a `segment` id that changes at
    gaps."""
    parts = []
    for _, rows in samples.sort_values("t_s").groupby("result_id", sort=False):
        dt = rows["t_s"].diff()
        typical = dt[dt > 0].median()
        gap = dt > GAP_FACTOR * typical if pd.notna(typical) else pd.Series(False, index=rows.index)
        parts.append(rows.assign(segment=rows["result_id"] + ":" + gap.cumsum().astype(str)))
    return pd.concat(parts) if parts else samples.assign(segment=pd.Series(dtype=str))


def prepared(
    samples: pd.DataFrame, baselines: dict[str, float], over_baseline: bool
) -> tuple[pd.DataFrame, str, str, str]:
    """Samples with `total_u`, `anon_u`, `file_u` in one unit; the unit, its format and the axis
    title.

    Over baseline, the total is RSS minus the result's baseline and each of anonymous and
    file-backed is what it holds minus its value at the result's first sample.
    """
    s = with_segments(samples)
    total = s["rss_anon_bytes"] + s["rss_file_bytes"]
    anon, file_ = s["rss_anon_bytes"].astype(float), s["rss_file_bytes"].astype(float)
    if over_baseline:
        first = (
            s.sort_values("t_s")
            .groupby("result_id")[["rss_anon_bytes", "rss_file_bytes"]]
            .transform("first")
        )
        total = total - s["result_id"].map(baselines).astype(float)
        anon, file_ = anon - first["rss_anon_bytes"], file_ - first["rss_file_bytes"]
    unit, div = style.byte_unit(float(total.abs().max()) if len(total) else 0.0)
    s = s.assign(total_u=total / div, anon_u=anon / div, file_u=file_ / div)
    title = (
        f"RSS over baseline ({unit})" if over_baseline else f"RSS, anonymous + file-backed ({unit})"
    )
    return s, unit, style.number_format(unit), title


def _lines(s: pd.DataFrame, fmt: str, title: str, x: alt.X) -> alt.Chart:
    """One line per result in its strategy's colour (dashes tell repeats of one strategy apart)."""
    labels = sorted(set(s["label"]))
    strategies = [label.split(" · ")[0] for label in labels]
    scale = alt.Scale(domain=labels, range=[style.strategy_color(n) for n in strategies])
    legend = alt.Legend(orient="top", columns=1, labelLimit=600)
    enc: dict[str, Any] = {
        "color": alt.Color("label:N", title="result", scale=scale, legend=legend)
    }
    if len(set(strategies)) < len(strategies):
        enc["strokeDash"] = alt.StrokeDash("label:N", title="result", legend=legend)
    return (
        alt.Chart(s)
        .mark_line(point=alt.OverlayMarkDef(size=14))
        .encode(
            x=x,
            y=alt.Y("total_u:Q", title=title, axis=alt.Axis(format=fmt)),
            detail="segment:N",
            **enc,
            tooltip=[
                "label",
                "phase",
                alt.Tooltip("t_s:Q", format=".2f", title="s"),
                alt.Tooltip("total_u:Q", format=fmt, title=title),
            ],
        )
    )


def _split(s: pd.DataFrame, fmt: str, unit: str, over: bool, x: alt.X) -> alt.Chart:
    """Anonymous RSS, and anonymous + file-backed on top of it, as two lines: a sampling gap
    stays a gap (an area would drop to zero at each gap's edges, which reads as RSS falling)."""
    s = s.assign(both_u=s["anon_u"] + s["file_u"])
    long = s.melt(
        id_vars=["t_s", "segment", "phase"],
        value_vars=["anon_u", "both_u"],
        var_name="memory",
        value_name="v",
    )
    names = {"anon_u": "anonymous", "both_u": "anonymous + file-backed"}
    long["memory"] = long["memory"].map(names)
    colors = list(style.MEMORY_KINDS.values())
    kinds = alt.Scale(domain=list(names.values()), range=colors)
    title = f"RSS {'since the first sample' if over else ''} ({unit})".replace("  ", " ")
    return (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=10))
        .encode(
            x=x,
            y=alt.Y("v:Q", title=title, axis=alt.Axis(format=fmt)),
            color=alt.Color(
                "memory:N", title="memory", scale=kinds, legend=alt.Legend(orient="top")
            ),
            detail="segment:N",
            tooltip=[
                "memory",
                "phase",
                alt.Tooltip("t_s:Q", format=".2f", title="s"),
                alt.Tooltip("v:Q", format=fmt, title=unit),
            ],
        )
    )


MIN_LABEL_PX = 7.0  # px per character a band needs before its phase name is written in it


def _phase_color(bands: pd.DataFrame) -> alt.Color:
    """The phases' colours (one palette for the Timeline page and the report's panels)."""
    return alt.Color(
        "phase:N",
        title="phase",
        scale=style.phase_scale(bands["phase"]),
        legend=alt.Legend(orient="bottom"),
    )


def _strip(bands: pd.DataFrame, x: alt.X, t_max: float) -> alt.LayerChart:
    """One row of phase bands per result, under the curve, at their recorded times: phases that
    ran at the same time overlap in time and sit on lanes of their own; a band too narrow for
    its name is named by the legend and its tooltip only."""
    base = alt.Chart(bands)
    rect = base.mark_bar(height={"band": 0.8}).encode(
        x=x,
        x2="end_s:Q",
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=300)),
        yOffset=alt.YOffset("lane:O"),
        color=_phase_color(bands),
        tooltip=[
            "label",
            "phase",
            alt.Tooltip("start_s:Q", format=".2f"),
            alt.Tooltip("end_s:Q", format=".2f"),
        ],
    )
    px = (bands["end_s"] - bands["start_s"]) / (t_max or 1.0) * WIDTH
    wide = bands[px >= MIN_LABEL_PX * bands["phase"].str.len() + 6]
    text = alt.Chart(wide).mark_text(align="left", dx=3, fontSize=11, color="#333")
    text = text.encode(x="start_s:Q", y="label:N", yOffset=alt.YOffset("lane:O"), text="phase:N")
    lanes = int(bands["lane"].max()) + 1 if len(bands) else 1
    height = 22 * lanes * bands["label"].nunique() + 10
    return alt.LayerChart(layer=[rect, text]).properties(height=height)


def _time_axis(field: str, title: str | None, t_max: float) -> alt.X:
    """The shared time axis: seconds with 2 decimals, 3 when the whole span is under 0.2 s."""
    t_format = ".2f" if t_max >= 0.2 else ".3f"
    scale = alt.Scale(domain=[0, t_max], nice=False)
    return alt.X(f"{field}:Q", title=title, scale=scale, axis=alt.Axis(format=t_format))


def timeline(
    samples: pd.DataFrame,
    bands: pd.DataFrame,
    baselines: dict[str, float],
    *,
    split: bool,
    over_baseline: bool,
) -> alt.VConcatChart:
    """The RSS curve(s) over time, and each result's phase bands in a strip below.

    Args:
        samples: `result_id`, `label`, `t_s`, `phase`, `rss_anon_bytes`, `rss_file_bytes`.
        bands: `label`, `phase`, `start_s`, `end_s` for every result drawn.
        baselines: result_id -> baseline RSS bytes.
        split: draw one result as stacked anonymous / file-backed areas.
        over_baseline: subtract the baseline (the default on every page) instead of absolute RSS.
    """
    s, unit, fmt, title = prepared(samples, baselines, over_baseline)
    ends = [float(s["t_s"].max()) if len(s) else 0.0]
    ends += [float(bands["end_s"].max()) if len(bands) else 0.0]
    t_max = max(ends) * 1.02 or 1.0
    top_x, strip_x = (
        _time_axis("t_s", "seconds since baseline", t_max),
        _time_axis("start_s", None, t_max),
    )
    top = _split(s, fmt, unit, over_baseline, top_x) if split else _lines(s, fmt, title, top_x)
    chart = alt.vconcat(
        top.properties(height=HEIGHT, width=WIDTH),
        _strip(bands, strip_x, t_max).properties(width=WIDTH),
        spacing=6,
    )
    return chart.resolve_scale(color="independent").resolve_legend(color="independent")


PANEL_WIDTH, PANEL_HEIGHT, PANEL_COLUMNS = 300, 150, 3


def small_multiples(panels: pd.DataFrame, bands: pd.DataFrame) -> alt.FacetChart:
    """One panel per strategy: its RSS over baseline from 0 (a dip under the baseline is drawn at
    0), its phases as bands behind the curve, a time axis labelled on every panel (each its own
    span: 1 s and 20 s loads both read), one RSS scale for all, so panels compare.

    Args:
        panels: `strategy`, `trace`, `t_s`, `rss` (bytes over baseline; `group_traces`).
        bands: `strategy`, `phase`, `start_s`, `end_s`.
    """
    unit, div = style.byte_unit(float(panels["rss"].max()) if len(panels) else 0.0)
    fmt = style.number_format(unit)
    data = pd.concat(
        [
            panels.assign(layer="rss", rss_u=(panels["rss"] / div).clip(lower=0.0)),
            bands.assign(layer="band"),
        ],
        ignore_index=True,
    )
    base = alt.Chart()
    rect = (
        base.transform_filter(alt.datum.layer == "band")
        .mark_rect(opacity=0.45)
        .encode(
            x=alt.X("start_s:Q", title="seconds since baseline"),
            x2="end_s:Q",
            color=_phase_color(bands),
            tooltip=[
                "strategy",
                "phase",
                alt.Tooltip("start_s:Q", format=".2f"),
                alt.Tooltip("end_s:Q", format=".2f"),
            ],
        )
    )
    traces = sorted(set(panels["trace"]))
    line = (
        base.transform_filter(alt.datum.layer == "rss")
        .mark_line(color="#222", strokeWidth=1.6)
        .encode(
            x=alt.X("t_s:Q", title="seconds since baseline"),
            y=alt.Y(
                "rss_u:Q",
                title=f"RSS over baseline ({unit})",
                scale=alt.Scale(domainMin=0, zero=True),
                axis=alt.Axis(format=fmt),
            ),
            strokeDash=alt.StrokeDash(
                "trace:N",
                title="trace",
                scale=alt.Scale(domain=traces, range=[[1, 0], [5, 3], [2, 2]][: len(traces)]),
                legend=alt.Legend(orient="bottom", labelLimit=400),
            ),
            tooltip=[
                "strategy",
                "trace",
                alt.Tooltip("t_s:Q", format=".2f", title="s"),
                alt.Tooltip("rss_u:Q", format=fmt, title=unit),
            ],
        )
    )
    return (
        alt.layer(rect, line, data=data)
        .properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
        .facet(facet=alt.Facet("strategy:N", title=None), columns=PANEL_COLUMNS)
        .resolve_scale(x="independent")
        .resolve_axis(x="independent", y="independent")
    )
