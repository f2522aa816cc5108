"""Target host: will this model load on that machine, and with which strategy?

Answers: for chosen shapes (a measured shape set, a preset or fetched spec, or custom sizes), a host
RAM and a device count, each strategy's predicted peak, headroom and verdict (fits / tight / does
not fit) and the recommended strategy, from `bench.recommend` (the model `loadbench recommend`
uses); plus how the sharding rule splits the spec's largest tensors over the devices.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from bench.errors import NoResultsError
from bench.recommend import VERDICTS
from dashboard import charts, data, specs, widgets

SOURCES = ("a measured shape set", "a preset or fetched spec", "custom sizes")
GIB = 1 << 30


@st.cache_data(show_spinner="Listing shape specs…")
def _spec_names() -> list[str]:
    return specs.spec_names()


@st.cache_data(show_spinner="Reading the shape spec…")
def _spec_facts(name: str, devices: int) -> dict:
    return specs.spec_facts(name, devices)


def _measured_summary(phases: pd.DataFrame) -> dict:
    shapes = st.selectbox("Shape set", sorted(phases["shapes"].unique()), key="target_shapes")
    row = phases[phases["shapes"] == shapes].iloc[0]
    return {k: int(row[k]) for k in ("checkpoint_bytes", "largest_tensor_bytes", "tensors")}


def _custom_summary() -> dict:
    cols = st.columns(3)
    ckpt = cols[0].number_input("Checkpoint (GiB)", 0.001, 4096.0, 1.0, key="target_ckpt_gib")
    largest = cols[1].number_input("Largest tensor (MiB)", 0.001, 1e6, 256.0, key="target_largest_mib")  # fmt: skip
    tensors = cols[2].number_input("Tensors", 1, 10_000_000, 200, key="target_tensors")
    return {"checkpoint_bytes": int(ckpt * GIB), "largest_tensor_bytes": int(largest * (1 << 20)), "tensors": int(tensors)}  # fmt: skip


def _spec_summary(devices: int) -> tuple[dict | None, dict | None]:
    """The summary of a chosen preset/fetched spec and its facts (None with an error shown)."""
    try:
        names = _spec_names()
        name = st.selectbox("Spec", names, index=names.index("sa3") if "sa3" in names else 0, key="target_spec")  # fmt: skip
        facts = _spec_facts(name, devices)
    except Exception as e:  # a broken spec or shapes package: say which, keep the page
        st.error(f"Could not read shape specs: {e}")
        return None, None
    return facts["summary"], facts


def _host_inputs(results: Any) -> tuple[int, int]:
    ram_default = float(results.runs["ram_bytes"].max() / GIB) if not results.runs.empty else 16.0
    measured = sorted(int(d) for d in results.phases["devices"].dropna().unique()) or [1]
    cols = st.columns(2)
    ram = cols[0].number_input("Host RAM (GiB)", 0.25, 65536.0, round(ram_default, 2), 0.5, key="target_ram_gib")  # fmt: skip
    devices = cols[1].number_input("Devices", 1, 4096, measured[0], key="target_devices")
    return int(ram * GIB), int(devices)


def _verdicts(results: Any, summary: dict, ram: int, devices: int) -> None:
    try:
        rec = data.recommend(results, summary, ram, devices)
    except NoResultsError as e:  # nothing (large enough) measured yet: the bench says what to run
        st.warning(f"No prediction: {e}")
        return
    rows = pd.DataFrame(list(rec.strategies))
    if rec.unmeasured:
        st.caption(f"Not predicted (measured only on checkpoints too small to extrapolate from): {', '.join(rec.unmeasured)}")  # fmt: skip
    if rec.recommended:
        st.success(f"Recommended: **{rec.recommended}**")
    else:
        st.error(f"No strategy fits in {data.gib(ram)} for a {data.gib(summary['checkpoint_bytes'])} checkpoint.")  # fmt: skip
    if rows.empty:
        return
    groups = {v: sorted(rows.loc[rows["verdict"] == v, "strategy"]) for v in VERDICTS}
    st.markdown(" · ".join(f"**{v}**: {', '.join(s) or '–'}" for v, s in groups.items()))
    st.altair_chart(charts.target_bars(rows, ram), width="stretch")
    table = rows.assign(predicted_peak=rows["predicted_peak_bytes"].map(data.gib), headroom=rows["headroom_bytes"].map(data.gib))  # fmt: skip
    st.dataframe(table[["strategy", "verdict", "predicted_peak", "headroom", "predicted_wall_s"]], hide_index=True)  # fmt: skip


def _sharding(facts: dict | None, devices: int) -> None:
    if not facts:
        return
    st.subheader(f"Sharding over {devices} devices: the largest tensors")
    st.caption("Rule: shard each tensor's largest axis divisible by the device count; replicate the rest.")  # fmt: skip
    table = pd.DataFrame(facts["tensors"])
    if not table.empty:
        table["bytes"] = table["bytes"].map(data.gib)
        table["bytes_per_device"] = table["bytes_per_device"].map(data.gib)
        st.dataframe(table, hide_index=True)


def main() -> None:
    st.title("Target host")
    st.caption("Predicted peak RSS per strategy on a host you describe, from the measured runs.")
    results = widgets.page_results()
    ram, devices = _host_inputs(results)
    source = st.radio("Shapes from", SOURCES, horizontal=True, key="target_source")
    facts = None
    if source == SOURCES[0]:
        summary = _measured_summary(results.phases)
    elif source == SOURCES[1]:
        summary, facts = _spec_summary(devices)
    else:
        summary = _custom_summary()
    if summary is None:
        return
    st.caption(f"checkpoint {data.gib(summary['checkpoint_bytes'])} · largest tensor {data.gib(summary['largest_tensor_bytes'])} · {summary['tensors']} tensors")  # fmt: skip
    _verdicts(results, summary, ram, devices)
    _sharding(facts, devices)


main()
