"""What `loadbench recommend` and the dashboard's Target host page say, worded once.

`advise` runs `bench.analysis.recommend.recommend` and adds what a reader needs around it: the
minimum host RAM in which some strategy fits, a warning when the target is far beyond the largest
measured checkpoint, what the device count changes (or why it changes nothing), and the warm-cache
caveat, and the backend the runs were on. `sentences` gives those as text, in one order, one
short sentence each a user can act on; the CLI prints them and the dashboard shows the same
strings, so the two agree word for word. `details` holds what the fit rests on (heap terms, device
counts, fit errors), for `--json` and the dashboard's expander. `to_json` is `recommend --json`:
it echoes its inputs and names every field (the fitted model under `model`, see
`bench.analysis.recommend`). A table column that says the same on every row is said once under it
(`text_table`).

The first sentence is the judge's decision (`bench.analysis.judge`, worded by
`bench.analysis.decision_words`), as every surface prints it: for a target that is a shape set
measured here, on the host the runs measured it on (no `--probe`, `--accelerator` or disk speed),
the judge weighs the measured rows themselves (`measured_decision`), as the bench summary and the
dashboard's Overview do; else it weighs the predictions. No jax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pandas as pd

from bench.analysis.accelerator import Accelerator, accelerator_sentences, on_accelerator
from bench.analysis.backend import backend_sentence, backends
from bench.analysis.decision_words import decision_json, sentence, to_use
from bench.analysis.fit import FitModel
from bench.analysis.judge import (
    TIGHT_FRACTION,
    Decision,
    TargetHost,
    default_devices,
    judge,
    judge_predictions,
    limits_of,
    lost_of,
    partial_of,
)
from bench.analysis.recommend import (
    MIN_FIT_BYTES,
    Recommendation,
    TargetCheckpoint,
    ok_runs,
    recommend,
)
from bench.analysis.shares import process_label
from bench.errors import NoResultsError
from bench.link import FILE_SOURCE
from bench.records.results import Results, summarize
from bench.units import as_read, column_unit, format_bytes, format_bytes_in
from bench.vocabulary import SPEC, WARM
from loader.vocabulary import PEER, REFERENCE

EXTRAPOLATION_WARN = 2.0  # warn when the target is more than this many times the largest measured
WARM_CACHE = (
    "Times are for a warm page cache: add --cache cold or --disk-read-speed for a cold disk."
)
HEAP = (  # bench.machine.allocator
    "Peaks of {} include the holes glibc's heap kept after the runs here, charged per byte of the "
    "target's tensors under its 32 MiB mmap threshold ({} of them)."
)


@dataclass(frozen=True)
class AdviceInputs:
    """What the advice was asked, echoed under `inputs` by `recommend --json`."""

    shapes: str
    host_ram_bytes: int
    devices: int | None
    results: str  # the results folder fitted on
    cache: str
    disk_read_bytes_per_s: int | None = None  # the fit is on runs with reads capped at this
    probe: str | None = None  # `recommend --probe FILE`: the target host's probe record
    accelerator: bool = False  # `--accelerator`: the weights land in device memory
    device_ram_bytes: int | None = None  # `--device-ram`
    host_ram_text: str | None = None  # `--host-ram` as typed ("4GB")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (optional keys only where they were given)."""
        out = asdict(self)
        del out["host_ram_text"]  # host_ram_bytes says it
        for key in ("disk_read_bytes_per_s", "probe", "device_ram_bytes"):
            if out[key] is None:
                del out[key]
        if not out["accelerator"]:
            del out["accelerator"]
        return out


