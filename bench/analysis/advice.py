"""What `loadbench recommend` and the dashboard's Target host page say, worded once.

`advise` runs `bench.analysis.recommend.recommend` and adds what a reader needs around it: the
minimum host RAM in which some strategy fits, a warning when the target is far beyond the largest
measured checkpoint, what the device count changes (or why it changes nothing), and the warm-cache
caveat. `sentences` gives those as text, in one order; the CLI prints them and the dashboard shows
the same strings, so the two agree word for word. `to_json` is `recommend --json`: it echoes its
inputs and names every field (the fitted model under `model`, see `bench.analysis.recommend`). No
jax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from bench.analysis.fit import FitModel
from bench.analysis.recommend import (
    MIN_FIT_BYTES,
    TIGHT_FRACTION,
    Recommendation,
    TargetCheckpoint,
    recommend,
)
from bench.analysis.ties import close_to_recommended, repeats_text, tie_sentences
from bench.records.results import Results
from bench.units import format_bytes
from bench.vocabulary import WARM

EXTRAPOLATION_WARN = 2.0  # warn when the target is more than this many times the largest measured
WARM_CACHE = (
    "Times are as measured: from a warm page cache; a checkpoint the target cannot cache loads at "
    "its disk's speed: predict that with --cache cold or --disk-read-speed."
)
HEAP = (  # bench.host.allocator
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

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (optional keys only where they were given)."""
        out = asdict(self)
        for key in ("disk_read_bytes_per_s", "probe"):
            if out[key] is None:
                del out[key]
        return out


@dataclass(frozen=True)
class Advice:
    """A recommendation, its inputs, and the minimum RAM that fits (None if nothing predicted)."""

    inputs: AdviceInputs
    target: TargetCheckpoint
    rec: Recommendation
    minimum_ram_bytes: int | None
    minimum_ram_strategy: str | None


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


def advise(
    results: Results,
    target: TargetCheckpoint,
    host_ram_bytes: int,
    devices: int | None,
    *,
    shapes: str,
    folder: str,
    cache: str = WARM,
    disk_speed: int | None = None,
) -> Advice:
    """`recommend` plus the minimum RAM that fits; `shapes`, `folder`, `cache` are echoed as inputs
    (and `disk_speed` where the fit is on runs with disk reads capped at that speed)."""
    rec = recommend(results, target, host_ram_bytes, devices, cache=cache, disk_speed=disk_speed)
    costs = [Cost(s.strategy, s.predicted_peak_bytes, s.predicted_wall_s) for s in rec.strategies]
    least = at_minimum(costs)
    inputs = AdviceInputs(
        shapes=shapes,
        host_ram_bytes=int(host_ram_bytes),
        devices=devices,
        results=str(folder),
        cache=cache,
        disk_read_bytes_per_s=int(disk_speed) if disk_speed else None,
    )
    return Advice(
        inputs,
        target,
        rec,
        least[0] if least else None,
        least[1].strategy if least else None,
    )


def _devices_sentence(advice: Advice) -> str:
    wanted = advice.inputs.devices
    used = {s.strategy: s.model.devices for s in advice.rec.strategies}
    measured = ", ".join(str(n) for n in sorted({n for d in used.values() for n in d}))
    if wanted is None:
        return (
            "Devices: not given; each fit pools its strategy's runs on every device count "
            f"measured ({measured})."
        )
    off = sorted(name for name, d in used.items() if d != (wanted,))
    if len(off) == len(used):
        return (
            f"Devices: no run was measured on {wanted} device(s), so the count changes nothing "
            f"here: the fits use runs on {measured} device(s)."
        )
    if not off:
        return (
            f"Devices: every fit uses runs measured on {wanted} device(s); another count picks "
            f"other runs (measured: {measured})."
        )
    return (
        f"Devices: fits use runs measured on {wanted} device(s) where there are any; "
        f"{', '.join(off)} had none there and use runs on {measured} device(s)."
    )


def _verdict_sentence(advice: Advice) -> str:
    ram = format_bytes(advice.inputs.host_ram_bytes)
    best = next((s for s in advice.rec.strategies if s.strategy == advice.rec.recommended), None)
    if best is None:
        return f"No strategy fits in {ram} with {TIGHT_FRACTION:.0%} to spare."
    return (
        f"Recommended: {best.strategy} (predicted peak {format_bytes(best.predicted_peak_bytes)} "
        f"of {ram}, about {best.predicted_wall_s:.2f} s)."
    )


def sentences(advice: Advice) -> list[str]:
    """What to say of `advice`, in order: verdict, minimum RAM, extrapolation, devices, caveats."""
    out = [_verdict_sentence(advice), *tie_sentences(advice.rec)]
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
                f"Warning: {advice.inputs.shapes} is {times:.1f}x beyond the largest measured "
                f"checkpoint ({format_bytes(far.largest_measured_checkpoint_bytes)}); the "
                "predictions extrapolate that far."
            )
        out.append(_devices_sentence(advice))
    if advice.rec.unmeasured:
        out.append(
            f"Not predicted (measured only under {format_bytes(MIN_FIT_BYTES)}): "
            f"{', '.join(advice.rec.unmeasured)}."
        )
    heap = [s.strategy for s in advice.rec.strategies if s.model.peak_bytes_per_small_tensor_byte]
    if heap and advice.target.small_tensor_bytes:
        out.append(HEAP.format(", ".join(heap), format_bytes(advice.target.small_tensor_bytes)))
    if advice.inputs.cache == WARM:
        out.append(WARM_CACHE)
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
    """One row per predicted strategy, in the recommendation's order (fits first, then faster)."""
    return [
        {
            "strategy": s.strategy,
            "verdict": s.verdict,
            "predicted peak": format_bytes(s.predicted_peak_bytes),
            "headroom": format_bytes(s.headroom_bytes),
            "predicted time": f"{s.predicted_wall_s:.2f} s",
            "basis": f"{_runs(s.model.runs)} of {', '.join(s.model.shapes)}",
            "fit error": fit_error_text(s.model),
            "time repeats": repeats_text(s.model),
        }
        for s in advice.rec.strategies
    ]


def to_text(advice: Advice) -> str:
    """The CLI's text: the target, the table, then the sentences."""
    t = advice.target
    lines = [
        f"target {advice.inputs.shapes} ({format_bytes(t.checkpoint_bytes)}, "
        f"{t.tensors} tensors, largest {format_bytes(t.largest_tensor_bytes)}) on a host "
        f"with {format_bytes(advice.inputs.host_ram_bytes)} RAM:",
        "",
    ]
    rows = table_rows(advice)
    if rows:
        widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in rows[0]}
        lines.append("  " + "  ".join(k.ljust(w) for k, w in widths.items()).rstrip())
        lines += [
            "  " + "  ".join(str(r[k]).ljust(w) for k, w in widths.items()).rstrip() for r in rows
        ]
        lines.append("")
    return "\n".join(lines + sentences(advice)) + "\n"


def to_json(advice: Advice) -> dict[str, Any]:
    """`recommend --json`: inputs, target, recommended, minimum RAM, sentences, strategies, and
    the strategies too close to call with the recommended one (`bench.analysis.ties`)."""
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
    }
