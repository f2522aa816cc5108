"""`loadbench probe`: measure this host's ceiling (copy and disk bandwidth, cores, RAM, limits).

The record it writes (`--out FILE.json`, bench/SCHEMA.md "Probe record") is what `recommend
--probe` scales a prediction with, and what `bench run` holds every row against.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.commands.common import add_json, example
from bench.errors import BenchError
from bench.machine.record import ProbeRecord
from bench.units import format_bytes, format_rate, significant

FULL_BYTES, QUICK_BYTES = 1 << 30, 256 << 20
FULL_REPEATS, QUICK_REPEATS = 3, 2


def _rate(value: float | None) -> str:
    return "–" if value is None else format_rate(value)


def _by_threads(figures: dict[str, float]) -> str:
    return ", ".join(f"{n}: {significant(v / (1 << 30))}" for n, v in figures.items())


def _prefix(r: ProbeRecord) -> str:
    passes = r.cold_read_pass_bytes
    if passes is None or passes >= r.probe_file_bytes:
        return ""
    return f"; passes of the first {format_bytes(passes)}"


def _touch_sizes(r: ProbeRecord) -> str:
    larger = {int(n): v for n, v in r.first_touch.items() if int(n) > r.probe_file_bytes}
    return "".join(f" ({format_bytes(n)} at once: {_rate(v)})" for n, v in sorted(larger.items()))


def format_probe(r: ProbeRecord) -> str:
    """The probe record as a few lines of text."""
    cold = f"{_rate(r.cold_read_bytes_per_s)} with {r.cold_read_threads} threads"
    lines = [
        f"probe {r.probe_id} on {r.machine} ({r.duration_s:.1f} s)",
        f"  warm copy   {_rate(r.warm_copy_bytes_per_s)} with {r.warm_copy_threads} threads"
        f"  (GiB/s by threads: {_by_threads(r.warm_copy)})",
        f"  cold read   {cold if r.cold_read else '– (no disk probed)'}"
        + (
            f"  ({r.cold_read_method}; {_by_threads(r.cold_read)}{_prefix(r)})"
            if r.cold_read
            else ""
        ),
        f"  disk        {r.disk_path or '–'} (device {r.disk_device or 'none'})",
        *_prefault_line(r),
        f"  first touch {_rate(r.first_touch_bytes_per_s)}{_touch_sizes(r)}, memcpy "
        f"{_rate(r.memcpy_bytes_per_s)}"
        f", one core {r.single_core_ops_per_s / 1e6:.1f} M loop steps/s",
        f"  CPUs        {r.effective_cpus} usable of {r.cpu_count}"
        f" (quota {r.cpu_quota_cpus or 'none'}), RAM {format_bytes(r.ram_bytes)}"
        f", memory.max {format_bytes(r.memory_max_bytes) if r.memory_max_bytes else 'none'}",
        f"  accelerator {r.accelerator}"
        + (
            f" x{r.device_count} ({r.device_kind}): host->device pageable "
            f"{_rate(r.h2d_pageable_bytes_per_s)} (one array), pinned "
            f"{_rate(r.h2d_pinned_bytes_per_s)}"
            if r.accelerator != "none"
            else ""
        ),
        *_h2d_lines(r),
    ]
    return "\n".join(lines + [f"  note: {n}" for n in r.notes]) + "\n"


def _prefault_line(r: ProbeRecord) -> list[str]:
    """How the copy passes faulted fresh pages in, and the reused-buffer read beside them."""
    if r.prefault is None and r.warm_read_reused_bytes_per_s is None:
        return []
    reused = (
        f"; into reused buffers {_rate(r.warm_read_reused_bytes_per_s)} with "
        f"{r.warm_read_reused_threads} threads (GiB/s by threads: "
        f"{_by_threads(r.warm_read_reused)})"
        if r.warm_read_reused_bytes_per_s is not None
        else ""
    )
    return [f"  prefault    {r.prefault or '–'}{reused}"]


def _h2d_lines(r: ProbeRecord) -> list[str]:
    """Host -> device rates by piece size, one line per in-flight mode, the best, the
    compiler's first use, the pinned route."""
    if not r.h2d:
        return []
    out = []
    for mode, by_piece in r.h2d.items():
        label = "as one list" if mode == "list" else f"{mode} in flight"
        cells = ", ".join(
            f"{format_bytes(int(p))}: {_rate(v)}" for p, v in sorted(by_piece.items(), key=_num)
        )
        out.append(f"    {label:<12} by piece: {cells}")
    if r.h2d_best_bytes_per_s is not None and r.h2d_best_piece_bytes is not None:
        best = r.h2d_best_in_flight
        how = "as one list" if best == "list" else f"{best} in flight"
        out.append(
            f"    best         {_rate(r.h2d_best_bytes_per_s)} "
            f"({format_bytes(r.h2d_best_piece_bytes)} pieces, {how})"
        )
    if r.first_compile_s is not None:
        grew = r.first_compile_host_bytes
        out.append(
            f"    compiler     first program {r.first_compile_s:.2f} s, host "
            f"+{format_bytes(grew) if grew is not None else '–'} (once a process, kept)"
        )
    if r.h2d_pinned_fill_bytes_per_s is not None:
        route = r.h2d_pinned_route or "refused (see the note)"
        out.append(
            f"    pinned_host  numpy -> pinned {_rate(r.h2d_pinned_fill_bytes_per_s)}, "
            f"pinned -> device: {route}"
        )
    return out