@dataclass(frozen=True)
class Advice:
    """A recommendation, its inputs, the minimum RAM that fits (None if nothing predicted), the
    backends its runs were on (`bench.analysis.backend`), and the strategies predicted that are
    peers (another project's loader: `loader.vocabulary.PEER`)."""

    inputs: AdviceInputs
    target: TargetCheckpoint
    rec: Recommendation
    minimum_ram_bytes: int | None
    minimum_ram_strategy: str | None
    backends: list[str] = field(default_factory=list)  # the backends the fitted runs were on
    peers: list[str] = field(default_factory=list)  # the strategies of kind PEER fitted on
    # the judge's decision over the measured rows of the target (None: it is not one measured
    # here on this host, or the times were since moved to another host: `decision` judges the
    # predictions then)
    measured: Decision | None = None
    partial: tuple[str, ...] = ()  # the runs fitted on that lost strategies (`partial_runs`)
    lost: tuple[str, ...] = ()  # what they lost, a few words each (`judge.lost_of`)
    limits: tuple[str, ...] = ()  # the limits the runs fitted on ran under (`judge.limits_of`)


def repeats_text(model: FitModel) -> str:
    """The table's "time repeats": the 95% interval its fit measured on its largest shape set,
    relative (`-3% +4% (95% CI, 6 repeats)`), or `1 run` where no shape set was repeated."""
    if model.wall_interval_repeats <= 1:
        return "1 run" if model.most_repeats <= 1 else "no interval"
    low, high = model.wall_interval_low - 1, model.wall_interval_high - 1
    return f"{low:+.0%} {high:+.0%} (95% CI, {model.wall_interval_repeats} repeats)"


def decision(advice: Advice) -> Decision:
    """The judge's decision the advice states: over the measured rows of the target where it is
    one measured here (`Advice.measured`), else over the predictions (peers among them)."""
    if advice.measured is not None:
        return advice.measured
    host = TargetHost(advice.inputs.host_ram_bytes, advice.inputs.devices)
    return judge_predictions(
        advice.rec.strategies,
        host,
        advice.peers,
        partial=advice.partial,
        lost=advice.lost,
        limits=advice.limits,
    )


#: What a checkpoint's headers may add to its tensors' bytes, per tensor (its JSON entry: name,
#: dtype, shape, offsets) and once (the length prefixes, padding, `__metadata__`, an index file).
HEADER_BYTES_PER_TENSOR = 1 << 10
HEADER_BYTES_ONCE = 1 << 20


def of_checkpoint(phases: pd.DataFrame, target: TargetCheckpoint) -> pd.Series:
    """The rows that measured `target`'s very checkpoint: the same number of tensors, the same
    largest one, and its bytes. The rows count the files' bytes, headers included; a target made
    from a shape set (`--shapes`) counts its tensors' bytes alone, one from a file
    (`--checkpoint`) the files' as the rows do: so a row may hold at most a header's worth more
    than the target (`HEADER_BYTES_PER_TENSOR` each, `HEADER_BYTES_ONCE`), never less."""
    extra = pd.to_numeric(phases["checkpoint_bytes"]) - target.checkpoint_bytes
    headers = HEADER_BYTES_ONCE + HEADER_BYTES_PER_TENSOR * target.tensors
    return (
        (extra >= 0)
        & (extra <= headers)
        & (pd.to_numeric(phases["largest_tensor_bytes"]) == target.largest_tensor_bytes)
        & (pd.to_numeric(phases["tensors"]) == target.tensors)
    )


def measured_decision(
    results: Results, target: TargetCheckpoint, host_ram: int, devices: int | None, cache: str
) -> Decision | None:
    """The judge's decision over the measured rows of `target` where a run here measured that
    very checkpoint (its bytes, largest tensor and tensors): the newest such run's summary rows
    of plain loads from the local disk (`cache` where the rows hold several), on `devices`
    devices where measured, else the count with the most strategies (`judge.default_devices`),
    on a host of `host_ram`. None where no run measured it."""
    phases = results.phases
    mine = phases[of_checkpoint(phases, target)]
    if mine.empty:
        return None
    runs = results.runs[results.runs["run_id"].isin(set(mine["run_id"]))]
    newest = runs.sort_values("started_utc", ascending=False)["run_id"]
    run = str(newest.iloc[0]) if len(newest) else str(mine["run_id"].iloc[-1])
    rows = summarize(mine[mine["run_id"] == run])
    rows = rows[
        (rows["model"].fillna(SPEC) == SPEC) & (rows["source"].fillna(FILE_SOURCE) == FILE_SOURCE)
    ]
    if "cache" in rows and (rows["cache"] == cache).any():
        rows = rows[rows["cache"] == cache]
    if rows.empty:
        return None
    count = devices if devices in set(rows["devices"]) else default_devices(rows)
    rows = rows[rows["devices"] == count]
    labels = [process_label(str(s), int(p)) for s, p in zip(rows["strategy"], rows["processes"])]
    decision = judge(rows.assign(strategy=labels), TargetHost(host_ram, count), results)
    return replace(decision, devices_asked=devices) if devices != count else decision


