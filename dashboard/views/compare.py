"""Compare: two runs (machines, versions, dates) side by side, ratio per strategy.

Answers: did a change of machine, allocator or version make a strategy heavier or slower, and on
what hardware and software each run was measured.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, widgets

FACTS = ["machine", "started_utc", "cpu_model", "cpu_count", "ram_bytes", "kernel", "python", "jax_version", "flax_version", "safetensors_version", "numpy_version", "loadbench_version", "allocator_env", "command"]  # fmt: skip
KEYS = ["shapes", "strategy", "dtype", "devices", "processes"]


def machine_facts(runs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """The run records of `a` and `b` as two text columns, one row per fact."""
    out = {}
    for name, run_id in (("run A", a), ("run B", b)):
        rows = runs[runs["run_id"] == run_id]
        rec = rows.iloc[0].to_dict() if len(rows) else {}
        out[name] = [data.gib(rec.get(f)) if f == "ram_bytes" and rec.get(f) else str(rec.get(f, "–")) for f in FACTS]  # fmt: skip
    return pd.DataFrame(out, index=FACTS)


def ratios(phases: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per (shapes, strategy, dtype, devices, processes) in both runs: B / A of peak and wall."""
    sa = data.summarize(phases[phases["run_id"] == a])
    sb = data.summarize(phases[phases["run_id"] == b])
    cols = [*KEYS, "status", "peak_ratio", "wall_s"]
    both = sa[cols].merge(sb[cols], on=KEYS, suffixes=("_a", "_b"))
    both["peak_ratio_b_over_a"] = both["peak_ratio_b"] / both["peak_ratio_a"]
    both["wall_s_b_over_a"] = both["wall_s_b"] / both["wall_s_a"]
    return both


def main() -> None:
    st.title("Compare")
    st.caption("Run B relative to run A: below 1 means B is lighter or faster.")
    results = widgets.page_results()
    if results.phases["run_id"].nunique() < 2:
        st.info("Only one run in the results folder; run the bench again (another machine, allocator or version) to compare.")  # fmt: skip
        return
    cols = st.columns(2)
    with cols[0]:
        a = widgets.pick_run(results, key="compare_a", label="Run A", index=1)
    with cols[1]:
        b = widgets.pick_run(results, key="compare_b", label="Run B", index=0)
    st.subheader("Machine facts")
    st.dataframe(machine_facts(results.runs, a, b), width="stretch")
    both = ratios(results.phases, a, b)
    if both.empty:
        st.info("The two runs share no (shape set, strategy, dtype, devices) combination.")
        return
    shapes = st.selectbox("Shape set", sorted(both["shapes"].unique()), key="compare_shapes")
    rows = both[both["shapes"] == shapes]
    drawn = rows.dropna(subset=["peak_ratio_b_over_a", "wall_s_b_over_a"], how="all")
    if len(drawn):
        st.altair_chart(charts.compare_bars(drawn), width="stretch")
    st.dataframe(rows, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.3f") for c in rows.columns if c.startswith(("peak_ratio", "wall_s"))})  # fmt: skip


main()