def _num(item: tuple[str, float]) -> int:
    return int(item[0])


def _options(args: argparse.Namespace):
    from bench.machine.child import ProbePlan
    from bench.machine.run import ProbeOptions
    from bench.run.config import checkpoints_dir
    from bench.units import parse_size, parse_speed

    size = parse_size(args.size, what="--size") if args.size else None
    size = size or (QUICK_BYTES if args.quick else FULL_BYTES)
    ram = parse_size(args.host_ram, what="--host-ram") if args.host_ram else None
    if ram is not None:
        size = min(size, ram // 4)
    speed = None
    if args.disk_read_speed:
        if args.no_disk:
            raise BenchError("--disk-read-speed caps the disk, and --no-disk probes none")
        speed = parse_speed(args.disk_read_speed, what="--disk-read-speed")
    if args.results and args.no_disk:
        raise BenchError(
            "--results keeps the probe for `bench run`, whose ceilings need a disk's figures; "
            "--no-disk probes none: drop one of them"
        )
    disk = None if args.no_disk else (args.disk or str(checkpoints_dir()))
    if disk is not None and args.disk is None:
        Path(disk).mkdir(parents=True, exist_ok=True)
    plan = ProbePlan(
        disk=disk, file_bytes=size, repeats=QUICK_REPEATS if args.quick else FULL_REPEATS
    )
    return ProbeOptions(plan, args.cpus, ram, speed, tuple(["loadbench", *args.argv]))


def cmd_probe(args: argparse.Namespace) -> int:
    """`loadbench probe`: probe, print, and write the record to `--out` and into the results
    folder `--results`, where given."""
    from bench.machine.record import write_probe
    from bench.machine.run import probe_host

    options = _options(args)
    record = probe_host(options)
    if args.out:
        write_probe(record, args.out)
    if args.results:
        from bench.run.ceiling import probe_file

        disk = options.plan.disk
        assert disk is not None, "_options refuses --results with --no-disk"
        write_probe(record, probe_file(Path(args.results), args.cpus, Path(disk), record.probe_id))
    print(record.to_json() if args.json else format_probe(record), end="\n" if args.json else "")
    return 0


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench probe`."""
    p = sub.add_parser(
        "probe",
        help="measure this host's ceiling: copy and disk bandwidth, cores, RAM, limits",
        description="Measure file -> memory copy bandwidth (warm), the disk's read bandwidth "
        "(cold), page zeroing, memcpy, CPUs, RAM, the cgroup limits in force and the "
        "accelerator, in a child process (inside --cpus/--host-ram/--disk-read-speed if given).",
        **example("loadbench probe --quick --out target.json"),
    )
    p.add_argument("--disk", help="a folder on the disk to probe (default: the checkpoint cache)")
    p.add_argument("--no-disk", action="store_true", help="no cold read figure (warm only)")
    p.add_argument("--out", help="write the probe record here (FILE.json)")
    p.add_argument(
        "--results",
        metavar="DIR",
        help="also keep the record in this results folder, where `bench run --out DIR` reuses "
        "it for its ceilings instead of probing (probe the checkpoint cache's disk with a "
        "--size at least the checkpoint's, up to 2GiB)",
    )
    add_json(p, "the probe record as JSON")
    p.add_argument("--quick", action="store_true", help="a smaller probe file, fewer repeats")
    p.add_argument("--size", help="probe file size (default 1GiB, --quick 256MiB)")
    p.add_argument("--cpus", type=int, help="probe inside a cgroup of this many CPUs")
    p.add_argument("--host-ram", help="probe inside a memory cgroup of this size, e.g. 4GiB")
    p.add_argument(
        "--disk-read-speed",
        help="probe with reads from the disk capped at this speed, e.g. 250MB/s",
    )
    p.set_defaults(func=cmd_probe)
    return p