def minimum_ram(peak_bytes: int) -> int:
    """The least host RAM (rounded up to 0.01 GiB) in which `peak_bytes` fits with room to spare."""
    step = (1 << 30) / 100
    return int(math.ceil(peak_bytes / (1 - TIGHT_FRACTION) / step) * step)


@dataclass(frozen=True)
class Cost:
    """One strategy's cost as the answer states it: measured (the dashboard) or predicted."""

    strategy: str
    peak_bytes: int  # peak RSS: what must fit in the host's RAM
    wall_s: float


SAME_MINIMUM = 0.02  # peaks within 2% of the lightest's share its minimum RAM


def at_minimum(costs: list[Cost], pick: str | None = None) -> tuple[int, Cost] | None:
    """About the least host RAM in which some strategy fits, and the strategy that fits there:
    the `pick` where it is one of them (the answer beside it never names another for the same
    RAM), else the fastest. Peaks within `SAME_MINIMUM` of the lightest count as the same
    minimum, and the RAM given is the one the named strategy needs.

    Example:
        >>> at_minimum([Cost("a", 1 << 30, 1.0), Cost("b", (1 << 30) + 4096, 2.0)], "b")[1].strategy
        'b'
    """
    if not costs:
        return None
    lightest = min(c.peak_bytes for c in costs)
    there = [c for c in costs if c.peak_bytes <= lightest * (1 + SAME_MINIMUM)]
    best = min(there, key=lambda c: (c.strategy != pick, c.wall_s))
    return minimum_ram(best.peak_bytes), best


def needs_text(host_ram_bytes: int, costs: list[Cost], naive: Cost | None, pick: str | None) -> str:
    """What the first screen says beside the decision: "Least RAM that fits: M (S'); eager
    needs E and does not fit." `costs` are every candidate's, `naive` the path a user writes
    first (eager), said where measured, not the `pick`, and too big for the host; empty where
    there is nothing to say."""
    least = at_minimum(costs, pick)
    said = [f"Least RAM that fits: {format_bytes(least[0])} ({least[1].strategy})"] if least else []
    if naive is not None and naive.strategy != pick:
        naive_need = minimum_ram(naive.peak_bytes)
        if naive_need > host_ram_bytes:  # the path a user writes first, where it does not fit
            said.append(f"{naive.strategy} needs {format_bytes(naive_need)} and does not fit")
    return ("; ".join(said) + ".") if said else ""


