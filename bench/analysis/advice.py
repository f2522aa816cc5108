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
(`text_table`). Where the recommended strategy is a peer (another project's loader), the sentences
say so with what it costs and then name the best of loadbench's own (`bench.analysis.ties.
own_choice`); where time could not be judged (one run), they say so (`judged_on_time`). No jax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.analysis.accelerator import Accelerator, accelerator_sentences, on_accelerator
from bench.analysis.backend import backend_sentence, backends
from bench.analysis.fit import FitModel
from bench.analysis.predictions import choice as rec_choice
from bench.analysis.recommend import (
    MIN_FIT_BYTES,
    TIGHT_FRACTION,
    Recommendation,
    TargetCheckpoint,
    ok_runs,
    recommend,
)
from bench.analysis.ties import close_to_recommended, own_choice, repeats_text, tie_sentences
from bench.analysis.verdicts import Choice
from bench.records.results import Results
from bench.units import as_read, format_bytes
from bench.vocabulary import WARM
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
    ratio: float | None = None  # peak over baseline, as a multiple of the checkpoint


SAME_MINIMUM = 0.02  # peaks within 2% of the lightest's share its minimum RAM


def at_minimum(costs: list[Cost]) -> tuple[int, Cost] | None:
    """About the least host RAM in which some strategy fits, and the fastest strategy that fits
    there: peaks within `SAME_MINIMUM` of the lightest count as the same minimum, and the RAM
    given is the one the named strategy needs."""
    if not costs:
        return None
    lightest = min(c.peak_bytes for c in costs)
    there = [c for c in costs if c.peak_bytes <= lightest * (1 + SAME_MINIMUM)]
    best = min(there, key=lambda c: c.wall_s)
    return minimum_ram(best.peak_bytes), best


def _seconds(s: float) -> str:
    """`1.47 s`; `12 ms` under a tenth of a second (where 2 decimals would read `0.01 s`)."""
    return f"{s:.2f} s" if s >= 0.1 else f"{s * 1000:.0f} ms"


def _cost_text(c: Cost) -> str:
    ratio = f" ({c.ratio:.2f}× checkpoint)" if c.ratio is not None and c.ratio == c.ratio else ""
    return f"{format_bytes(c.peak_bytes)} peak{ratio}, {_seconds(c.wall_s)}"


def answer(host_ram_bytes: int, best: Cost | None, costs: list[Cost], naive: Cost | None) -> str:
    """The first screen's sentence: "On H: use S — P peak (r× checkpoint), T s; needs at least
    M (S'); eager needs E and does not fit." `best` is the fastest that fits (None: none does),
    `costs` every candidate, `naive` the path a user writes first (eager), if measured."""
    ram = format_bytes(host_ram_bytes)
    least = at_minimum(costs)
    need = f"needs at least {format_bytes(least[0])} ({least[1].strategy})" if least else ""
    if best is None:
        return f"On {ram}: no strategy fits with {TIGHT_FRACTION:.0%} to spare; {need}."
    text = f"On {ram}: use {best.strategy} — {_cost_text(best)}; {need}"
    if naive is not None and naive.strategy != best.strategy:
        naive_need = format_bytes(minimum_ram(naive.peak_bytes))
        fits = minimum_ram(naive.peak_bytes) <= host_ram_bytes
        how = f"fits, in {_seconds(naive.wall_s)}" if fits else "does not fit"
        text += f"; {naive.strategy} needs {naive_need} and {how}"
    return text + "."


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
    rec = recommend(results, target, host_ram_bytes, devices, cache=cache, disk_speed=disk_speed)
    rows = ok_runs(results, devices, cache, disk_speed)
    device_ram = accelerator.device_ram_bytes if accelerator else None
    if accelerator:
        staged = ok_runs(results, devices, cache, disk_speed, staged=True)
        rec = on_accelerator(rec, results, staged, target, host_ram_bytes, device_ram)
    costs = [Cost(s.strategy, s.predicted_peak_bytes, s.predicted_wall_s) for s in rec.strategies]
    least = at_minimum(costs)
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
    )


def _measured_counts(advice: Advice) -> tuple[dict[str, tuple[int, ...]], str]:
    used = {s.strategy: s.model.devices for s in advice.rec.strategies}
    return used, ", ".join(str(n) for n in sorted({n for d in used.values() for n in d}))


def _devices_sentence(advice: Advice) -> str | None:
    """One short sentence where the device count changes the answer, else None."""
    wanted = advice.inputs.devices
    used, measured = _measured_counts(advice)
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


def _verdict_sentence(advice: Advice) -> str:
    ram = format_bytes(advice.inputs.host_ram_bytes)
    best = next((s for s in advice.rec.strategies if s.strategy == advice.rec.recommended), None)
    if best is None:
        return f"No strategy fits in {ram} with {TIGHT_FRACTION:.0%} to spare."
    if best.device is not None:
        return (
            f"Recommended: {best.strategy} (host peak {format_bytes(best.predicted_peak_bytes)} "
            f"of {ram}, device peak {format_bytes(best.device.device_peak_bytes)}, about "
            f"{best.predicted_wall_s:.2f} s)."
        )
    return (
        f"Recommended: {best.strategy} (predicted peak {format_bytes(best.predicted_peak_bytes)} "
        f"of {ram}, about {best.predicted_wall_s:.2f} s)."
    )


def _own(advice: Advice) -> Choice | None:
    """The choice among loadbench's own, with the recommended peer beside it (None: none fits)."""
    return own_choice(advice.rec, advice.peers)


def peer_sentences(advice: Advice) -> list[str]:
    """Where a peer (another project's loader) is the fastest that fits, or the recommended one:
    that it is one, what it costs, and the best of loadbench's own (the one to use in one's own
    code), with the rule's sentence for it."""
    rec = advice.rec
    own = _own(advice)
    if own is not None and own.fastest_peer is not None:
        return [own.sentence]
    if rec.recommended is None or rec.recommended not in advice.peers:
        return []
    peer = next(s for s in rec.strategies if s.strategy == rec.recommended)
    cost = f"{format_bytes(peer.predicted_peak_bytes)} host RAM peak"
    if peer.device is not None:
        cost += f" and {format_bytes(peer.device.device_peak_bytes)} device peak"
    said = f"{peer.strategy} is a peer (another project's loader): it costs {cost}"
    if own is None:
        return [f"{said}; none of loadbench's own strategies fits"]
    return [
        f"{said}; of loadbench's own strategies, use {own.best.strategy} "
        f"({own.best.costs_text}): {own.own_sentence}"
    ]


def sentences(advice: Advice) -> list[str]:
    """What to say of `advice`, in order, one short sentence each a user can act on: verdict,
    ties (or time not judged: one run), a recommended peer's cost and loadbench's own best, the
    backend, minimum RAM, extrapolation, devices, caveats. The fit's details are in `details`
    (`recommend --json`)."""
    out = [_verdict_sentence(advice), *tie_sentences(advice.rec), *peer_sentences(advice)]
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
    verdict too."""
    rows = []
    for s in advice.rec.strategies:
        row: dict[str, Any] = {
            "strategy": s.strategy,
            "verdict": s.verdict,
            "host peak" if s.device else "predicted peak": format_bytes(s.predicted_peak_bytes),
            "headroom": format_bytes(s.headroom_bytes),
        }
        if s.device is not None:
            row["host peak from"] = s.device.host_basis
            row["device peak"] = format_bytes(s.device.device_peak_bytes)
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
    """`recommend --json`: inputs, target, recommended, minimum RAM, sentences, strategies, and
    the strategies too close to call with the recommended one (`bench.analysis.ties`), the fit's
    details (`details`) and the backends the runs were on; whether time was judged (False: one
    run, `not_judged_on_time` names those), the peers, the fastest peer that fits where it is
    faster than all of loadbench's own (`fastest_peer`, with its costs; else None) and the best of
    loadbench's own (`best_own`, with its choice: `best_own_choice`)."""
    chosen = rec_choice(advice.rec.strategies)
    own = _own(advice)
    peer = own.fastest_peer if own else None
    return {
        "inputs": advice.inputs.to_dict(),
        "target": advice.target.to_dict(),
        "recommended": advice.rec.recommended,
        "minimum_ram_bytes": advice.minimum_ram_bytes,
        "minimum_ram_strategy": advice.minimum_ram_strategy,
        "notes": sentences(advice),
        "strategies": [s.to_dict() for s in advice.rec.strategies],
        "unmeasured": advice.rec.unmeasured,
        "too_close_to_call": [s.strategy for s in close_to_recommended(advice.rec)],
        # the one tie rule's answer (`bench.analysis.verdicts`): the strategies tied with the
        # recommended one on time (their 95% intervals overlap), and its sentence
        "ties": [s.strategy for s in close_to_recommended(advice.rec, judged=True)],
        "choice": chosen.to_dict() if chosen else None,
        "details": details(advice),
        "backends": advice.backends,
        "judged_on_time": chosen.judged_on_time if chosen else None,
        "not_judged_on_time": [c.strategy for c in chosen.unjudged] if chosen else [],
        "peers": advice.peers,
        "fastest_peer": peer.to_dict() if peer else None,
        "best_own": own.best.strategy if own else None,
        "best_own_choice": own.to_dict() if own else None,
    }
