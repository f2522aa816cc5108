"""Overview: which strategy to use, and what each costs, per shape set.

Answers first, per shape set: on the host RAM given (default: the RAM of the machine that measured
the run; kept across pages), the fastest strategy whose measured peak fits, its peak and time, the
least RAM that fits, and whether the naive path fits; then each strategy's peak over baseline
against wall time with the host's RAM as a line, the Pareto front, the `reference` line (e.g.
`floor`, the bytes alone), the machine's ceiling on the time axis (where the rows have one), a
table with fits, "× floor" and "× ceiling" columns, and every run with its status. By default
each shape set shows its newest complete, unconstrained run; every run stays selectable.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import answer, data, frames, scatter, style, widgets

TABLE_COLUMNS = [
    "strategy",
    "kind",
    "status",
    "fits",
    "repeats",
    "peak_ratio",
    "peak_over",
    "wall_s",
    "throughput",
    "floor",
    "ceiling",
    "pareto",
    "description",
]


def _machine_ram(results: Any, phases: pd.DataFrame) -> float | None:
    """The RAM of the machine that measured the newest run shown."""
    shown = results.runs[results.runs["run_id"].isin(set(phases["run_id"]))]
    known = shown.dropna(subset=["ram_bytes"]).sort_values("started_utc", ascending=False)
    return float(known["ram_bytes"].iloc[0]) if len(known) else None


def _rows(summary: pd.DataFrame, shapes: str, descriptions: dict[str, str]) -> pd.DataFrame:
    """The strategy rows of one shape set, with a configuration picker when there are several."""
    rows = summary[summary["shapes"] == shapes]
    configs = answer.configurations(rows)
    config = None
    if len(configs) > 1:
        pick = st.selectbox(
            "Configuration",
            configs.index,
            format_func=lambda i: answer.config_label(configs.iloc[int(i)]),
            key=f"overview_config_{shapes}",
        )
        config = configs.iloc[int(pick)]
    rows = answer.shape_set_rows(summary, shapes, config)
    return rows.assign(description=rows["base_strategy"].map(descriptions).fillna(""))


def _headlines(summary: pd.DataFrame, ram: int) -> None:
    """One answer per shape set, the largest checkpoint first."""
    order = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False)
    for shapes in order.index:
        config = answer.configurations(summary[summary["shapes"] == shapes]).iloc[0]
        head = answer.headline(answer.shape_set_rows(summary, shapes, config), ram)
        small = answer.small_checkpoint_note(order[shapes])
        note = " (checkpoint under 64 MiB: overhead, not a guide)" if small else ""
        box = st.success if head.fits else st.error
        box(
            f"**`{shapes}`** ({style.size(order[shapes])}): {head.text}{note}",
            icon=":material/recommend:" if head.fits else ":material/block:",
        )


def _table(shown: pd.DataFrame, unit: str, divisor: float, ram: int) -> None:
    table = shown.sort_values(["kind", "peak_ratio"]).assign(
        peak_over=shown["peak_over_baseline_bytes"] / divisor,
        throughput=shown["throughput_bytes_per_s"] / 1e9,
        floor=shown["floor_ratio"] if "floor_ratio" in shown else float("nan"),
        ceiling=shown["ceiling_ratio"] if "ceiling_ratio" in shown else float("nan"),
        pareto=shown["pareto"].map({True: "on the front", False: ""}),
        fits=answer.fits_column(shown, ram),
    )
    columns = TABLE_COLUMNS
    if "ready_s" in table and table["ready_s"].notna().any():  # measured with --compile
        columns = [*columns[:8], "ready_s", *columns[8:]]
    styler, config = widgets.number_table(
        table[columns],
        {
            "peak_ratio": "{:.2f}×",
            "peak_over": f"{{:.{2 if unit == 'GiB' else 1}f}} {unit}",
            "wall_s": "{:.2f} s",
            "ready_s": "{:.2f} s",
            "throughput": "{:.2f} GB/s",
            "floor": "{:.2f}×",
            "ceiling": "{:.2f}×",
        },
        {
            "fits": f"on {style.size(ram)}",
            "peak_ratio": "× checkpoint",
            "peak_over": f"peak over baseline ({unit})",
            "wall_s": "wall (median)",
            "ready_s": "ready (loaded and compiled)",
            "throughput": "throughput",
            "floor": "× floor",
            "ceiling": "× ceiling",
            "pareto": "Pareto",
        },
    )
    config["description"] = st.column_config.TextColumn("description", width="large")
    st.dataframe(styler, hide_index=True, width="stretch", column_config=config)


def _host_line(shown: pd.DataFrame, ram: int, as_ratio: bool, divisor: float) -> scatter.HostLine:
    """The host's RAM on the chart's axis: less the median baseline, in its unit."""
    base = float(pd.to_numeric(shown["baseline_rss_bytes"]).median())
    ckpt = float(shown["checkpoint_bytes"].iloc[0])
    y = (ram - base) / (ckpt if as_ratio else divisor)
    return scatter.HostLine(y, f"host RAM {style.size(ram)} (less the baseline)")


def _chart(
    shown: pd.DataFrame, ram: int, as_ratio: bool, ceiling: scatter.CeilingLine | None
) -> tuple[str, float]:
    """The cost chart with the host line and the machine's ceiling; returns the byte unit and
    divisor of the table."""
    unit, divisor = style.byte_unit(shown["peak_over_baseline_bytes"].max())
    shown = shown.assign(peak_over_unit=shown["peak_over_baseline_bytes"] / divisor)
    y, title, fmt = (
        ("peak_ratio", "peak over baseline (× checkpoint)", ".2f")
        if as_ratio
        else ("peak_over_unit", f"peak over baseline ({unit})", style.number_format(unit))
    )
    if shown[["wall_s", y]].notna().all(axis=1).any():
        host = _host_line(shown, ram, as_ratio, divisor)
        chart = scatter.overview_scatter(shown, y, title, fmt, host, ceiling)
        st.altair_chart(chart, width="stretch")
        st.caption(
            "Dashed staircase and rings: the Pareto front (no strategy is both faster and "
            "lighter). Dotted line: the reference (the bytes alone). Red dashed line: the host "
            "RAM. Hollow points: peers."
            + (
                " Blue rule: the machine's ceiling (the checkpoint's bytes over the probe's best "
                "bandwidth for this situation: no load of these bytes is faster here)."
                if ceiling
                else ""
            )
        )
    else:
        st.info("No successful run among the chosen strategies to plot.")
    return unit, divisor


def _shape_set(phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, view: dict) -> None:
    st.subheader(f"Shape set `{shapes}`")
    descriptions, problem = data.strategy_descriptions()
    if problem:
        st.warning(f"Strategy descriptions unavailable: {problem}")
    rows = _rows(summary, shapes, descriptions)
    shown = rows[rows["base_strategy"].isin(view["chosen"])]
    ckpt = rows["checkpoint_bytes"].iloc[0]
    note = answer.small_checkpoint_note(ckpt)
    if note:
        st.badge(note, icon=":material/warning:", color="orange")
    st.caption(
        f"checkpoint {style.size(ckpt)} · {int(rows['tensors'].iloc[0])} tensors · largest "
        f"tensor {style.size(rows['largest_tensor_bytes'].iloc[0])} · run "
        + ", ".join(view["labels"].get(r, r) for r in phases["run_id"].unique())
    )
    ceiling = scatter.ceiling_line(frames.ceiling_rows(phases, shown))
    unit, divisor = _chart(shown, view["ram"], view["as_ratio"], ceiling)
    _table(shown, unit, divisor, view["ram"])
    st.markdown("**Every run** (failed ones included):")
    widgets.status_table(phases)


def main() -> None:
    st.title("Overview")
    results = widgets.page_results()
    top = st.columns([3, 1])
    with top[0]:
        run_id = widgets.pick_run(results, key="overview_run", newest=True)
    phases = widgets.run_phases(results, run_id)
    help_text = "default: the RAM of the machine that measured the run; kept across pages"
    ram = widgets.host_ram(
        top[1], _machine_ram(results, phases), key="overview_ram_gib", help=help_text
    )
    phases = widgets.pick_cache(phases, key="overview_cache")
    summary = data.summarize(phases)
    _headlines(summary, ram)
    st.caption(
        "Peak RSS over baseline against wall time, per shape set. Lower and further left is "
        "better; below the red line fits the host RAM."
    )
    strategies = sorted(summary["strategy"].unique())
    unit = st.radio("Peak as", ["× checkpoint", "bytes"], horizontal=True, key="overview_unit")
    # the full width, so that every strategy's chip shows (13 did not fit in three quarters)
    chosen = widgets.pick_strategies(strategies, key="overview_strategies")
    labels = frames.run_labels(results.runs, results.phases)
    view = {"chosen": chosen, "as_ratio": unit.startswith("×"), "ram": ram, "labels": labels}
    for shapes in sorted(summary["shapes"].unique()):
        _shape_set(phases[phases["shapes"] == shapes], summary, shapes, view)


main()