def advise(  # noqa: PLR0913 - each keyword is an input `recommend --json` echoes
    results: Results,
    target: TargetCheckpoint,
    host_ram_bytes: int,
    devices: int | None,
    *,
    shapes: str,
    folder: str,
    cache: str = WARM,
    disk_speed: int | None = None,
    accelerator: Accelerator | None = None,
) -> Advice:
    """`recommend` plus the minimum RAM that fits; `shapes`, `folder`, `cache` are echoed as inputs
    (and `disk_speed` where the fit is on runs with disk reads capped at that speed). With an
    `accelerator`, peaks and verdicts are for a host whose weights land in device memory
    (`bench.analysis.accelerator`, against its device RAM where given)."""
    measured = None
    if accelerator is None and disk_speed is None:
        measured = measured_decision(results, target, host_ram_bytes, devices, cache)
    try:
        rec = recommend(
            results, target, host_ram_bytes, devices, cache=cache, disk_speed=disk_speed
        )
    except NoResultsError:
        if measured is None:
            raise
        rec = Recommendation(None)  # measured only here, under limits, or too small to fit on
    if measured is not None:
        rec = _led_by(rec, measured.pick)
    rows = ok_runs(results, devices, cache, disk_speed)
    device_ram = accelerator.device_ram_bytes if accelerator else None
    if accelerator:
        staged = ok_runs(results, devices, cache, disk_speed, staged=True)
        rec = on_accelerator(rec, results, staged, target, host_ram_bytes, device_ram)
    costs = [Cost(s.strategy, s.predicted_peak_bytes, s.predicted_wall_s) for s in rec.strategies]
    least = at_minimum(costs, rec.recommended)
    inputs = AdviceInputs(
        shapes=shapes,
        host_ram_bytes=int(host_ram_bytes),
        devices=devices,
        results=str(folder),
        cache=cache,
        disk_read_bytes_per_s=int(disk_speed) if disk_speed else None,
        accelerator=accelerator is not None,
        device_ram_bytes=device_ram,
    )
    return Advice(
        inputs,
        target,
        rec,
        least[0] if least else None,
        least[1].strategy if least else None,
        backends(rows[rows["kind"] != REFERENCE]),
        sorted({str(s) for s in rows.loc[rows["kind"] == PEER, "strategy"]}),
        measured,
        partial_of(results, set(rows["run_id"])),
        lost_of(results, set(rows["run_id"])),
        limits_of(results, set(rows["run_id"])),
    )


def _led_by(rec: Recommendation, pick: str | None) -> Recommendation:
    """`rec` with `pick` recommended and first (the measured decision's pick)."""
    first = [s for s in rec.strategies if s.strategy == pick]
    rest = [s for s in rec.strategies if s.strategy != pick]
    return Recommendation(pick, [*first, *rest], rec.unmeasured)


def _measured_counts(advice: Advice) -> tuple[dict[str, tuple[int, ...]], str]:
    used = {s.strategy: s.model.devices for s in advice.rec.strategies}
    return used, ", ".join(str(n) for n in sorted({n for d in used.values() for n in d}))


def _devices_sentence(advice: Advice) -> str | None:
    """One short sentence where the device count changes the answer, else None."""
    wanted = advice.inputs.devices
    used, measured = _measured_counts(advice)
    if not used:  # nothing fitted (the runs here ran under limits): the decision says the rest
        return None
    if wanted is None:
        if "," not in measured:
            return None
        return f"Fits pool runs on {measured} devices; give --devices N to fit on N alone."
    off = sorted(name for name, d in used.items() if d != (wanted,))
    if len(off) == len(used):
        return f"No run here used {wanted} device(s): the fits use runs on {measured}."
    if off:
        return f"{', '.join(off)}: no run on {wanted} device(s); fitted on runs on {measured}."
    return None


def _devices_detail(advice: Advice) -> str:
    """Which device counts each fit used, for `--json`'s details."""
    used, measured = _measured_counts(advice)
    per = "; ".join(f"{k}: {', '.join(map(str, d))}" for k, d in sorted(used.items()))
    return f"Device counts fitted on (measured: {measured}): {per}."


def _ram(advice: Advice) -> str:
    return as_read(advice.inputs.host_ram_text, advice.inputs.host_ram_bytes)


