"""Target host: will this model load on that machine, and with which strategy?

Answers: for chosen shapes (a measured shape set, a preset or fetched spec, or custom sizes), a
host RAM and a device count, each strategy's predicted peak, headroom and verdict (fits / tight /
does not fit) and the recommended strategy, from `bench.analysis.recommend` (the model `loadbench
recommend` uses); plus how the sharding rule splits the spec's largest tensors over the devices.

With the target's probe (`loadbench probe --out FILE.json` there, uploaded here) it is `loadbench
recommend --probe FILE.json`: the RAM and CPUs are the probe's, each strategy's time is predicted
for that host from a warm or cold page cache (`bench.analysis.target`), and the page says what was
extrapolated from what. The file is read by the CLI's reader, so it refuses the same files with
the same one-line message.

Over a link (`loadbench recommend --link`, `bench.analysis.remote`): where the results hold remote
loads over shaped links, which concurrency each link wants (the fastest, and the default's place
on the curve), and for a link typed in, each strategy's predicted time and host peak there, with
the sentence saying from which links and runs it was extrapolated.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import streamlit as st

from bench.analysis import advice
from bench.analysis.accelerator import Accelerator
from bench.analysis.judge import default_devices
from bench.analysis.recommend import TargetCheckpoint
from bench.analysis.remote import (
    LinkPrediction,
    basis_sentence,
    concurrency_curves,
    predict_link,
)
from bench.analysis.target import on_target, target_cpus, target_ram
from bench.errors import BenchError, NoResultsError
from bench.link.shaping import Link
from bench.machine.record import ProbeFileError, ProbeRecord, parse_probe
from bench.records.results import partial_runs
from bench.vocabulary import COLD, WARM
from dashboard import charts, data, link, specs, style, widgets
from dashboard.target_words import ACCELERATOR, DEVICE_RAM, LOAD_FROM, page_words

CUSTOM = "custom sizes"
SOURCES = ("a measured shape set", "a preset or fetched spec", CUSTOM)
SOURCE = link.choice("source", dict(zip(SOURCES, ("measured", "spec", "custom"), strict=True)))
GIB = 1 << 30
DEFAULT_LINK = "1Gbit"


@dataclass(frozen=True)
class TargetProbe:
    """The target host's probe as uploaded: the record, its file's name, the cache to predict."""

    record: ProbeRecord
    name: str
    cache: str  # WARM or COLD


def _probe_input() -> TargetProbe | None:
    """The uploaded probe (None without one); a refused file stops the page with its message."""
    upload = st.file_uploader(
        "Target host's probe (optional)",
        type=["json"],
        key="target_probe",
        help="`loadbench probe --out FILE.json`, run on the target: predicts times there, "
        "within its RAM and CPUs (`loadbench recommend --probe FILE.json`). A file cannot "
        "travel in a link: after opening one, upload the probe again",
    )
    if upload is None:
        return None
    try:
        record = parse_probe(upload.getvalue(), upload.name)
    except ProbeFileError as e:  # the CLI's one-line refusal, never a traceback
        st.error(str(e))
        st.stop()
    cache = link.bound(
        "target_cache",
        link.CACHE,
        WARM,
        lambda: st.radio(
            LOAD_FROM,
            (WARM, COLD),
            horizontal=True,
            key="target_cache",
            help="cold: the checkpoint read from the target's disk (the probe's cold read speed)",
        ),
        valid=(WARM, COLD).__contains__,
        omit=WARM,
    )
    return TargetProbe(record, upload.name, str(cache))


@st.cache_data(show_spinner="Listing shape specs…")
def _spec_names() -> list[str]:
    return specs.spec_names()


@st.cache_data(show_spinner="Reading the shape spec…")
def _spec_facts(name: str, devices: int) -> dict:
    return specs.spec_facts(name, devices)


def _measured_summary(phases: pd.DataFrame) -> tuple[dict, str]:
    shapes = widgets.pick_shapes(phases, key="target_shapes")
    row = phases[phases["shapes"] == shapes].iloc[0]
    summary = {k: int(row[k]) for k in ("checkpoint_bytes", "largest_tensor_bytes", "tensors")}
    small = row.get("small_tensor_bytes")
    return summary | ({} if pd.isna(small) else {"small_tensor_bytes": int(small)}), shapes


def _custom_summary() -> dict:
    cols = st.columns(3)
    ckpt = link.bound(
        "target_ckpt_gib",
        link.CHECKPOINT,
        1.0,
        lambda: cols[0].number_input("Checkpoint (GiB)", 0.001, 4096.0, key="target_ckpt_gib"),
        valid=lambda v: 0.001 <= v <= 4096,
        omit=1.0,
    )
    largest = link.bound(
        "target_largest_mib",
        link.LARGEST,
        256.0,
        lambda: cols[1].number_input("Largest tensor (MiB)", 0.001, 1e6, key="target_largest_mib"),
        valid=lambda v: 0.001 <= v <= 1e6,
        omit=256.0,
    )
    tensors = link.bound(
        "target_tensors",
        link.TENSORS,
        200,
        lambda: cols[2].number_input("Tensors", 1, 10_000_000, key="target_tensors"),
        valid=lambda v: 1 <= v <= 10_000_000,
        omit=200,
    )
    return {
        "checkpoint_bytes": int(ckpt * GIB),
        "largest_tensor_bytes": int(largest * (1 << 20)),
        "tensors": int(tensors),
    }


def _spec_summary(devices: int) -> tuple[dict | None, dict | None]:
    """The summary of a chosen preset/fetched spec and its facts (None with an error shown)."""
    try:
        names = _spec_names()
        name = link.bound(
            "target_spec",
            link.SPEC,
            "sa3" if "sa3" in names else names[0],
            lambda: st.selectbox("Spec", names, key="target_spec"),
            valid=names.__contains__,
        )
        facts = _spec_facts(name, devices)
    except Exception as e:  # a broken spec or shapes package: say which, keep the page
        st.error(f"Could not read shape specs: {e}")
        return None, None
    return facts["summary"], facts


def _host_inputs(results: Any, probe: TargetProbe | None) -> tuple[int, int]:
    ram_default = float(results.runs["ram_bytes"].max() / GIB) if not results.runs.empty else 16.0
    measured = [default_devices(data.summarize(results.phases)) or 1]  # as `recommend` takes
    cols = st.columns(2)
    if probe is None:
        ram = widgets.host_ram(
            cols[0],
            ram_default * GIB,
            key="target_ram_gib",
            help="kept across pages (the Overview's)",
        )
    else:
        ram = target_ram(probe.record)
        cols[0].markdown(_probe_host(probe.record, ram))
    devices = link.bound(
        "target_devices",
        link.DEVICES,
        int(measured[0]),
        lambda: cols[1].number_input("Devices", 1, 4096, key="target_devices"),
        valid=lambda n: 1 <= n <= 4096,
    )
    return ram, int(devices)


def _probe_host(record: ProbeRecord, ram: int) -> str:
    """What the page takes from the probe: the target's RAM and CPUs."""
    return (
        f"Target `{record.machine}` (probe `{record.probe_id}`): {style.size(ram)} RAM (its "
        f"memory limit, else its RAM) and {target_cpus(record):g} CPUs"
    )


