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
  than the machine repeats itself.
- The answer is the judge's decision (`bench.analysis.judge`, one sentence from
  `bench.analysis.decision_words`), the same record the bench summary and the dashboard render:
  for a shape set measured here (no `--probe`, `--accelerator` or `--disk-read-speed`), over the
  measured rows themselves; else over the predictions. A candidate of one run has no interval:
  the sentence says "one run: not judged on time" (never that it ties) and `--json` says
  `judged_on_time: false`, naming them under `not_judged_on_time`. Peers (another project's
  loader) are candidates: where one wins, the sentence names it with its host RAM peak (and device
  peak where known), then the best of loadbench's own (`--json`: `decision`, `recommended`,
  `best_own`, `peers`); every candidate says `unstable` true or false.
- `--accelerator` answers for a host whose weights land in device memory
  (`bench.analysis.accelerator`): the host peak from the staged path's measured ring and baseline,
  the device peak from the model and its largest transient (or from device runs), and both
  verdicts, against `--device-ram` where given. A `--probe` of a host with an accelerator does the
  same, its device memory standing in for `--device-ram`. Without `--accelerator`, `--device-ram`
  predicts each strategy's device peak from runs whose backend reported device memory
  (`phase_device_peak_bytes`, GPU/TPU); where none exist it says so and predicts nothing.
- The target is `--shapes` (a preset, fetched name, spec path or HF repo id) or `--checkpoint PATH`
  (your own checkpoint, as `bench run --checkpoint` took it); without either, the one shape set
  the results folder holds.
- `--probe TARGET.json` predicts times for the host that wrote that probe (`loadbench probe`):
  `bench.analysis.target`, wired in by `bench.commands.target`; `--check` then simulates that host
  here inside the limits its probe was taken under, and prints predicted against measured.
