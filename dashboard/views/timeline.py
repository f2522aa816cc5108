"""Timeline: the sampled RSS of one result or several overlaid, over time, with each one's phases.

Answers: when the memory goes up and by how much, e.g. the spike of a cast or of a whole-file read,
and how two strategies' curves differ in shape, not just in peak. Over baseline by default, as on
every other page; absolute RSS as an option.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.records.results import ROUTE
from bench.vocabulary import OK
from dashboard import data, frames, link, style, timeline, widgets
from loader.vocabulary import DEFAULT_STRATEGY, TOTAL


def _result_labels(phases: pd.DataFrame) -> dict[str, str]:
    """result_id -> 'strategy · shapes · r<repeat> · status' for the whole-run rows, a remote
    load's strategy with its route ('pipelined · s3 · 1Gbit · c16 · gpt2 · r1 · ok')."""
    totals = frames.route_labelled(data.whole_run(phases))
    totals = totals[totals["phase"] == TOTAL]
    totals = totals.sort_values(["shapes", "strategy", "devices", "repeat"])
    several = totals["devices"].nunique() > 1
    return {
        str(r.result_id): f"{r.strategy} · {r.shapes} · r{style.repeat_number(r.repeat)} · "
        + (f"{r.devices} dev · " if several else "")
        + str(r.status)
        for r in totals.itertuples()
    }


def _typical(phases: pd.DataFrame, options: list[str]) -> list[str]:
    """The result a Timeline opens on: on the largest shape set and the first route (the local
    disk, else the lowest concurrency), of the default strategy (else the first), the ok repeat
    whose wall time is the median of its repeats, not an outlier."""
    totals = data.whole_run(phases)
    totals = totals[(totals["phase"] == TOTAL) & totals["result_id"].isin(options)]
    ok = totals[totals["status"] == OK]
    ok = ok[ok["checkpoint_bytes"] == ok["checkpoint_bytes"].max()]  # the largest shape set
    if ok.empty:
        return options[:1]
    ok = ok[ok[ROUTE] == frames.route_order(ok)[0]]
    names = set(ok["strategy"])
    strategy = DEFAULT_STRATEGY if DEFAULT_STRATEGY in names else sorted(names)[0]
    mine = ok[ok["strategy"] == strategy].sort_values("wall_s")
    return [str(mine["result_id"].iloc[(len(mine) - 1) // 2])]


def _toggles(chosen: list[str]) -> tuple[bool, bool]:
    cols = st.columns(2)
    absolute = link.bound(
        "timeline_absolute",
        link.ABSOLUTE,
        False,
        lambda: cols[0].toggle("Absolute RSS (not over baseline)", key="timeline_absolute"),
        omit=False,
    )
    one = len(chosen) == 1
    split = link.bound(
        "timeline_stack",
        link.SPLIT,
        False,
        lambda: cols[1].toggle(
            "Split anonymous / file-backed",
            key="timeline_stack",
            disabled=not one,
            help="one result at a time: choose a single result to split its RSS",
        ),
        omit=False,
    )
    if not one:
        cols[1].caption("The split needs a single result (several are overlaid).")
    return absolute, split and one


def main() -> None:
    st.title("Timeline")
    st.caption("Sampled RSS since each child's baseline; under it, each result's own phases.")
    results = widgets.page_results()
    run_id = widgets.pick_run(results, key="timeline_run")
    phases = results.phases[results.phases["run_id"] == run_id]
    labels = _result_labels(phases)
    sampled = set(results.samples["result_id"]) if not results.samples.empty else set()
    options = [r for r in labels if r in sampled]
    if not options:
        st.info(
            "This run recorded no RSS samples (sampling off, or every child failed before its "
            "first sample)."
        )
        return
    chosen = link.bound(
        "timeline_results",
        link.RESULTS,
        _typical(phases, options),
        lambda: st.multiselect(
            "Results to overlay", options, format_func=labels.__getitem__, key="timeline_results"
        ),
        valid=lambda ids: set(ids) <= set(options),
    )
    if not chosen:
        st.info("Choose at least one result.")
        return
    absolute, split = _toggles(chosen)
    _draw(results, phases, chosen, labels, absolute, split)


def _draw(results, phases, chosen: list[str], labels: dict, absolute: bool, split: bool) -> None:
    samples = results.samples[results.samples["result_id"].isin(chosen)]
    samples = samples[samples["process_index"].isin([0, -1])].sort_values("t_s")
    samples = samples.assign(label=samples["result_id"].map(labels))
    mine = phases[phases["result_id"].isin(chosen)]
    base = mine.groupby("result_id")["baseline_rss_bytes"].first()
    bands = frames.phase_bands(phases, chosen, labels)
    chart = timeline.timeline(
        samples, bands, base.to_dict(), split=split, over_baseline=not absolute
    )
    st.altair_chart(chart, width="content")
    st.caption(
        f"A pause in sampling longer than {timeline.GAP_FACTOR:g}x the usual interval is left "
        "as a gap: nothing was measured there. Phase bands sit at their recorded times; phases "
        "that ran at the same time overlap, each on a lane of its own."
    )


main()