def _advise(
    results: Any,
    summary: dict,
    host: tuple[int, int],
    name: str,
    probe: TargetProbe | None,
    accelerator: Accelerator | None,
) -> tuple[advice.Advice, list[str]]:
    """`loadbench recommend`'s advice (with `--probe`: its times on the target) and the
    sentences saying how the times were extrapolated (none without a probe)."""
    target = TargetCheckpoint.from_dict(summary)
    folder = str(data.results_folder())
    cache = probe.cache if probe else WARM
    ram, devices = host
    adv = advice.advise(
        results,
        target,
        ram,
        devices,
        shapes=name,
        folder=folder,
        cache=cache,
        accelerator=accelerator,
    )
    if probe is None:
        return adv, []
    adv, _, said = on_target(results, folder, adv, probe.record, probe.name)
    return adv, said


def _accelerator() -> Accelerator | None:
    """`loadbench recommend --accelerator`: the target's weights land in device memory (its
    device RAM, where given, gets a verdict of its own); None for a host like the runs'."""
    cols = st.columns([2, 1])
    on = link.bound(
        "target_accelerator",
        link.ACCELERATOR,
        False,
        lambda: cols[0].toggle(
            ACCELERATOR,
            key="target_accelerator",
            help="`loadbench recommend --accelerator`: the host holds the staged path's ring, the "
            "device the model; predicted from CPU staged runs where no device run backs it",
        ),
        omit=False,
    )
    if not on:
        return None
    gib = link.bound(
        "target_device_ram_gib",
        link.DEVICE_RAM,
        0.0,
        lambda: cols[1].number_input(
            DEVICE_RAM, 0.0, 4096.0, step=1.0, key="target_device_ram_gib"
        ),
        valid=lambda v: 0 <= v <= 4096,
        omit=0.0,
    )
    return Accelerator(int(gib * GIB) if gib else None)


