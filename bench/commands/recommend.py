"""`loadbench recommend`: the prediction as text or JSON, cold loads, device memory, and `--check`.

- `--cache warm|cold` fits on the runs measured from that page cache (`bench.analysis.recommend`).
  With `--disk-read-speed 1.5GB/s` a cold load is predicted for the target's disk instead: fitted on
  cold runs measured here with disk reads capped at exactly that speed (`bench run --cache cold
  --disk-read-speed 1.5GB/s`) where there are any; else the warm fit plus the checkpoint read at
  that speed, with no overlap of reading and the rest (an upper bound for a streaming strategy,
  about right for one that reads everything first). The measured machine's own cold read speed (the
  reference line's cold runs: bytes over wall) is printed beside.
- Every prediction carries its fit's largest relative error on the runs it was fitted on
  (in-sample: the least error an extrapolation has, not a bound on it), and how far those runs'
  own repeats strayed from their median time ("time repeats": a typical repeat, and the worst):
  cold reads on a virtual disk vary with what the host has cached, and no prediction is closer
  than the machine repeats itself. The recommended strategy's time is said to be too close to
  call with any that fits within a typical repeat's spread of it (`bench.analysis.ties`).
- `--device-ram` predicts each strategy's device peak from runs whose backend reported device
  memory (`phase_device_peak_bytes`, GPU/TPU); where none exist it says so and predicts nothing.
- `--probe TARGET.json` predicts times for the host that wrote that probe (`loadbench probe`):
  `bench.analysis.target`, wired in by `bench.commands.target`; `--check` then simulates that host
  here inside the limits its probe was taken under, and prints predicted against measured.
- `--check` runs, on this machine under a real memory limit of `--host-ram` (`bench run
  --host-ram`), the recommended strategy and every one predicted not to fit, and says whether
  each verdict held (the recommended one must end ok, the others must be killed: oom rows).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pandas as pd

from bench.analysis.advice import Advice, advise, to_json, to_text
from bench.analysis.recommend import Recommendation, ok_runs, rank, spec_summary
from bench.commands.common import add_cache, add_json, add_results
from bench.errors import BenchError
from bench.records.results import Results, read_results
from bench.units import format_bytes, parse_size, parse_speed
from bench.vocabulary import COLD, WARM
from loader.vocabulary import OK, REFERENCE, TOTAL


def cold_adjust(rec: Recommendation, ckpt: int, speed: float) -> Recommendation:
    """`rec` with cold times for a disk of `speed` bytes/s: warm time + checkpoint / speed."""
    cold = [
        replace(
            s,
            predicted_wall_s=s.predicted_wall_s + ckpt / speed,
            model=replace(s.model, disk_read_bytes_per_s=speed),
        )
        for s in rec.strategies
    ]
    return rank(cold, rec.unmeasured)


def measured_cold_speed(results: Results) -> float | None:
    """This machine's cold read speed: checkpoint bytes / median cold wall of the reference line
    (`floor` reads every byte and loads nothing), on the largest checkpoint it read cold."""
    cold = ok_runs(results, cache=COLD)
    cold = cold[cold["kind"] == REFERENCE]
    if cold.empty:
        return None
    biggest = cold[cold["checkpoint_bytes"] == cold["checkpoint_bytes"].max()]
    wall = pd.to_numeric(biggest["wall_s"]).median()
    return float(biggest["checkpoint_bytes"].iloc[0]) / wall if wall > 0 else None


def device_peaks(results: Results, ckpt: int) -> dict[str, int] | None:
    """Predicted device peak per strategy (median device-peak / checkpoint ratio); None: no data."""
    phases = results.phases
    rows = phases[(phases["phase"] == TOTAL) & (phases["status"] == OK)]
    rows = rows[rows["phase_device_peak_bytes"].notna()]
    if rows.empty:
        return None
    ratio = pd.to_numeric(rows["phase_device_peak_bytes"]) / pd.to_numeric(rows["checkpoint_bytes"])
    return {str(k): int(v * ckpt) for k, v in ratio.groupby(rows["strategy"]).median().items()}


def _notes(args, results: Results, speed: float | None, capped: int | None) -> list[str]:
    notes = []
    if capped:
        notes.append(
            f"Times are fitted on cold runs measured here with disk reads capped at "
            f"{capped / 1e6:.0f} MB/s (`bench run --cache cold --disk-read-speed`)."
        )
    elif args.cache == COLD and not speed:
        notes.append("Times are predicted from runs whose page cache was evicted first (cold).")
    cold = measured_cold_speed(results)
    if cold:
        notes.append(
            f"Cold read speed measured here (the reference line, from an evicted page "
            f"cache): {format_bytes(cold)}/s; pass it as --disk-read-speed for a similar disk."
        )
    if speed:
        notes.append(
            f"Cold times for a {format_bytes(speed)}/s disk: warm fit + checkpoint / "
            "speed, no overlap of reading and the rest assumed; measure them instead "
            f"with `bench run --cache cold --disk-read-speed {args.disk_read_speed}`."
        )
    return notes


def _device_note(args, results: Results, ckpt: int) -> tuple[str, dict[str, int] | None]:
    device_ram = parse_size(args.device_ram, what="--device-ram")
    devices = device_peaks(results, ckpt)
    if not devices:
        return (
            "--device-ram: no results from a host whose backend reports device memory (the "
            "CPU backend reports none); device peaks not predicted.",
            None,
        )
    worst = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(devices.items()))
    return f"Predicted device peaks against {format_bytes(device_ram)}: {worst}.", devices


def _basis(args, results: Results) -> tuple[str, int | None, float | None]:
    """(cache, disk cap, speed to add) to fit with: cold runs measured with reads capped at
    `--disk-read-speed` where there are any; else the warm fit plus the read at that speed."""
    speed = (
        parse_speed(args.disk_read_speed, what="--disk-read-speed")
        if args.disk_read_speed
        else None
    )
    if speed and not ok_runs(results, cache=COLD, disk_speed=speed).empty:
        return COLD, speed, None
    return (WARM if speed else args.cache), None, speed


def _advice(args, results: Results, host_ram: int) -> tuple[Advice, float | None, int | None]:
    """The advice, the speed added to warm times (or None), the disk cap fitted on (or None)."""
    cache, capped, speed = _basis(args, results)
    target = spec_summary(args.shapes)
    if ok_runs(results, cache=cache, disk_speed=capped).empty:
        raise BenchError(
            f"no ok {cache} runs in {args.results}/ to predict from; run `make bench SHAPES=gpt2 "
            f'RESULTS={args.results} BENCH_ARGS="--cache {cache}"` (or sa3) first'
        )
    adv = advise(
        results,
        target,
        host_ram,
        args.devices,
        shapes=args.shapes,
        folder=args.results,
        cache=cache,
        disk_speed=capped,
    )
    if speed:
        adv = replace(adv, rec=cold_adjust(adv.rec, target.checkpoint_bytes, speed))
    return adv, speed, capped


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench recommend`: exit 0 with a recommendation (and checks held), 1 otherwise."""
    from bench.commands import target
    from bench.run.checks import positive

    positive(args.devices, "--devices", "8")
    there = target.target_probe(args)
    host_ram = parse_size(target.host_ram(args, there), what="--host-ram")
    results = read_results(args.results)
    adv, speed, capped = _advice(args, results, host_ram)
    notes, devices = _notes(args, results, speed, capped), None
    if there is not None:
        adv, _, said = target.on_target(args, results, adv, there)
        notes = said + notes
    if args.device_ram:
        note, devices = _device_note(args, results, adv.target.checkpoint_bytes)
        notes.append(note)
    if args.json:
        out = to_json(adv)
        out["notes"] += notes
        print(
            json.dumps({**out, **({"device_peaks": devices} if args.device_ram else {})}, indent=1)
        )
    else:
        print(to_text(adv) + "".join(n + "\n" for n in notes), end="")
    held = True
    if args.check and there is not None:
        held = target.check_target(adv, args, there)
    elif args.check:
        from bench.commands.check import check

        held = check(adv.rec, args, host_ram)
    return 0 if adv.rec.recommended and held else 1


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench recommend`."""
    p = sub.add_parser("recommend", help="predict peak RAM and time on a target host")
    p.add_argument("--shapes", required=True, help="preset, fetched name, spec path or HF repo id")
    p.add_argument("--host-ram", help="target host RAM, e.g. 4GiB (default: the --probe's)")
    p.add_argument(
        "--probe",
        help="the target host's probe (`loadbench probe --out`): predict times there; with "
        "--check, simulate it here inside its probe's limits",
    )
    p.add_argument("--devices", type=int, default=None)
    add_results(p)
    add_cache(p, both=False, help="predict a load from a warm (default) or cold page cache")
    p.add_argument("--disk-read-speed", help="the target's disk, e.g. 1.5GB/s: predict cold loads")
    p.add_argument("--device-ram", help="the target's device memory, e.g. 80GiB")
    p.add_argument(
        "--check",
        action="store_true",
        help="run the recommended strategy and every one predicted not to fit under "
        "a real --host-ram limit here, and say whether the verdicts held",
    )
    add_json(p)
    p.set_defaults(func=run_cli)
    return p
