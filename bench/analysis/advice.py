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
from dataclasses import dataclass
from typing import Any

from bench.analysis.recommend import (
    MIN_FIT_BYTES,
    TIGHT_FRACTION,
    Recommendation,
    recommend,
)
from bench.records.results import Results
from bench.units import format_bytes
from bench.vocabulary import WARM

EXTRAPOLATION_WARN = 2.0  # warn when the target is more than this many times the largest measured
WARM_CACHE = (
    "Times are as measured: from a warm page cache; a checkpoint the target cannot cache loads at "
    "its disk's speed: predict that with --cache cold or --disk-read-speed."
)


@dataclass(frozen=True)
class Advice:
    """A recommendation, its inputs, and the minimum RAM that fits (None if nothing predicted)."""

    inputs: dict[str, Any]
    target: dict[str, int]
    rec: Recommendation
    minimum_ram_bytes: int | None
    minimum_ram_strategy: str | None


def minimum_ram(peak_bytes: int) -> int:
    """The least host RAM (rounded up to 0.01 GiB) in which `peak_bytes` fits with room to spare."""
    step = (1 << 30) / 100
    return int(math.ceil(peak_bytes / (1 - TIGHT_FRACTION) / step) * step)


def advise(
    results: Results,
    target: dict[str, int],
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
    lightest = min(rec.strategies, key=lambda s: s.predicted_peak_bytes, default=None)
    inputs = {
        "shapes": shapes,
        "host_ram_bytes": int(host_ram_bytes),
        "devices": devices,
        "results": str(folder),
        "cache": cache,
    }
    if disk_speed:
        inputs["disk_read_bytes_per_s"] = int(disk_speed)
    return Advice(
        inputs,
        dict(target),
        rec,
        minimum_ram(lightest.predicted_peak_bytes) if lightest else None,
        lightest.strategy if lightest else None,
    )


def _devices_sentence(advice: Advice) -> str:
    wanted = advice.inputs["devices"]
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
    ram = format_bytes(advice.inputs["host_ram_bytes"])
    best = next((s for s in advice.rec.strategies if s.strategy == advice.rec.recommended), None)
    if best is None:
        return f"No strategy fits in {ram} with {TIGHT_FRACTION:.0%} to spare."
    return (
        f"Recommended: {best.strategy} (predicted peak {format_bytes(best.predicted_peak_bytes)} "
        f"of {ram}, about {best.predicted_wall_s:.2f} s)."
    )


def sentences(advice: Advice) -> list[str]:
    """What to say of `advice`, in order: verdict, minimum RAM, extrapolation, devices, caveats."""
    out = [_verdict_sentence(advice)]
    if advice.minimum_ram_bytes is not None:
        out.append(
            f"Minimum RAM that fits: {format_bytes(advice.minimum_ram_bytes)} "
            f"({advice.minimum_ram_strategy}, with {TIGHT_FRACTION:.0%} to spare)."
        )
    models = [s.model for s in advice.rec.strategies]
    if models:
        far = max(models, key=lambda m: m.largest_measured_checkpoint_bytes)
        times = advice.target["checkpoint_bytes"] / far.largest_measured_checkpoint_bytes
        if times > EXTRAPOLATION_WARN:
            out.append(
                f"Warning: {advice.inputs['shapes']} is {times:.1f}x beyond the largest measured "
                f"checkpoint ({format_bytes(far.largest_measured_checkpoint_bytes)}); the "
                "predictions extrapolate that far."
            )
        out.append(_devices_sentence(advice))
    if advice.rec.unmeasured:
        out.append(
            f"Not predicted (measured only under {format_bytes(MIN_FIT_BYTES)}): "
            f"{', '.join(advice.rec.unmeasured)}."
        )
    if advice.inputs.get("cache", WARM) == WARM:
        out.append(WARM_CACHE)
    return out


def table_rows(advice: Advice) -> list[dict[str, Any]]:
    """One row per predicted strategy, in the recommendation's order (fits first, then faster)."""
    return [
        {
            "strategy": s.strategy,
            "verdict": s.verdict,
            "predicted peak": format_bytes(s.predicted_peak_bytes),
            "headroom": format_bytes(s.headroom_bytes),
            "predicted time": f"{s.predicted_wall_s:.2f} s",
            "basis": f"{s.model.runs} runs of {', '.join(s.model.shapes)}",
            "fit error": f"peak {s.model.peak_error:.0%}, time {s.model.wall_error:.0%}",
            "time repeats": f"±{s.model.wall_repeat_spread:.0%}",
        }
        for s in advice.rec.strategies
    ]


def to_text(advice: Advice) -> str:
    """The CLI's text: the target, the table, then the sentences."""
    t = advice.target
    lines = [
        f"target {advice.inputs['shapes']} ({format_bytes(t['checkpoint_bytes'])}, "
        f"{t['tensors']} tensors, largest {format_bytes(t['largest_tensor_bytes'])}) on a host "
        f"with {format_bytes(advice.inputs['host_ram_bytes'])} RAM:",
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
    """`recommend --json`: inputs, target, recommended, minimum RAM, sentences, strategies."""
    return {
        "inputs": advice.inputs,
        "target": advice.target,
        "recommended": advice.rec.recommended,
        "minimum_ram_bytes": advice.minimum_ram_bytes,
        "minimum_ram_strategy": advice.minimum_ram_strategy,
        "notes": sentences(advice),
        "strategies": [s.to_dict() for s in advice.rec.strategies],
        "unmeasured": advice.rec.unmeasured,
    }