def _for_devices(results: Any, devices: int) -> tuple[Any, list[str]]:
    """The results to predict `devices` devices from, and a sentence on what was left out: on
    one device, a strategy that splits tensors across devices (`sharded`, `sharded-dir`:
    registered as multi-process) has nothing to split, so it is left out unless it was measured
    on one device."""
    if devices != 1:
        return results, []
    phases = results.phases
    splitting = data.multiprocess_strategies()
    on_one = set(phases.loc[phases["devices"] == 1, "strategy"])
    out = sorted(set(phases["strategy"]) & splitting - on_one)
    if not out:
        return results, []
    asked = results.runs["strategies"].map(  # the runs no longer ask for them either: a run
        lambda names: [n for n in names if n not in out] if isinstance(names, list) else names
    )  # is not called partial for what the page leaves out
    kept = replace(
        results,
        phases=phases[~phases["strategy"].isin(out)],
        runs=results.runs.assign(strategies=asked),
    )
    return kept, [
        f"Not listed: {', '.join(out)} (they split tensors across devices, and one device has "
        "nothing to split; measured only on more)."
    ]


def _verdicts(
    results: Any, summary: dict, host: tuple[int, int], name: str, probe: TargetProbe | None
) -> None:
    """The same sentences, table order and figures as `loadbench recommend`
    (`bench.analysis.advice`; with a probe, `bench.analysis.target`)."""
    accelerator = _accelerator()
    partial = _partial(results)
    results, left_out = _for_devices(results, host[1])
    try:
        adv, said = _advise(results, summary, host, name, probe, accelerator)
    except NoResultsError as e:  # nothing (large enough) measured yet: the bench says what to run
        st.warning(page_words(f"No prediction: {e}"))
        return
    except BenchError as e:  # no time model or no here-probe to scale from, no disk figure there
        st.error(page_words(str(e)))
        return
    first, *rest = advice.sentences(adv)  # the verdict sentence: `loadbench recommend`'s own
    (st.success if adv.rec.recommended else st.error)(page_words(first))
    for sentence in [*rest, *left_out]:
        (st.warning if sentence.startswith("Warning:") else st.markdown)(page_words(sentence))
    for sentence in said:
        st.info(page_words(sentence), icon=":material/dns:")
    rows = pd.DataFrame(list(adv.rec.strategies))
    if rows.empty:
        return
    st.altair_chart(charts.target_bars(rows, host[0]), width="stretch")
    table = pd.DataFrame(advice.table_rows(adv))
    st.dataframe(table.map(lambda v: page_words(v) if isinstance(v, str) else v), hide_index=True)
    with st.expander("What the fit rests on"):  # `recommend --json`'s details
        st.markdown("\n".join(f"- {page_words(d)}" for d in advice.details(adv)))
    st.caption(_command(name, host, probe, accelerator, partial=bool(partial)))


def _partial(results: Any) -> list[str]:
    """The runs that hold part of what they were asked (`partial_runs`, and files or lines
    that could not be read), each said once: the page answers from what is there, where
    `recommend` asks for `--allow-partial`."""
    lost = partial_runs(results)
    if results.errors:
        lost.append(f"{len(results.errors)} file(s) or line(s) could not be read (said above)")
    for line in lost:
        st.warning(f"Answering from part of a run: {line}.", icon="⚠️")
    return lost


