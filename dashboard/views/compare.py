"""Compare: two runs (machines, versions, dates) side by side, NEW / BASE per strategy and shapes.

The same table, verdicts and lists of what either side lacks as `loadbench compare BASE NEW`
(`bench.analysis.compare`, through `dashboard.comparison`, which the report shares): peak over
baseline with the spread of the repeats and the U test's p, the time on the paired ratios with
its 95% interval, a regression only over the threshold and beyond them, with enough repeats. A
combination includes its route: a local load is never held against one over s3, nor
concurrency 1 against 64; a remote strategy is named with its route, and each side's wall over
its link's ceiling is shown beside. The base, the new run and the threshold are in the URL.
"""

from __future__ import annotations

import shlex
from typing import Any

import streamlit as st

from dashboard import charts, comparison, data, link, widgets

BOXES = {
    comparison.ERROR: st.error,
    comparison.WARNING: st.warning,
    comparison.INFO: st.info,
    comparison.SUCCESS: st.success,
}


def _pick(results: Any, ids: list[str]) -> tuple[str, str, float]:
    """The base and new run pickers and the threshold (a fraction)."""
    cols = st.columns([2, 2, 1])
    with cols[1]:
        new = widgets.pick_run(results, key="compare_new", label="New")
    with cols[0]:
        base = comparison.default_base(results, new) or next(r for r in ids if r != new)
        base = widgets.pick_run(
            results, key="compare_base", label="Base", index=ids.index(base), param=link.BASE
        )
    percent = link.bound(
        "compare_threshold",
        link.THRESHOLD,
        comparison.DEFAULT_THRESHOLD * 100,
        lambda: cols[2].number_input(
            "Max regression (%)", 0.5, 500.0, step=0.5, key="compare_threshold"
        ),
        valid=lambda p: 0.5 <= p <= 500,
        omit=comparison.DEFAULT_THRESHOLD * 100,
    )
    return base, new, percent / 100


def main() -> None:
    st.title("Compare")
    st.caption(
        "New relative to base: below 1 means lighter or faster. Bars: the peak's median ratio "
        "and the time's paired ratio; whiskers: the peak's spread of repeats, the time's 95% "
        "interval."
    )
    results = widgets.page_results()
    ids = list(dict.fromkeys(widgets.run_ids(results)))
    if len(ids) < 2:
        st.info(
            "Only one run in the results folder; run the bench again (another machine, "
            "allocator or version) to compare."
        )
        return
    base, new, threshold = _pick(results, ids)
    shown = comparison.compared(results, base, new, threshold)
    for box, sentence in shown.said:
        BOXES[box](sentence)
    for shapes, rows in shown.shape_sets.items():
        st.subheader(f"Shape set `{shapes}`")
        st.altair_chart(charts.compare_bars(rows), width="stretch")
        st.dataframe(comparison.table(rows), hide_index=True, width="stretch")
    st.subheader("Machine facts")
    st.table(shown.facts)
    folder = data.results_folder()
    base_file, new_file = (shlex.quote(str(data.run_file(folder, r))) for r in (base, new))
    gate = comparison.command(base_file, new_file, threshold)
    st.caption(
        f"In a terminal or CI: `{gate}` (exit 1 on a regression, or a strategy of BASE missing "
        "in NEW)."
    )


main()