def sentences(advice: Advice) -> list[str]:
    """What to say of `advice`, in order, one short sentence each a user can act on: the judge's
    decision (`decision_words.sentence`: the pick and why, a winning peer's cost and loadbench's
    own best, the unstable ones, one run, a partial run), the backend, minimum RAM,
    extrapolation, devices, caveats. The fit's details are in `details` (`recommend --json`)."""
    out = [sentence(decision(advice)) + "."]
    if advice.inputs.accelerator:
        out += accelerator_sentences(advice.rec, advice.inputs.device_ram_bytes)
    elif advice.backends:
        out.append(backend_sentence(advice.backends))
    if advice.rec.recommended is None and not advice.inputs.accelerator:
        out.append("With a GPU/TPU the weights land in device memory: add --accelerator.")
    if advice.minimum_ram_bytes is not None:
        out.append(
            f"Minimum RAM that fits: {format_bytes(advice.minimum_ram_bytes)} "
            f"({advice.minimum_ram_strategy}, with {TIGHT_FRACTION:.0%} to spare)."
        )
    models = [s.model for s in advice.rec.strategies]
    if models:
        far = max(models, key=lambda m: m.largest_measured_checkpoint_bytes)
        times = advice.target.checkpoint_bytes / far.largest_measured_checkpoint_bytes
        if times > EXTRAPOLATION_WARN:
            out.append(
                f"Warning: {advice.inputs.shapes} is {times:.1f}x the largest checkpoint "
                f"measured ({format_bytes(far.largest_measured_checkpoint_bytes)}); bench a "
                "larger one to check."
            )
    if (said := _devices_sentence(advice)) is not None:
        out.append(said)
    if advice.rec.unmeasured:
        out.append(
            f"Not predicted: {', '.join(advice.rec.unmeasured)} (measured only on checkpoints "
            f"under {format_bytes(MIN_FIT_BYTES)}; bench them on gpt2 or larger)."
        )
    if advice.inputs.cache == WARM:
        out.append(WARM_CACHE)
    return out


def details(advice: Advice) -> list[str]:
    """The fit's details, for `recommend --json` (and the dashboard's expander): what the fits
    pooled and what the peaks include."""
    out = []
    if advice.rec.strategies:
        out.append(_devices_detail(advice))
    heap = [s.strategy for s in advice.rec.strategies if s.model.peak_bytes_per_small_tensor_byte]
    if heap and advice.target.small_tensor_bytes:
        out.append(HEAP.format(", ".join(heap), format_bytes(advice.target.small_tensor_bytes)))
    for s in advice.rec.strategies:
        out.append(
            f"{s.strategy}: fit error {fit_error_text(s.model)}; time repeats "
            f"{repeats_text(s.model)}; {_runs(s.model.runs)} of {', '.join(s.model.shapes)}."
        )
    return out


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def fit_error_text(model: FitModel) -> str:
    """The fit's error where there is out-of-sample evidence (leave one shape set out), else
    "in-sample only": an in-sample error on few shape sets is near 0% by construction."""
    peak, wall = model.peak_error_out_of_sample, model.wall_error_out_of_sample
    if peak is None or wall is None:
        return "in-sample only"
    return f"peak {peak:.0%}, time {wall:.0%} (one shape set left out)"


def table_rows(advice: Advice) -> list[dict[str, Any]]:
    """One row per predicted strategy, in the recommendation's order (the recommended first, then
    fits, then faster); with `--accelerator`, the host peak's basis and the device's peak and
    verdict too. Each column of sizes is in one unit (`column_unit`)."""
    rows = []
    strategies = advice.rec.strategies
    peaks = column_unit(s.predicted_peak_bytes for s in strategies)
    headrooms = column_unit(s.headroom_bytes for s in strategies)
    devices = column_unit(s.device.device_peak_bytes for s in strategies if s.device)
    for s in strategies:
        row: dict[str, Any] = {
            "strategy": s.strategy,
            "verdict": s.verdict,
            "host peak" if s.device else "predicted peak": format_bytes_in(
                s.predicted_peak_bytes, peaks
            ),
            "headroom": format_bytes_in(s.headroom_bytes, headrooms),
        }
        if s.device is not None:
            row["host peak from"] = s.device.host_basis
            row["device peak"] = format_bytes_in(s.device.device_peak_bytes, devices)
            row["device verdict"] = s.device.device_verdict or "give --device-ram"
        row |= {
            "predicted time": f"{s.predicted_wall_s:.2f} s",
            "basis": f"{_runs(s.model.runs)} of {', '.join(s.model.shapes)}",
            "fit error": fit_error_text(s.model),
            "time repeats": repeats_text(s.model),
        }
        rows.append(row)
    return rows