- `--link 1Gbit` predicts each remote-loaded strategy's time and host peak over that link from
  the runs measured over shaped links (`bench.analysis.remote`: the closest measured link's
  wall / ceiling times this link's ceiling), says from which links and runs in one sentence, and
  which concurrency each measured link wants (the fastest, and the default's place). Without
  remote runs over a shaped link it says so in one line (exit 2).
- The load options that tell runs apart (`--budget`, `--threads`, `--cache-policy`, `--share`:
  the rows of `loader.options.TABLE` that name `recommend`, their flags made by
  `bench.commands.common.add_load_options`) answer for a load with them: a strategy that takes
  one is fitted on its runs made with that value only, one that does not is kept as measured
  (`bench.analysis.asked`), and a note says so. Where no run of a strategy that takes it was made
  with it, the answer is one line saying what its runs there ran with and the `bench run` command
  that makes them (exit 2), never an answer from runs that did not use it.
- `--check` runs, on this machine under a real memory limit of `--host-ram` (`bench run
  --host-ram`), the recommended strategy and every one predicted not to fit, and says whether
  each verdict held (the recommended one must end ok, the others must be killed: oom rows).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

from bench.analysis.accelerator import Accelerator
from bench.analysis.advice import Advice, advise, decision, to_json, to_text
from bench.analysis.asked import Unmeasured, made_with, takers
from bench.analysis.decision_words import details
from bench.analysis.judge import limits_of
from bench.analysis.recommend import (
    TargetCheckpoint,
    cold_adjust,
    device_peaks,
    measured_cold_speed,
    ok_runs,
    spec_summary,
)
from bench.commands import common
from bench.commands.common import (
    add_cache,
    add_json,
    add_load_options,
    add_results,
    asked_options,
    example,
    given_flags,
)
from bench.errors import BenchError, NoResultsError
from bench.machine.accelerator import NONE
from bench.machine.record import ProbeRecord
from bench.records.results import Results
from bench.units import format_bytes, format_rate, parse_size, parse_speed
from bench.vocabulary import COLD, WARM
from loader.options import COUNT, RECOMMEND, SIZE, LoadOptions, Option


def _notes(args, results: Results, speed: float | None, capped: int | None) -> list[str]:
    """One short sentence each on how the times were made."""
    notes = []
    if capped:
        notes.append(f"Times are from cold runs here with reads capped at {format_rate(capped)}.")
    elif args.cache == COLD and not speed:
        notes.append("Times are from runs whose page cache was evicted first (cold).")
    cold = measured_cold_speed(results)
    if cold:
        notes.append(
            f"This disk reads {format_bytes(cold)}/s cold: pass that as --disk-read-speed for a "
            "similar disk."
        )
    if speed:
        notes.append(
            f"Cold times add the checkpoint read at {format_bytes(speed)}/s to the warm fit: "
            f"measure them with `bench run --cache cold --disk-read-speed {args.disk_read_speed}`."
        )
    return notes


def _device_note(args, results: Results, ckpt: int) -> tuple[str, dict[str, int] | None]:
    device_ram = parse_size(args.device_ram, what="--device-ram")
    devices = device_peaks(results, ckpt)
    if not devices:
        return (
            "No run here reported device memory (the CPU backend reports none): add "
            "--accelerator for predicted device peaks.",
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


def _take_probe_accelerator(args: argparse.Namespace, there: ProbeRecord | None) -> None:
    """A target probe that saw an accelerator answers as `--accelerator` does, its device memory
    standing in for `--device-ram` where that was not given."""
    if there is not None and there.accelerator != NONE:
        args.accelerator = True
        args.device_ram = args.device_ram or there.device_memory_bytes


def _accelerator(args: argparse.Namespace) -> Accelerator | None:
    """`--accelerator` (with `--device-ram`), or None for a CPU-only host."""
    if not getattr(args, "accelerator", False):
        return None
    ram = parse_size(args.device_ram, what="--device-ram") if args.device_ram else None
    return Accelerator(ram)


def infer_shapes(args: argparse.Namespace, results: Results) -> str:
    """`--shapes`, else the one shape set of the results folder's ok runs (an error naming them
    where there are several, or none)."""
    if args.shapes:
        return str(args.shapes)
    rows = ok_runs(results)
    found = sorted({str(s) for s in rows["shapes"]}) if len(rows) else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise BenchError(
            f"no ok runs in {args.results}/ to predict from; run `make bench SHAPES=gpt2 "
            f"RESULTS={args.results}` (or sa3) first"
        )
    raise BenchError(
        f"{args.results}/ holds runs of {len(found)} shape sets ({', '.join(found)}): say which "
        "to predict for with --shapes NAME (or --checkpoint PATH)"
    )


def named_target(args: argparse.Namespace) -> tuple[str, TargetCheckpoint] | None:
    """(the target's name, its sizes) from `--checkpoint PATH`'s headers or `--shapes`; None where
    neither was given (the results folder's one shape set is the target: `infer_shapes`)."""
    if getattr(args, "checkpoint", None):
        from bench.run.user_checkpoint import open_checkpoint

        ck = open_checkpoint(args.checkpoint)
        sizes = (ck.checkpoint_bytes, ck.largest_tensor_bytes, ck.tensors, ck.small_tensor_bytes)
        return ck.label, TargetCheckpoint(*sizes)
    if args.shapes:
        return str(args.shapes), spec_summary(args.shapes)
    return None


def _advice(
    args, results: Results, host_ram: int, named: tuple[str, TargetCheckpoint] | None
) -> tuple[Advice, float | None, int | None]:
    """The advice, the speed added to warm times (or None), the disk cap fitted on (or None)."""
    cache, capped, speed = _basis(args, results)
    if named is None:
        shapes = infer_shapes(args, results)
        named = shapes, spec_summary(shapes)
    name, target = named
    try:
        adv = advise(
            results,
            target,
            host_ram,
            args.devices,
            shapes=name,
            folder=args.results,
            cache=cache,
            disk_speed=capped,
            accelerator=_accelerator(args),
        )
    except NoResultsError as e:
        if not ok_runs(results, cache=cache, disk_speed=capped).empty:
            raise
        raise BenchError(_nothing_to_fit(args.results, results, cache)) from e
    adv = replace(adv, inputs=replace(adv.inputs, host_ram_text=args.host_ram))
    if speed:  # the times of another disk: the judge weighs the predictions
        rec = cold_adjust(adv.rec, target.checkpoint_bytes, speed)
        adv = replace(adv, rec=rec, measured=None)
    return adv, speed, capped


def _nothing_to_fit(folder: str, results: Results, cache: str) -> str:
    """Why no run here can be fitted on, and the one command that gives runs that can: where
    the runs ran under limits (`--host-ram`, `--cpus`: left out of a prediction, since a limit
    changes the peak and time), it says which and that the command runs without them."""
    limits = limits_of(results, set(results.runs["run_id"])) if not results.runs.empty else ()
    run = f"loadbench bench run --shapes gpt2 --cache {cache} --out {folder}"
    if limits:
        return (
            f"no ok {cache} run in {folder}/ to predict from: its runs ran under "
            f"{', '.join(limits)}, which a prediction leaves out (a limit changes the peak and the "
            f"time); run `{run}` (no limits) first, then this command again"
        )
    return f"no ok {cache} run in {folder}/ to predict from; run `{run}` (or sa3) first"


#: The options `--link` answers without (each refused beside it in one line, never dropped).
LINK_REFUSES = ("probe", "check", "accelerator", "disk_read_speed", "device_ram", "devices")


def link_answer(args: argparse.Namespace) -> int:
    """`recommend --link BW`: each strategy's predicted time and host peak over that link, from
    which runs, and the concurrency each measured link wants (`bench.analysis.remote`)."""
    from bench.analysis.remote import link_prediction, prediction_lines
    from bench.link.shaping import Link

    for name in LINK_REFUSES:
        if getattr(args, name, None):
            flag = "--" + name.replace("_", "-")
            raise BenchError(f"{flag} is not taken with --link: predict over a link without it")
    link = Link.parse(args.link)
    options = asked_options(args, RECOMMEND)  # a bad value is said before anything is read
    if args.shapes and getattr(args, "checkpoint", None):
        raise BenchError("give --shapes or --checkpoint, not both: they name the target")
    named = named_target(args)
    host_ram = parse_size(args.host_ram, what="--host-ram") if args.host_ram else None
    results, asked = made_with_asked(args, read_whole(args), options)
    predictions, curves = link_prediction(
        results, link, named[1].checkpoint_bytes if named else None
    )
    if args.json:
        out = {
            "link": link.text,
            "predictions": [p.to_dict() for p in predictions],
            "basis": prediction_lines(predictions)[-1],
            "concurrency": [c.to_dict() for c in curves],
            **_asked_json(options),
        }
        print(json.dumps(out, indent=1))
    else:
        lines = prediction_lines(predictions, host_ram) + [c.sentence() for c in curves] + asked
        print("\n".join(lines))
    return 0


def read_whole(args: argparse.Namespace) -> Results:
    """The results folder, refused (unless `--allow-partial`) where a run lost strategies or
    rows: an answer from part of a run would name the best of what is left, not of what was
    measured (`bench.commands.common.read_whole`)."""
    allow_partial = getattr(args, "allow_partial", False)  # a caller's Namespace may lack it
    return common.read_whole([args.results], allow_partial=allow_partial)


def made_with_asked(
    args: argparse.Namespace, results: Results, options: LoadOptions
) -> tuple[Results, list[str]]:
    """`results` narrowed to the runs made with the load `options` asked (`--budget 16MiB`, ...:
    `bench.analysis.asked`), and a note saying so (none where none was asked).

    Raises:
        BenchError: an option that no run of a strategy taking it was made with, naming the
            `bench run` command that makes them.
    """
    if not options.given():
        return results, []
    narrowed, unmeasured = made_with(results, options)
    typed = given_flags(args, RECOMMEND)
    if unmeasured:
        raise BenchError(_unmeasured(args, results, unmeasured[0], typed))
    return narrowed, [
        f"Fitted on the runs made with {' '.join(typed.values())} (a strategy that does not "
        "take it: as measured)."
    ]


def _asked_json(options: LoadOptions) -> dict[str, Any]:
    """`--json`'s `options`: the load options asked, by name (where any was)."""
    return {"options": options.given()} if options.given() else {}


def _said(option: Option, value: Any) -> str:
    """A value a run ran with, as the answers print it (None: the load chose)."""
    if value is None:
        return "the load's own choice"
    if option.cli == SIZE:
        return format_bytes(int(value))
    return str(int(value)) if option.cli == COUNT else str(value)


def _unmeasured(
    args: argparse.Namespace, results: Results, missing: Unmeasured, typed: dict[str, str]
) -> str:
    """Why no answer for `missing`: what the runs there ran with, and the command that makes
    runs with every option asked."""
    if getattr(args, "checkpoint", None):
        target = f"--checkpoint {args.checkpoint}"
    else:
        target = f"--shapes {args.shapes or _shapes_here(args, results)}"
    run = f"loadbench bench run {target} {' '.join(typed.values())} --out {args.results}"
    flag = typed[missing.option.name]
    if not missing.takers:
        names = sorted(takers(missing.option.name))
        who = f"{', '.join(names)} {'does' if len(names) == 1 else 'do'}"
        return (
            f"no run in {args.results}/ was made with {flag}: no strategy measured there takes "
            f"it ({who}); measure them with `{run} --strategies {','.join(names)}`, then ask "
            "again"
        )
    values = ", ".join(_said(missing.option, v) for v in missing.measured)
    return (
        f"no run in {args.results}/ was made with {flag}: its runs of "
        f"{', '.join(missing.takers)} there ran with {values}; measure them with `{run}`, then "
        "ask again"
    )


def _shapes_here(args: argparse.Namespace, results: Results) -> str:
    """The results' one shape set, or NAME where they hold several (`infer_shapes`)."""
    try:
        return infer_shapes(args, results)
    except BenchError:
        return "NAME"


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench recommend`: exit 0 with a recommendation (and checks held), 1 otherwise."""
    from bench.commands import target
    from bench.run.checks import positive

    if getattr(args, "link", None):
        return link_answer(args)
    positive(args.devices, "--devices", "8")
    options = asked_options(args, RECOMMEND)  # a bad value is said before anything is read
    there = target.target_probe(args)
    host_ram = parse_size(target.host_ram(args, there), what="--host-ram")
    args.accelerator = getattr(args, "accelerator", False)
    if args.shapes and getattr(args, "checkpoint", None):
        raise BenchError("give --shapes or --checkpoint, not both: they name the target")
    named = named_target(args)  # a bad --shapes or --checkpoint is said first
    results, asked = made_with_asked(args, read_whole(args), options)
    _take_probe_accelerator(args, there)
    adv, speed, capped = _advice(args, results, host_ram, named)
    notes, devices, how = asked + _notes(args, results, speed, capped), None, []
    if there is not None:
        adv, _, said = target.on_target(args, results, adv, there)
        notes, how = said[:1] + notes, said[1:]  # how the times were scaled: a detail
    if args.device_ram and not args.accelerator:
        note, devices = _device_note(args, results, adv.target.checkpoint_bytes)
        notes.append(note)
    if args.json:
        out = to_json(adv)
        out["notes"] += notes
        out["details"] += how
        devices_json = {"device_peaks": devices} if args.device_ram else {}
        print(json.dumps({**out, **_asked_json(options), **devices_json}, indent=1))
    else:
        verbose = [f"Details: {details(decision(adv))}."] if getattr(args, "verbose", False) else []
        print(to_text(adv) + "".join(n + "\n" for n in [*notes, *verbose]), end="")
    held = True
    if args.check and there is not None:
        held = target.check_target(adv, args, there, options)
    elif args.check:
        from bench.commands.check import check

        held = check(adv.rec, args, host_ram, options)
    return 0 if adv.rec.recommended and held else 1


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench recommend`."""
    p = sub.add_parser(
        "recommend",
        help="predict peak RAM and time on a target host",
        description="Predict each measured strategy's peak RAM and load time for a checkpoint on "
        "a target host, from the runs in a results folder, and name the fastest that fits.",
        **example("loadbench recommend --shapes sa3-medium --host-ram 4GiB --accelerator"),
    )
    p.add_argument(
        "--shapes",
        help="the target: a preset, fetched name, spec path or HF repo id (default: the one shape "
        "set in --results)",
    )
    p.add_argument(
        "--checkpoint",
        help="the target: your own checkpoint (a .safetensors file, a folder of shards or an "
        "*.index.json), as `bench run --checkpoint` took it",
    )
    p.add_argument(
        "--host-ram",
        help="target host RAM, e.g. 4GiB (4GB = 4*10^9 bytes, taken as written; default: the "
        "--probe's)",
    )
    p.add_argument(
        "--accelerator",
        action="store_true",
        help="the target has a GPU/TPU: the weights land in device memory; host peaks from the "
        "staged path's ring (predicted from CPU staged runs)",
    )
    p.add_argument(
        "--probe",
        help="the target host's probe (`loadbench probe --out`): predict times there; with "
        "--check, simulate it here inside its probe's limits",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=None,
        help="fit on runs measured with this many devices where there are any (default: all)",
    )
    add_results(p)
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="answer although a run in --results lost strategies or lines (each is still said)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="print the details behind the answer too: each candidate's interval, the measure "
        "ranked, the ratios of the tied, the runner-up (as --json's decision.details)",
    )
    add_cache(p, both=False, help="predict a load from a warm (default) or cold page cache")
    add_load_options(p, RECOMMEND)
    p.add_argument("--disk-read-speed", help="the target's disk, e.g. 1.5GB/s: predict cold loads")
    p.add_argument(
        "--device-ram",
        help="the target's device memory, e.g. 80GiB: a device verdict (with --accelerator)",
    )
    p.add_argument(
        "--link",
        help="predict each strategy's load over a link of this bandwidth, e.g. 1Gbit, from the "
        "runs measured over shaped links (`bench run --source http --link BW`)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="run the recommended strategy and every one predicted not to fit under "
        "a real --host-ram limit here, and say whether the verdicts held",
    )
    add_json(p)
    p.set_defaults(func=run_cli)
    return p
