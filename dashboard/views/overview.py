"""Overview: which strategy to use, and what each costs, per shape set.

Answers first: for the host RAM given (default: the RAM of the machine that measured the run), the
fastest strategy whose measured peak fits, beside the naive path's cost; then each strategy's peak
over baseline against wall time, the Pareto front, the `reference` line (e.g. `floor`, the bytes
alone) and every run with its status, failed ones included.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import answer, data, scatter, style, widgets

GIB = 1 << 30


def _host_ram(results, run_id: str, column) -> int:
    run = results.runs[results.runs["run_id"] == run_id]
    default = (
        float(run["ram_bytes"].iloc[0]) / GIB
        if len(run) and pd.notna(run["ram_bytes"].iloc[0])
        else 16.0
    )
    gib = column.number_input(
        "Host RAM (GiB)",
        0.25,
        65536.0,
        round(default, 2),
        0.5,
        key="overview_ram_gib",
        help="default: the RAM of the machine that measured this run",
    )
    return int(gib * GIB)


def _rows(summary: pd.DataFrame, shapes: str, descriptions: dict[str, str]) -> pd.DataFrame:
    """The strategy rows of one shape set, with a configuration picker when there are several."""
    rows = summary[summary["shapes"] == shapes]
    configs = answer.configurations(rows)
    config = None
    if len(configs) > 1:
        pick = st.selectbox(
            "Configuration",
            configs.index,
            format_func=lambda i: answer.config_label(configs.loc[i]),
            key=f"overview_config_{shapes}",
        )
        config = configs.loc[pick]
    rows = answer.shape_set_rows(summary, shapes, config)
    return rows.assign(description=rows["base_strategy"].map(descriptions).fillna(""))


def _headlines(summary: pd.DataFrame, ram: int) -> None:
    """One answer per shape set, the largest checkpoint first."""
    order = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False)
    for shapes in order.index:
        rows = answer.shape_set_rows(
            summary, shapes, answer.configurations(summary[summary["shapes"] == shapes]).iloc[0]
        )
        head = answer.headline(rows, ram)
        box = st.success if head.fits else st.error
        small = (
            " (checkpoint under 64 MiB: overhead, not a guide)"
            if answer.small_checkpoint_note(order[shapes])
            else ""
        )
        box(
            f"**`{shapes}`** ({style.size(order[shapes])}) on {style.size(ram)}: {head.text}{small}",
            icon=":material/recommend:" if head.fits else ":material/block:",
        )


def _table(shown: pd.DataFrame, unit: str, divisor: float) -> None:
    table = shown.sort_values(["kind", "peak_ratio"]).assign(
        peak_over=shown["peak_over_baseline_bytes"] / divisor,
        throughput=shown["throughput_bytes_per_s"] / 1e9,
        ceiling=shown["ceiling_ratio"] if "ceiling_ratio" in shown else float("nan"),
        pareto=shown["pareto"].map({True: "on the front", False: ""}),
    )
    cols = [
        "strategy",
        "kind",
        "status",
        "repeats",
        "peak_ratio",
        "peak_over",
        "wall_s",
        "throughput",
        "ceiling",
        "pareto",
        "description",
    ]
    styler, config = widgets.number_table(
        table[cols],
        {
            "peak_ratio": "{:.2f}×",
            "peak_over": f"{{:.{2 if unit == 'GiB' else 1}f}} {unit}",
            "wall_s": "{:.2f} s",
            "throughput": "{:.2f} GB/s",
            "ceiling": "{:.2f}×",
        },
        {
            "peak_ratio": "× checkpoint",
            "peak_over": f"peak over baseline ({unit})",
            "wall_s": "wall (median)",
            "throughput": "throughput",
            "ceiling": "× ceiling",
            "pareto": "Pareto",
        },
    )
    config["description"] = st.column_config.TextColumn("description", width="large")
    st.dataframe(styler, hide_index=True, width="stretch", column_config=config)


def _shape_set(
    phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, chosen: list[str], as_ratio: bool
) -> None:
    st.subheader(f"Shape set `{shapes}`")
    descriptions, problem = data.strategy_descriptions()
    if problem:
        st.warning(f"Strategy descriptions unavailable: {problem}")
    rows = _rows(summary, shapes, descriptions)
    shown = rows[rows["base_strategy"].isin(chosen)]
    ckpt = rows["checkpoint_bytes"].iloc[0]
    note = answer.small_checkpoint_note(ckpt)
    if note:
        st.badge(note, icon=":material/warning:", color="orange")
    st.caption(
        f"checkpoint {style.size(ckpt)} · {int(rows['tensors'].iloc[0])} tensors · largest {style.size(rows['largest_tensor_bytes'].iloc[0])}"
    )
    unit, divisor = style.byte_unit(shown["peak_over_baseline_bytes"].max())
    shown = shown.assign(peak_over_unit=shown["peak_over_baseline_bytes"] / divisor)
    y, title, fmt = (
        ("peak_ratio", "peak over baseline (× checkpoint)", ".2f")
        if as_ratio
        else ("peak_over_unit", f"peak over baseline ({unit})", style.number_format(unit))
    )
    if shown[["wall_s", y]].notna().all(axis=1).any():
        st.altair_chart(scatter.overview_scatter(shown, y, title, fmt), width="stretch")
        st.caption(
            "Dashed staircase and rings: the Pareto front (no strategy is both faster and lighter). Dotted line: the reference (the bytes alone). Hollow points: peers."
        )
    else:
        st.info("No successful run among the chosen strategies to plot.")
    _table(shown, unit, divisor)
    st.markdown("**Every run** (failed ones included):")
    widgets.status_table(phases[phases["shapes"] == shapes])


def main() -> None:
    st.title("Overview")
    results = widgets.page_results()
    top = st.columns([3, 1])
    with top[0]:
        run_id = widgets.pick_run(results, key="overview_run")
    ram = _host_ram(results, run_id, top[1])
    phases = widgets.pick_cache(
        results.phases[results.phases["run_id"] == run_id], key="overview_cache"
    )
    summary = data.summarize(phases)
    _headlines(summary, ram)
    st.caption(
        "Peak RSS over baseline against wall time, per shape set. Lower and further left is better."
    )
    strategies = sorted(summary["strategy"].unique())
    left, right = st.columns([3, 1])
    chosen = left.multiselect(
        "Strategies", strategies, default=strategies, key="overview_strategies"
    )
    unit = right.radio("Peak as", ["× checkpoint", "bytes"], horizontal=True, key="overview_unit")
    for shapes in sorted(summary["shapes"].unique()):
        _shape_set(phases, summary, shapes, chosen, unit.startswith("×"))


main()