#: Columns kept even where every row says the same: they name and judge each row.
KEY_COLUMNS = ("strategy", "verdict", "predicted peak", "host peak", "predicted time")


def same_on_every_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The columns (other than `KEY_COLUMNS`) whose value is the same on every one of two or more
    rows: a table says them once, in a line under it."""
    if len(rows) < 2:
        return {}
    return {
        k: v
        for k, v in rows[0].items()
        if k not in KEY_COLUMNS and all(str(r[k]) == str(v) for r in rows)
    }


def text_table(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """`rows` as aligned text lines: a header, the rows, then one line per column that says the
    same on every row (`same_on_every_row`)."""
    if not rows:
        return []
    same = same_on_every_row(rows)
    keys = [k for k in rows[0] if k not in same]
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in keys}
    lines = [indent + "  ".join(k.ljust(widths[k]) for k in keys).rstrip()]
    lines += [indent + "  ".join(str(r[k]).ljust(widths[k]) for k in keys).rstrip() for r in rows]
    return lines + [f"{indent}{k}: {v} (every row)" for k, v in same.items()]


def to_text(advice: Advice) -> str:
    """The CLI's text: the target and host, the table (the recommended row first, marked *), then
    the sentences."""
    t = advice.target
    host = f"a host with {_ram(advice)} RAM"
    if advice.inputs.accelerator:
        device = advice.inputs.device_ram_bytes
        memory = format_bytes(device) if device else "device RAM not given"
        host += f" and an accelerator ({memory})"
    lines = [
        f"target {advice.inputs.shapes} ({format_bytes(t.checkpoint_bytes)}, "
        f"{t.tensors} tensors, largest {format_bytes(t.largest_tensor_bytes)}) on {host}:",
        "",
    ]
    rows = table_rows(advice)
    for row in rows:  # the recommended row (first) marked
        row["strategy"] += " *" if row["strategy"] == advice.rec.recommended else ""
    table = text_table(rows)
    if table:
        lines += [*table, ""]
    return "\n".join(lines + sentences(advice)) + "\n"


def to_json(advice: Advice) -> dict[str, Any]:
    """`recommend --json`: inputs, target, `recommended` (the judge's pick), minimum RAM,
    sentences, strategies, the fit's details (`details`) and the backends the runs were on; and
    from the judge's decision: `decision` (its record and sentence,
    `decision_words.decision_json`; every candidate's `unstable` true or false), `ties`,
    `too_close_to_call` (the ties and those not judged on time, for older readers),
    `judged_on_time`, `not_judged_on_time`, `fastest_peer` (the peer picked, with its costs;
    else None) and `best_own` (loadbench's own to use: the pick, or the best beside a peer)."""
    chosen = decision(advice)
    picked = chosen.picked
    return {
        "inputs": advice.inputs.to_dict(),
        "target": advice.target.to_dict(),
        "recommended": chosen.pick,
        "minimum_ram_bytes": advice.minimum_ram_bytes,
        "minimum_ram_strategy": advice.minimum_ram_strategy,
        "notes": sentences(advice),
        "strategies": [s.to_dict() for s in advice.rec.strategies],
        "unmeasured": advice.rec.unmeasured,
        "too_close_to_call": [*chosen.tied, *chosen.unjudged],
        "ties": list(chosen.tied),
        "decision": decision_json(chosen),
        "details": details(advice),
        "backends": advice.backends,
        "judged_on_time": chosen.judged_on_time if chosen.pick else None,
        "not_judged_on_time": list(chosen.unjudged),
        "peers": advice.peers,
        "fastest_peer": picked.to_json() if picked is not None and picked.peer else None,
        "best_own": to_use(chosen),
    }
