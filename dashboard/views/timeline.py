"""Timeline: the sampled RSS of one run or several overlaid, over time, with phase bands.

Answers: when the memory goes up and by how much, e.g. the spike of a cast or of a whole-file read,
and how two strategies' curves differ in shape, not just in peak.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, widgets
from loader.vocabulary import TOTAL


def _result_labels(phases: pd.DataFrame) -> dict[str, str]:
    """result_id -> 'strategy · shapes · r<repeat> · status' for the whole-run rows."""
    totals = data.whole_run(phases)
    totals = totals[totals["phase"] == TOTAL]
    totals = totals.sort_values(["shapes", "strategy", "repeat"])
    return {
        r.result_id: f"{r.strategy} · {r.shapes} · r{r.repeat} · {r.status}"
        for r in totals.itertuples()
    }


def _bands(phases: pd.DataFrame, result_id: str) -> pd.DataFrame:
    """Phase start/end seconds of one result, from its phase rows (cumulative phase walls)."""
    rows = data.whole_run(phases[phases["result_id"] == result_id])
    rows = rows[rows["phase"] != TOTAL].sort_values("phase_order")
    end = rows["phase_wall_s"].astype(float).cumsum()
    return pd.DataFrame(
        {"phase": rows["phase"], "start_s": end - rows["phase_wall_s"], "end_s": end}
    )


def main() -> None:
    st.title("Timeline")
    st.caption("Sampled RSS (anonymous + file-backed) since each child's baseline.")
    results = widgets.page_results()
    run_id = widgets.pick_run(results, key="timeline_run")
    phases = results.phases[results.phases["run_id"] == run_id]
    labels = _result_labels(phases)
    sampled = set(results.samples["result_id"]) if not results.samples.empty else set()
    options = [r for r in labels if r in sampled]
    if not options:
        st.info("This run recorded no RSS samples (sampling off, or every child failed before its first sample).")  # fmt: skip
        return
    chosen = st.multiselect("Results to overlay", options, default=options[:1], format_func=labels.__getitem__, key="timeline_results")  # fmt: skip
    if not chosen:
        st.info("Choose at least one result.")
        return
    stack = len(chosen) == 1 and st.toggle("Split anonymous / file-backed", key="timeline_stack")
    samples = results.samples[results.samples["result_id"].isin(chosen)]
    samples = samples[samples["process_index"].isin([0, -1])].sort_values("t_s")
    samples = samples.assign(label=samples["result_id"].map(labels))
    st.altair_chart(charts.timeline(samples, _bands(phases, chosen[0]), stack), width="stretch")
    st.caption(f"Phase bands are those of `{labels[chosen[0]]}`.")


main()
