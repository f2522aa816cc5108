"""Phases: where the memory and the time of a load go, phase by phase, per strategy.

Answers: each phase's (build, read, cast, transfer, dequantize, assemble, stream) own high-water
mark over the baseline, how much of what it keeps is anonymous vs file-backed memory, and when it
ran. Phases that ran at the same time (pipelined builds while it streams) are never subtracted
from each other nor stacked: each keeps its own peak and its own start and end. One route at a
time: a local load and one over s3 at concurrency 16 are never one median; a remote route's
strategies are named with it, and its figures against the link are shown. A quantized
checkpoint's loads also show the bytes each moved to the device against the file's and the
dequantized model's.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.records.results import ROUTE
from bench.vocabulary import OK
from dashboard import charts, data, frames, link, style, widgets
from loader.vocabulary import STREAM


def _filter(phases: pd.DataFrame) -> pd.DataFrame:
    """Narrow to one shape set and (when there are several) one dtype / device count / route
    (the local disk, or a remote source, link and concurrency: never one median)."""
    cols = st.columns(4)
    with cols[0]:
        shapes = widgets.pick_shapes(phases, key="phases_shapes")
    rows = phases[phases["shapes"] == shapes]
    dtypes = sorted(rows["dtype"].unique())
    dtype = link.bound(
        "phases_dtype",
        link.DTYPE,
        dtypes[0],
        lambda: cols[1].selectbox("dtype", dtypes, key="phases_dtype"),
        valid=dtypes.__contains__,
    )
    rows = rows[rows["dtype"] == dtype]
    counts = rows.groupby("devices")["strategy"].nunique()
    options = [int(d) for d in sorted(counts.index)]
    most = int(counts.idxmax()) if len(counts) else options[0]  # the count most strategies ran on
    devices = link.bound(
        "phases_devices",
        link.DEVICES,
        most,
        lambda: cols[2].selectbox("devices", options, key="phases_devices"),
        valid=options.__contains__,
    )
    elsewhere = sorted(
        set(rows["strategy"]) - set(rows.loc[rows["devices"] == devices, "strategy"])
    )
    if elsewhere:
        other = sorted(rows.loc[rows["strategy"].isin(elsewhere), "devices"].unique())
        st.caption(
            f"Not measured on {devices} device(s): {', '.join(elsewhere)} (measured on "
            f"{', '.join(map(str, other))}; multi-process strategies need a device per process). "
            "Pick that device count to see them."
        )
    rows = rows[rows["devices"] == devices]
    route = widgets.pick_route(rows, key="phases_route", column=cols[3])
    return rows[rows[ROUTE] == route]


def _substeps(rows: pd.DataFrame) -> None:
    """The accumulated sub-step times of streaming phases, if any."""
    stream = data.whole_run(rows)
    stream = stream[(stream["phase"] == STREAM) & (stream["status"] == OK)]
    if stream.empty:
        return
    steps = pd.DataFrame([dict(s or {}) for s in stream["substeps_s"]], index=stream.index)
    steps.insert(0, "strategy", stream["strategy"])
    st.markdown("**Inside `stream`**: median seconds spent per sub-step (- where none was timed)")
    med = steps.groupby("strategy").median().reset_index()
    seconds: dict[str, widgets.Format] = {c: style.seconds for c in med.columns[1:]}
    styler, config = widgets.number_table(med, seconds, {})
    st.dataframe(styler, hide_index=True, width="content", column_config=config)


def _format(column: str) -> widgets.Format:
    """How "The numbers" writes a column: seconds, a ratio, a size, or a count."""
    if column.endswith("_s"):
        return style.seconds
    if column.endswith("ratio"):
        return "{:.2f}x"
    return style.size if column.endswith("_bytes") else "{:,.0f}"


def _numbers(med: pd.DataFrame) -> None:
    with st.expander("The numbers"):
        formats = {c: _format(c) for c in med.columns if med[c].dtype.kind in "fi"}
        table = med.sort_values(["strategy", "phase_order"])
        styler, config = widgets.number_table(table, formats, {})  # a missing value reads "-"
        st.dataframe(styler, hide_index=True, column_config=config)


def _quantized(rows: pd.DataFrame) -> None:
    """A quantized checkpoint: what each strategy moved to the device, the dequantized size."""
    loads = frames.quantized_loads(rows)
    if loads.empty:
        return
    st.markdown(
        "**A quantized checkpoint**: the bytes each load moved to the device (the file's own "
        "where it dequantizes on the device, the dequantized model's where on the host), and "
        "its `dequantize` phase (- where it had none)"
    )
    formats = {c: _format(c) for c in frames.QUANTIZED_COLUMNS[1:]}
    styler, config = widgets.number_table(loads, formats, {})
    st.dataframe(styler, hide_index=True, width="content", column_config=config)


def _overlaps(rows: pd.DataFrame) -> None:
    overlaps = data.overlapping_phases(rows)
    if overlaps:
        listing = "; ".join(f"`{s}`: {', '.join(p)}" for s, p in sorted(overlaps.items()))
        st.caption(
            "Phases that ran at the same time (each bar is its own high-water mark; they share "
            f"their RSS and their time, so never add or subtract them): {listing}"
        )


def main() -> None:
    st.title("Phases")
    st.caption("Medians over the successful repeats of the chosen run.")
    results = widgets.page_results()
    run_id = widgets.pick_run(results, key="phases_run")
    rows = _filter(results.phases[results.phases["run_id"] == run_id])
    rows = frames.route_labelled(widgets.pick_cache(rows, key="phases_cache"))
    med = data.phase_medians(rows)
    if med.empty:
        st.info("No successful run with phase rows for this choice; see the Overview for statuses.")
        return
    chosen = widgets.pick_strategies(sorted(med["strategy"].unique()), key="phases_strategies")
    med = med[med["strategy"].isin(chosen)]
    if med.empty:
        st.info("Choose at least one strategy.")
        return
    st.subheader("Each phase's own high-water mark")
    st.altair_chart(charts.phase_peak_bars(med), width="stretch")
    st.subheader("Anonymous vs file-backed RSS at each phase's end")
    st.altair_chart(charts.anon_file_bars(med), width="content")
    st.subheader("When each phase ran")
    st.altair_chart(charts.phase_time_bars(med), width="stretch")
    _overlaps(rows[rows["strategy"].isin(chosen)])
    _substeps(rows[rows["strategy"].isin(chosen)])
    _quantized(rows[rows["strategy"].isin(chosen)])
    widgets.remote_figures(rows[rows["strategy"].isin(chosen)])
    _numbers(med)


main()
