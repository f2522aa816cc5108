"""memray: the allocation flamegraph and top allocation sites of runs captured under memray.

Answers: which call sites hold the memory at a strategy's peak. Only files inside the results
folder are opened, after resolving their paths; nothing named by the URL is ever read.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from dashboard import data, frames, link, paths, style, widgets


def _captures(results) -> pd.DataFrame:
    """One row per captured result, labelled `strategy · shapes · r<repeat> — run` (a remote
    load's strategy with its route: `pipelined · s3 · 1Gbit · c16`)."""
    rows = frames.route_labelled(data.whole_run(results.phases))
    rows = rows[rows["memray_html"].notna() | rows["memray_top"].notna()]
    rows = rows.drop_duplicates("result_id").merge(
        results.runs[["run_id", "machine"]], on="run_id", how="left"
    )
    labels = data.run_labels(results.runs, results.phases)
    rows["label"] = [
        f"{r.strategy} · {r.shapes} · r{style.repeat_number(r.repeat)} — "
        + labels.get(str(r.run_id), str(r.run_id))
        for r in rows.itertuples()
    ]
    return rows.sort_values("label").reset_index(drop=True)


def _flamegraph(root, row: pd.Series) -> None:
    path = paths.inside(root, row["memray_html"], machine=row["machine"])
    if row["memray_html"] and path is None:
        st.warning(
            f"Flamegraph `{row['memray_html']}` is not a file inside the results folder; "
            "not opened."
        )
    if path is None:
        return
    body = path.read_bytes()
    st.download_button(
        "Download the flamegraph (HTML)",
        body,
        file_name=path.name,
        mime="text/html",
        key="memray_download",
    )
    if len(body) > paths.MAX_BYTES:
        return
    shown = link.bound(
        "memray_inline",
        link.INLINE,
        False,
        lambda: st.toggle("Show it here", key="memray_inline"),
        omit=False,
    )
    if shown:
        components.html(body.decode("utf-8", errors="replace"), height=640, scrolling=True)


def main() -> None:
    st.title("memray")
    st.caption(
        "Allocation flamegraphs and top allocation sites at the peak, where a run was captured."
    )
    results = widgets.page_results()
    captures = _captures(results)
    folder = data.results_folder()
    if captures.empty:
        st.info(
            "No memray captures in these results. Capture some with `loadbench bench run "
            f"--memray --shapes gpt2 --out {folder}` (one memray run per strategy)."
        )
        return
    labels = dict(zip(captures["result_id"].astype(str), captures["label"], strict=True))
    ids = list(labels)
    pick = link.bound(
        "memray_capture",
        link.CAPTURE,
        ids[0],
        lambda: st.selectbox("Capture", ids, format_func=labels.__getitem__, key="memray_capture"),
        valid=ids.__contains__,
    )
    row = captures.iloc[ids.index(pick)]
    root = data.results_folder()
    _flamegraph(root, row)
    top = paths.read_text(root, row["memray_top"], machine=row["machine"])
    st.subheader("Top allocation sites")
    if top is None:
        st.info("No top-sites report for this capture inside the results folder.")
    else:
        st.code(top, language=None)


main()
