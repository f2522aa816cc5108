"""`recommend --probe TARGET.json [--check]`: predict for the host that wrote a probe, and check it.

The prediction is `bench.analysis.target` (the times; peaks and verdicts as `recommend` always
gives them). `--check` simulates the target here: it runs every predicted strategy on the target
shape set inside the limits under which the target's probe was taken (its `--cpus`, its
`--disk-read-speed` for a cold load, its `--host-ram`), `CHECK_REPEATS` times each, interleaved,
and prints predicted against measured time and peak, per strategy, with the error, and whether
the ranking held: every pair of strategies the prediction called apart was measured in its
predicted order (`bench.analysis.judge`; the pairs too close to call are listed, and whether the
strict order matched). Those rows land in the results folder with their limits (never fitted on).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd

from bench.analysis import target as target_times
from bench.analysis.advice import Advice
from bench.analysis.judge import check_ranking
from bench.analysis.target import TargetTime, target_ram
from bench.errors import BenchError
from bench.machine.record import ProbeRecord, read_probe
from bench.records.results import Results, read_results
from bench.run.config import RunConfig
from bench.units import format_bytes
from bench.vocabulary import COLD, OK
from loader.options import NO_OPTIONS, LoadOptions
from loader.vocabulary import TOTAL

CHECK_REPEATS = 3


def target_probe(args: argparse.Namespace) -> ProbeRecord | None:
    """The probe `--probe` names (None without it); refuses a read speed beside it."""
    if not getattr(args, "probe", None):  # a Namespace made without the option
        return None
    if args.disk_read_speed:
        raise BenchError(
            "--probe already gives the target's disk speed (its cold_read_bytes_per_s, measured "
            "inside its own --disk-read-speed); drop --disk-read-speed"
        )
    return read_probe(args.probe)


def host_ram(args: argparse.Namespace, probe: ProbeRecord | None) -> str | int:
    """`--host-ram`, else the probe's memory limit or RAM."""
    if args.host_ram:
        return args.host_ram
    if probe is None:
        raise BenchError("give --host-ram (the target host's RAM, e.g. 16GiB) or --probe FILE")
    return target_ram(probe)


def on_target(
    args: argparse.Namespace, results: Results, adv: Advice, there: ProbeRecord
) -> tuple[Advice, dict[str, TargetTime], list[str]]:
    """The advice with times for the target, the times, and the sentences saying how."""
    return target_times.on_target(results, args.results, adv, there, str(args.probe))


def _config(
    args: argparse.Namespace, there: ProbeRecord, strategies: list[str], options: LoadOptions
) -> RunConfig:
    cold = args.cache == COLD
    return RunConfig(
        shapes=[args.shapes],
        strategies=strategies,
        repeats=CHECK_REPEATS,
        cache=args.cache,
        cpus=there.cpus,
        disk_read_bytes_per_s=there.disk_read_limit_bytes_per_s if cold else None,
        host_ram_bytes=there.host_ram_bytes,
        out=Path(args.results),
        argv=["recommend --probe --check"],
        options=options,
    )


def _measured(totals: pd.DataFrame, strategy: str) -> tuple[float, float] | None:
    rows = totals[(totals["strategy"] == strategy) & (totals["status"] == OK)]
    if rows.empty:
        return None
    walls, peaks = pd.to_numeric(rows["wall_s"]), pd.to_numeric(rows["peak_rss_bytes"])
    return float(statistics.median(walls)), float(statistics.median(peaks))


def check_target(
    adv: Advice, args: argparse.Namespace, there: ProbeRecord, options: LoadOptions = NO_OPTIONS
) -> bool:
    """Run the predicted strategies inside the target's limits; print predicted vs measured."""
    from bench.run.runner import run_bench

    names = [s.strategy for s in adv.rec.strategies]
    limits = f"cpus {there.cpus or 'all'}, disk cap {there.disk_read_limit_bytes_per_s or 'none'}"
    print(f"\nsimulating the target here ({limits}, cache {args.cache}): {', '.join(names)}")
    phases = read_results(run_bench(_config(args, there, names, options)).jsonl).phases
    totals = phases[(phases["phase"] == TOTAL) & (phases["process_index"] <= 0)]
    measured = {}
    for s in adv.rec.strategies:
        got = _measured(totals, s.strategy)
        if got is None:
            print(f"  {s.strategy:<12} no ok run")
            continue
        measured[s.strategy] = got
        wall, peak = got
        print(
            f"  {s.strategy:<12} time predicted {s.predicted_wall_s:7.2f} s, measured "
            f"{wall:7.2f} s ({s.predicted_wall_s / wall - 1:+.0%}); peak predicted "
            f"{format_bytes(s.predicted_peak_bytes)}, measured {format_bytes(int(peak))} "
            f"({s.predicted_peak_bytes / peak - 1:+.0%})"
        )
    return _ranking(adv, {name: wall for name, (wall, _) in measured.items()})


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{a} < {b}" for a, b in pairs) or "none"


def _ranking(adv: Advice, walls: dict[str, float]) -> bool:
    """Print the predicted and measured order, and whether the pairs called apart held."""
    got = check_ranking(adv.rec.strategies, walls)
    by_time = {s.strategy: s.predicted_wall_s for s in adv.rec.strategies}
    predicted = sorted(walls, key=by_time.__getitem__)
    fastest = sorted(walls, key=walls.__getitem__)
    strict = "the same" if predicted == fastest else "not the same"
    word = "held" if got.held else f"DID NOT HOLD (measured the other way: {_pairs(got.reversed)})"
    print(f"ranking by time: predicted {predicted}, measured {fastest} ({strict} order)")
    print(f"  pairs called apart: {_pairs(got.called)}: {word}")
    close = _pairs(got.too_close)
    print(f"  too close to call (the 95% interval of their ratio holds 1, or one run): {close}")
    return got.held