def _command(
    name: str,
    host: tuple[int, int],
    probe: TargetProbe | None,
    accelerator: Accelerator | None,
    *,
    partial: bool,
) -> str:
    """The `loadbench recommend` line that prints the same figures (custom sizes have none)."""
    if name == CUSTOM:
        return (
            "Custom sizes have no `loadbench recommend` equivalent: it takes a preset, a fetched "
            "name or a spec file (`--shapes`)."
        )
    ram, devices = host
    target = (
        f"--probe {probe.name} --cache {probe.cache}" if probe else f"--host-ram {ram / GIB:.2f}GiB"
    )
    if accelerator is not None:
        target += " --accelerator"
        if accelerator.device_ram_bytes:
            target += f" --device-ram {accelerator.device_ram_bytes / GIB:g}GiB"
    if partial:  # `recommend` refuses part of a run unless told
        target += " --allow-partial"
    folder = shlex.quote(str(data.results_folder()))
    return (
        f"The same figures in a terminal: `loadbench recommend --shapes {shlex.quote(name)} "
        f"{target} --devices {devices} --results {folder}`"
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


def _links(results: Any, summary: dict | None, name: str) -> None:
    """Over a link: the concurrency each measured link wants, and a typed-in link's prediction
    (for the chosen shapes' bytes where there are some), as `recommend --link` prints them."""
    curves = concurrency_curves(results)
    if not curves:
        return
    st.subheader("Over a link")
    for curve in curves:
        st.markdown(curve.sentence())
    points = [
        {
            "source": c.source,
            "link": c.link,
            "shapes": c.shapes,
            "strategy": c.label,  # `sharded (2 processes)`: each process count its own curve
            "concurrency": p.concurrency,
            "wall (median)": style.seconds(p.wall_s),
            "wall (min-max)": f"{style.seconds(p.wall_s_min)} - {style.seconds(p.wall_s_max)}",
            "x ceiling": style.ratio(p.ceiling_ratio),
            "runs": p.runs,
        }
        for c in curves
        for p in c.points
    ]
    st.dataframe(pd.DataFrame(points), hide_index=True)
    text = link.bound(
        "target_link",
        link.LINK,
        DEFAULT_LINK,
        lambda: st.text_input("Predict over a link", key="target_link"),
        omit=DEFAULT_LINK,
    )
    try:
        over = Link.parse(text)
        nbytes = int(summary["checkpoint_bytes"]) if summary else None
        predictions = predict_link(results, over, nbytes)
    except BenchError as e:
        st.error(str(e))
        return
    st.dataframe(_prediction_table(predictions), hide_index=True)
    st.markdown(basis_sentence(predictions))
    st.caption(f"The same in a terminal: `{link_command(over.text, name, data.results_folder())}`")


def _prediction_table(predictions: list[LinkPrediction]) -> pd.DataFrame:
    """`recommend --link`'s table, each figure with its unit."""
    return pd.DataFrame(
        [
            {
                "strategy": p.label,
                "source": p.source,
                "predicted wall": style.seconds(p.predicted_wall_s)
                + (" (at least)" if p.lower_bound else ""),
                "host peak": style.size(p.predicted_peak_bytes),
                "from link": f"{p.basis_link} at concurrency {p.basis_concurrency}",
                "x ceiling there": style.ratio(p.basis_ceiling_ratio),
            }
            for p in predictions
        ]
    )


def link_command(text: str, name: str, folder: Any) -> str:
    """The `loadbench recommend --link` line that predicts the same link for the same shapes
    (custom sizes have no name to give: the results' own shape set is predicted)."""
    shapes = "" if name == CUSTOM else f" --shapes {shlex.quote(name)}"
    return (
        f"loadbench recommend --link {shlex.quote(text)}{shapes} "
        f"--results {shlex.quote(str(folder))}"
    )


def main() -> None:
    st.title("Target host")
    st.caption(
        "Predicted peak RSS per strategy on a host you describe, from the measured runs; with "
        "that host's probe, its RAM, its CPUs and the time there."
    )
    results = widgets.page_results()
    probe = _probe_input()
    ram, devices = _host_inputs(results, probe)
    source = link.bound(
        "target_source",
        SOURCE,
        SOURCES[0],
        lambda: st.radio("Shapes from", SOURCES, horizontal=True, key="target_source"),
        omit=SOURCES[0],
    )
    facts, name = None, CUSTOM
    summary: dict | None
    if source == SOURCES[0]:
        summary, name = _measured_summary(results.phases)
    elif source == SOURCES[1]:
        summary, facts = _spec_summary(devices)
        name = st.session_state.get("target_spec", name)
    else:
        summary = _custom_summary()
    if summary is not None:
        st.caption(
            f"checkpoint {style.size(summary['checkpoint_bytes'])} · largest tensor "
            f"{style.size(summary['largest_tensor_bytes'])} · {summary['tensors']} tensors"
        )
        _verdicts(results, summary, (ram, devices), name, probe)
        _sharding(facts, devices)
    _links(results, summary, name)


main()
