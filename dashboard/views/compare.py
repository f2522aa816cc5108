"""Compare: two runs (machines, versions, dates) side by side, NEW / BASE per strategy and shapes.

The same table and verdicts as `loadbench compare BASE NEW` (`bench.analysis.compare`): peak over baseline
and wall-time ratios with the spread of the repeats, a regression only beyond that spread.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.analysis import compare as bench_compare
from dashboard import charts, style, widgets

FACTS = [
    "machine",
    "started_utc",
    "cpu_model",
    "cpu_count",
    "ram_bytes",
    "kernel",
    "python",
    "jax_version",
    "flax_version",
    "safetensors_version",
    "numpy_version",
    "loadbench_version",
    "allocator_env",
    "command",
]
KEYS = bench_compare.KEYS


def machine_facts(runs: pd.DataFrame, base: str, new: str) -> pd.DataFrame:
    """The run records of `base` and `new` as two text columns, one row per fact."""
    out = {}
    for name, run_id in (("base", base), ("new", new)):
        rows = runs[runs["run_id"] == run_id]
        rec = rows.iloc[0].to_dict() if len(rows) else {}
        out[name] = [
            style.size(rec.get(f)) if f == "ram_bytes" and rec.get(f) else str(rec.get(f, "–"))
            for f in FACTS
        ]
    return pd.DataFrame(out, index=FACTS)


def _default_base(phases: pd.DataFrame, ids: list[str], new: str) -> int:
    """The newest other run sharing a combination with `new` (else the next one)."""
    mine = set(map(tuple, phases.loc[phases["run_id"] == new, KEYS].drop_duplicates().to_numpy()))
    for i, run_id in enumerate(ids):
        theirs = set(
            map(tuple, phases.loc[phases["run_id"] == run_id, KEYS].drop_duplicates().to_numpy())
        )
        if run_id != new and mine & theirs:
            return i
    return 1


def _table(rows: pd.DataFrame) -> None:
    """The rows as `loadbench compare` prints them: ratio (spread), then the verdict."""
    shown = pd.DataFrame(
        {
            "strategy": rows["strategy"],
            "repeats (base/new)": [
                f"{b}/{n}" for b, n in zip(rows["repeats_base"], rows["repeats_new"], strict=True)
            ],
            "peak over baseline, new / base (spread)": [
                bench_compare.ratio_text(r, "peak") for _, r in rows.iterrows()
            ],
            "wall time, new / base (spread)": [
                bench_compare.ratio_text(r, "wall") for _, r in rows.iterrows()
            ],
            "verdict": rows["verdict"],
        }
    )
    st.dataframe(shown, hide_index=True, width="stretch")
    st.caption(
        "Spread: new's best repeat over base's worst, to new's worst over base's best. A regression is over the threshold and beyond the spread."
    )


def main() -> None:
    st.title("Compare")
    st.caption(
        "New relative to base: below 1 means lighter or faster. Bars: median ratio; whiskers: the spread of the repeats."
    )
    results = widgets.page_results()
    ids = list(dict.fromkeys(widgets.run_ids(results)))
    if len(ids) < 2:
        st.info(
            "Only one run in the results folder; run the bench again (another machine, allocator or version) to compare."
        )
        return
    cols = st.columns([2, 2, 1])
    with cols[1]:
        new = widgets.pick_run(results, key="compare_new", label="New", index=0)
    with cols[0]:
        base = widgets.pick_run(
            results, key="compare_base", label="Base", index=_default_base(results.phases, ids, new)
        )
    threshold = (
        cols[2].number_input("Max regression (%)", 0.5, 500.0, 5.0, 0.5, key="compare_threshold")
        / 100
    )
    both = bench_compare.compare(
        results.phases[results.phases["run_id"] == base],
        results.phases[results.phases["run_id"] == new],
        threshold,
    )
    if both.empty:
        st.info(
            "The two runs share no (shape set, strategy, dtype, devices) combination: the run labels name the shape sets each measured."
        )
    else:
        bad = both[both["verdict"].isin(["regressed", "broken"])]
        if len(bad):
            st.error(
                "Regressed beyond the spread: "
                + ", ".join(
                    f"`{r.strategy}` on `{r.shapes}` ({r.verdict})" for r in bad.itertuples()
                )
            )
        else:
            st.success(f"No regression over {threshold:.0%} beyond the spread of repeats.")
        for shapes in sorted(both["shapes"].unique()):
            rows = both[both["shapes"] == shapes]
            st.subheader(f"Shape set `{shapes}`")
            st.altair_chart(charts.compare_bars(rows), width="stretch")
            _table(rows)
    st.subheader("Machine facts")
    st.table(machine_facts(results.runs, base, new))
    st.caption(
        f"In a terminal or CI: `loadbench compare BASE NEW --max-regression {threshold:.0%}` (exit 1 on a regression)."
    )


main()
