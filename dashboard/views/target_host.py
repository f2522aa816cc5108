"""Target host: will this model load on that machine, and with which strategy?

Answers: for chosen shapes (a measured shape set, a preset or fetched spec, or custom sizes), a
host RAM and a device count, each strategy's predicted peak, headroom and verdict (fits / tight /
does not fit) and the recommended strategy, from `bench.analysis.recommend` (the model `loadbench
recommend` uses); plus how the sharding rule splits the spec's largest tensors over the devices.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from bench.analysis import advice
from bench.analysis.recommend import TargetCheckpoint
from bench.errors import NoResultsError
from dashboard import charts, data, specs, style, widgets

CUSTOM = "custom sizes"
SOURCES = ("a measured shape set", "a preset or fetched spec", CUSTOM)
GIB = 1 << 30


@st.cache_data(show_spinner="Listing shape specs…")
def _spec_names() -> list[str]:
    return specs.spec_names()


@st.cache_data(show_spinner="Reading the shape spec…")
def _spec_facts(name: str, devices: int) -> dict:
    return specs.spec_facts(name, devices)


def _measured_summary(phases: pd.DataFrame) -> tuple[dict, str]:
    shapes = st.selectbox("Shape set", sorted(phases["shapes"].unique()), key="target_shapes")
    row = phases[phases["shapes"] == shapes].iloc[0]
    return {k: int(row[k]) for k in ("checkpoint_bytes", "largest_tensor_bytes", "tensors")}, shapes


def _custom_summary() -> dict:
    cols = st.columns(3)
    ckpt = cols[0].number_input("Checkpoint (GiB)", 0.001, 4096.0, 1.0, key="target_ckpt_gib")
    largest = cols[1].number_input(
        "Largest tensor (MiB)", 0.001, 1e6, 256.0, key="target_largest_mib"
    )
    tensors = cols[2].number_input("Tensors", 1, 10_000_000, 200, key="target_tensors")
    return {
        "checkpoint_bytes": int(ckpt * GIB),
        "largest_tensor_bytes": int(largest * (1 << 20)),
        "tensors": int(tensors),
    }


def _spec_summary(devices: int) -> tuple[dict | None, dict | None]:
    """The summary of a chosen preset/fetched spec and its facts (None with an error shown)."""
    try:
        names = _spec_names()
        name = st.selectbox(
            "Spec", names, index=names.index("sa3") if "sa3" in names else 0, key="target_spec"
        )
        facts = _spec_facts(name, devices)
    except Exception as e:  # a broken spec or shapes package: say which, keep the page
        st.error(f"Could not read shape specs: {e}")
        return None, None
    return facts["summary"], facts


def _host_inputs(results: Any) -> tuple[int, int]:
    ram_default = float(results.runs["ram_bytes"].max() / GIB) if not results.runs.empty else 16.0
    counts = results.phases["devices"].dropna().astype(int).value_counts()
    measured = sorted(counts.index, key=lambda d: (-counts[d], d)) or [1]  # the most measured
    cols = st.columns(2)
    ram = widgets.host_ram(
        cols[0], ram_default * GIB, key="target_ram_gib", help="kept across pages (the Overview's)"
    )
    devices = cols[1].number_input("Devices", 1, 4096, measured[0], key="target_devices")
    return ram, int(devices)


def _verdicts(results: Any, summary: dict, ram: int, devices: int, name: str) -> None:
    """The same sentences, table order and figures as `loadbench recommend`
    (`bench.analysis.advice`)."""
    try:
        target = TargetCheckpoint.from_dict(summary)
        adv = advice.advise(
            results, target, ram, devices, shapes=name, folder=str(data.results_folder())
        )
    except NoResultsError as e:  # nothing (large enough) measured yet: the bench says what to run
        st.warning(f"No prediction: {e}")
        return
    first, *rest = advice.sentences(adv)
    (st.success if adv.rec.recommended else st.error)(first)
    for sentence in rest:
        (st.warning if sentence.startswith("Warning:") else st.markdown)(sentence)
    rows = pd.DataFrame(list(adv.rec.strategies))
    if rows.empty:
        return
    st.altair_chart(charts.target_bars(rows, ram), width="stretch")
    st.dataframe(pd.DataFrame(advice.table_rows(adv)), hide_index=True)
    st.caption(_command(name, ram, devices))


def _command(name: str, ram: int, devices: int) -> str:
    """The `loadbench recommend` line that prints the same figures (custom sizes have none)."""
    if name == CUSTOM:
        return (
            "Custom sizes have no `loadbench recommend` equivalent: it takes a preset, a fetched "
            "name or a spec file (`--shapes`)."
        )
    return (
        f"The same figures in a terminal: `loadbench recommend --shapes {name} "
        f"--host-ram {ram / GIB:.2f}GiB --devices {devices} --results {data.results_folder()}`"
    )


def _sharding(facts: dict | None, devices: int) -> None:
    if not facts:
        return
    st.subheader(f"Sharding over {devices} devices: the largest tensors")
    st.caption(
        "Rule: shard each tensor's largest axis divisible by the device count; replicate the rest."
    )
    table = pd.DataFrame(facts["tensors"])
    if not table.empty:
        table["bytes"] = table["bytes"].map(style.size)
        table["bytes_per_device"] = table["bytes_per_device"].map(style.size)
        st.dataframe(table, hide_index=True)


def main() -> None:
    st.title("Target host")
    st.caption("Predicted peak RSS per strategy on a host you describe, from the measured runs.")
    results = widgets.page_results()
    ram, devices = _host_inputs(results)
    source = st.radio("Shapes from", SOURCES, horizontal=True, key="target_source")
    facts, name = None, CUSTOM
    summary: dict | None
    if source == SOURCES[0]:
        summary, name = _measured_summary(results.phases)
    elif source == SOURCES[1]:
        summary, facts = _spec_summary(devices)
        name = st.session_state.get("target_spec", name)
    else:
        summary = _custom_summary()
    if summary is None:
        return
    st.caption(
        f"checkpoint {style.size(summary['checkpoint_bytes'])} · largest tensor "
        f"{style.size(summary['largest_tensor_bytes'])} · {summary['tensors']} tensors"
    )
    _verdicts(results, summary, ram, devices, name)
    _sharding(facts, devices)


main()
