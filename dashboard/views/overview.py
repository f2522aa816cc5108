"""Overview: per shape set, each strategy's peak over baseline against wall time.

Answers: which strategy is cheapest in memory, which is fastest, which are on the Pareto front, how
far each is above the reference line (kind `reference`: `floor`, the bytes alone), and which runs
failed (every status shown). Each strategy's description is its docstring's first line.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, widgets
from loader.vocabulary import OK

CONFIG = ["dtype", "devices_per_process"]


def _config_rows(summary: pd.DataFrame, shapes: str) -> pd.DataFrame:
    """The summary rows of one shape set and one (dtype, devices per process) configuration.

    A multi-process strategy is one more point beside the single-process ones with as many devices
    per process, named `strategy (N processes)`.
    """
    rows = summary[summary["shapes"] == shapes]
    rows = rows.assign(devices_per_process=rows["devices"] // rows["processes"].clip(lower=1))
    configs = rows[CONFIG].drop_duplicates().sort_values(CONFIG)
    if len(configs) > 1:
        labels = [
            f"{r.dtype}, {r.devices_per_process} device(s) per process"
            for r in configs.itertuples()
        ]
        pick = st.selectbox("Configuration", range(len(labels)), format_func=labels.__getitem__, key=f"overview_config_{shapes}")  # fmt: skip
        chosen = configs.iloc[pick]
        rows = rows[(rows[CONFIG] == chosen.values).all(axis=1)]
    multi = rows["processes"] > 1
    names = rows["strategy"].where(
        ~multi, rows["strategy"] + " (" + rows["processes"].astype(str) + " processes)"
    )
    return rows.assign(strategy=names, base_strategy=rows["strategy"]).reset_index(drop=True)


def _with_costs(rows: pd.DataFrame, descriptions: dict[str, str]) -> pd.DataFrame:
    """Add descriptions, MiB over baseline and the Pareto flag (ok rows, reference lines excluded)."""
    rows = rows.assign(
        peak_over_baseline_mib=(rows["peak_rss_bytes"] - rows["baseline_rss_bytes"]) / charts.MIB,
        description=rows["base_strategy"].map(descriptions).fillna(""),
    )
    ok = rows[rows["status"] == OK]
    front = data.pareto_front(ok)
    return rows.assign(pareto=front.reindex(rows.index, fill_value=False).astype(bool))


def _shape_set(phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, chosen: list[str], unit: str) -> None:  # fmt: skip
    st.subheader(f"Shape set `{shapes}`")
    descriptions, problem = data.strategy_descriptions()
    if problem:
        st.warning(f"Strategy descriptions unavailable: {problem}")
    rows = _with_costs(_config_rows(summary, shapes), descriptions)
    shown = rows[rows["base_strategy"].isin(chosen)]
    ckpt = rows["checkpoint_bytes"].iloc[0]
    st.caption(f"checkpoint {data.gib(ckpt)} · {int(rows['tensors'].iloc[0])} tensors · largest {data.gib(rows['largest_tensor_bytes'].iloc[0])}")  # fmt: skip
    y, title = ("peak_ratio", "peak over baseline (× checkpoint)") if unit.startswith("×") else ("peak_over_baseline_mib", "peak over baseline (MiB)")  # fmt: skip
    if shown[["wall_s", y]].notna().all(axis=1).any():
        st.altair_chart(charts.overview_scatter(shown, y, title), width="stretch")
        st.caption("Dashed line: the Pareto front (no strategy is both faster and lighter). Dotted rule: the reference line (the bytes alone).")  # fmt: skip
    else:
        st.info("No successful run among the chosen strategies to plot.")
    cols = ["strategy", "status", "repeats", "peak_ratio", "peak_over_baseline_mib", "wall_s", "throughput_bytes_per_s", "pareto", "kind", "description"]  # fmt: skip
    st.dataframe(
        shown[cols].sort_values("peak_ratio"),
        hide_index=True,
        column_config={
            "peak_ratio": st.column_config.NumberColumn("× checkpoint", format="%.2f"),
            "peak_over_baseline_mib": st.column_config.NumberColumn(
                "MiB over baseline", format="%.1f"
            ),
            "wall_s": st.column_config.NumberColumn("wall s (median)", format="%.3f"),
            "throughput_bytes_per_s": st.column_config.NumberColumn("bytes/s", format="%.3e"),
        },
    )
    st.markdown("**Every run** (failed ones included):")
    widgets.status_table(phases[phases["shapes"] == shapes])


def main() -> None:
    st.title("Overview")
    st.caption("Peak RSS over baseline against wall time, per shape set. Lower and further left is better.")  # fmt: skip
    results = widgets.page_results()
    run_id = widgets.pick_run(results, key="overview_run")
    phases = results.phases[results.phases["run_id"] == run_id]
    summary = data.summarize(phases)
    strategies = sorted(summary["strategy"].unique())
    left, right = st.columns([3, 1])
    chosen = left.multiselect(
        "Strategies", strategies, default=strategies, key="overview_strategies"
    )
    unit = right.radio("Peak as", ["× checkpoint", "bytes"], horizontal=True, key="overview_unit")
    for shapes in sorted(summary["shapes"].unique()):
        _shape_set(phases, summary, shapes, chosen, unit)


main()
