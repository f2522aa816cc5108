"""`loadbench bench list|run|abstract`: the registered strategies, a measured run, and the abstract
build micro-benchmark."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import signal
from pathlib import Path

from bench.commands.common import (
    add_cache,
    add_json,
    add_load_options,
    add_out,
    csv,
    example,
    load_options,
    size_flag,
)
from bench.commands.model_options import add_model_options, check_model
from bench.errors import BenchError
from bench.run.checks import parse_processes
from bench.run.config import BUDGET_FRACTION, DEFAULT_PROCESSES, DEFAULT_TIMEOUT_S, RunConfig
from bench.run.repeats import DEFAULT_MAX_REPEATS, DEFAULT_MIN_REPEATS, DEFAULT_REPEAT_BUDGET_S
from bench.vocabulary import WARM
from loader.strategies import StrategyInfo
from loader.vocabulary import DEFAULT_STRATEGY, FILE, STRATEGY

EXIT_INTERRUPTED = 130
DEFAULT_MARK = " (default)"  # after the name `loader.load_model` uses when none is given
LIST_KEYS = ("name", "description", "kind", "checkpoint", "multiprocess", "install_hint")


def _tags(info: StrategyInfo) -> str:
    """What sets a strategy apart in `bench list`: its kind, checkpoint form, processes."""
    tags = [
        info.kind if info.kind != STRATEGY else "",
        info.checkpoint if info.checkpoint != FILE else "",
        "multi-process" if info.multiprocess else "",
        "" if info.available() else _unavailable(info),
    ]
    return f"  [{', '.join(t for t in tags if t)}]" if any(tags) else ""


def _unavailable(info: StrategyInfo) -> str:
    return f"unavailable: {info.unavailable_reason()}"


def add_remote(p: argparse.ArgumentParser) -> None:
    """`--source`, `--link`: load from a server this run starts (`--remote-concurrency`, the
    requests in flight, is a load option: `add_load_options`)."""
    from bench.link.serve import SOURCE_SERVERS, SOURCES

    served = ", ".join(s.help for s in SOURCE_SERVERS.values())
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="file",
        help=f"where strategies that take a URL read the checkpoint from: file (default), "
        f"{served}, started by the run on 127.0.0.1 or behind --link",
    )
    p.add_argument(
        "--link",
        default=None,
        help="serve --source from its own network namespace behind a veth pair shaped with tc "
        "tbf, e.g. 1Gbit or 10Gbit (root; a /LATENCY needs netem); rows get ceiling_s",
    )


def cmd_list(args: argparse.Namespace) -> int:
    """`bench list`: one line (or JSON object) per registered strategy."""
    from bench import strategies

    entries = strategies.catalog()
    if args.json:
        rows = [
            {
                **{k: getattr(e, k) for k in LIST_KEYS},
                "available": e.available(),
                "default": e.name == DEFAULT_STRATEGY,
                "missing": e.missing(),
                "platforms": list(e.platforms),
                "unavailable": e.unavailable_reason(),
            }
            for e in entries.values()
        ]
        print(json.dumps(rows, indent=1))
        return 0
    width = max((len(n) for n in entries), default=0) + len(DEFAULT_MARK)
    for e in entries.values():
        name = e.name + (DEFAULT_MARK if e.name == DEFAULT_STRATEGY else "")
        print(f"{name.ljust(width)}  {e.description}{_tags(e)}")
    return 0


def _disk_speed(args: argparse.Namespace) -> int | None:
    """`--disk-read-speed` in bytes/s; only with a cold cache (a warm load reads no disk)."""
    if not args.disk_read_speed:
        return None
    if args.cache == WARM:
        raise BenchError(
            "--disk-read-speed caps reads from the disk, and a warm page cache reads none: add "
            "--cache cold (or both)"
        )
    from bench.units import parse_speed

    return parse_speed(args.disk_read_speed, what="--disk-read-speed")


def _cpus(cpus: int | None) -> int | None:
    from bench.limits.cpu import check_cpus

    check_cpus(cpus)
    return cpus


def _seconds(text: str | None, flag: str) -> float | None:
    """`45s`, `2min` or `45` (seconds) as seconds; a negative or unreadable one is refused."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|sec|min|m)?\s*", text)
    if not match:
        raise BenchError(f"{flag} {text!r}: not a time; write e.g. {flag} 45s or {flag} 2min")
    return float(match.group(1)) * (60.0 if match.group(2) in ("min", "m") else 1.0)


def run_config(args: argparse.Namespace) -> RunConfig:
    """`bench run`'s options as one `RunConfig` (sizes and speeds parsed, lists split)."""
    if not args.shapes and not args.checkpoint:
        raise BenchError(
            "give --shapes (shape sets) or --checkpoint (your own checkpoint), or both"
        )
    check_model(args)
    options, swept = load_options(args)
    return RunConfig(
        shapes=csv(args.shapes or ""),
        checkpoints=list(args.checkpoint or []),
        cache=args.cache,
        host_ram_bytes=size_flag(args.host_ram, "--host-ram"),
        cpus=_cpus(args.cpus),
        reprobe=args.probe,
        disk_read_bytes_per_s=_disk_speed(args),
        strategies=csv(args.strategies) if args.strategies else None,
        repeats=args.repeats,
        max_repeats=max(args.repeats, DEFAULT_MAX_REPEATS)
        if args.max_repeats is None
        else args.max_repeats,
        repeat_budget_s=_seconds(args.repeat_budget, "--repeat-budget"),
        dtype=args.dtype,
        devices=args.devices,
        processes=parse_processes(args.processes),
        memray=args.memray,
        out=Path(args.out),
        timeout_s=args.timeout,
        memory_budget_bytes=size_flag(args.memory_budget, "--memory-budget"),
        model_dtype=args.model_dtype,
        model=args.model,
        key_map=args.key_map,
        compile=args.compile,
        compile_cache=args.compile_cache,
        link=_link(args),  # checked before the source's server: a bad --link is said first
        source=_source(args),
        options=options,
        swept=swept,
        argv=["loadbench", *args.argv],
    )


def _source(args: argparse.Namespace) -> str:
    """`--source`, checked now: its server must be installed (`s3`: SeaweedFS's `weed`; `gcs`:
    fake-gcs-server), refused in one line otherwise."""
    if args.source != "file":
        from bench.link.serve import require

        require(args.source)
    return str(args.source)


def _link(args: argparse.Namespace) -> str | None:
    """`--link`, checked now (a shaped link needs `--source`, root, ip and tc; no netem here)."""
    if args.link is None:
        return None
    from bench.link.shaping import Link, can_shape, check_latency

    if args.source == "file":
        from bench.link.serve import SOURCE_SERVERS

        *others, last = SOURCE_SERVERS
        raise BenchError(
            f"--link shapes a remote source's link: add --source {', '.join(others)} or {last}"
        )
    link = Link.parse(args.link)
    why = can_shape()
    if why:
        raise BenchError(why)
    check_latency(link)
    return link.text


def cmd_run(args: argparse.Namespace) -> int:
    """`bench run`: measure, write the results, print the summary."""
    from bench.analysis.summary import tables
    from bench.commands.show import run_header, run_json
    from bench.records.results import read_results
    from bench.run.checks import check_counts
    from bench.run.ranks import follow
    from bench.run.runner import checked, run_bench
    from loader.launcher import detect

    config = run_config(args)
    check_counts(args.repeats, args.devices, args.timeout)
    config.repeat_policy()  # --max-repeats below --repeats is refused before anything runs
    launcher = detect()
    if launcher is not None and launcher.rank != 0:  # rank 0 runs the bench and writes the rows
        checked(config)  # refused here as on rank 0, not after rank 0 has gone quiet
        return follow(launcher, config.out)
    # Ctrl-C must stop the run cleanly even where SIGINT was inherited as ignored (a shell's
    # background job ignores it, and Python then installs no KeyboardInterrupt handler).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    outcome = run_bench(config)
    results = read_results(outcome.jsonl)
    if args.json:  # the file first, so a script can find what this run wrote
        print(json.dumps(run_json(outcome.jsonl, results), indent=1))
    else:  # the answer last: the summary ends with "use X" for this host
        print(
            f"results: {outcome.jsonl} (+ .parquet); "
            f"view them with `loadbench dashboard --results {args.out}`"
        )
        print(f"{run_header(results)}\n")  # its commit and the limits its children ran under
        print(tables(results), end="")
    return EXIT_INTERRUPTED if outcome.interrupted else 0


def cmd_abstract(args: argparse.Namespace) -> int:
    """`bench abstract`: abstract build time against layer count."""
    from bench.child import abstract_build

    rows = abstract_build.measure([int(n) for n in csv(args.layers)])
    as_json = [dataclasses.asdict(r) for r in rows]
    print(json.dumps(as_json, indent=1) if args.json else abstract_build.format_table(rows))
    return 0


RUN_DESCRIPTION = (
    "Measure strategies, each load in a fresh process. Synthetic checkpoints (and their "
    "converted forms) are made once and kept in $LOADBENCH_CACHE/checkpoints/ (default: "
    "./.cache/loadbench, relative to where you run it); delete that folder to reclaim the space."
)


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench bench list|run|abstract`."""
    parser = sub.add_parser("bench", help="list and run load strategies")
    bench = parser.add_subparsers(dest="bench_command", required=True)
    p = bench.add_parser(
        "list",
        help="the registered strategies",
        description="List every registered load strategy: what it does, its kind, the checkpoint "
        "form it reads, and whether it can run here (and what to install where not).",
        **example("loadbench bench list"),
    )
    add_json(p, "one JSON list")
    p.set_defaults(func=cmd_list)
    run = bench.add_parser(
        "run",
        help="measure strategies, each run in a fresh process",
        description=RUN_DESCRIPTION,
        **example("loadbench bench run --shapes gpt2 --strategies eager,pipelined --repeats 3"),
    )
    _add_run(run)
    p = bench.add_parser(
        "abstract",
        help="abstract model build time against layer count",
        description="Time building a model abstractly (no weights allocated) at several depths: "
        "what a load pays before it reads a byte.",
        **example("loadbench bench abstract --layers 5,10,20"),
    )
    p.add_argument("--layers", default="5,10,20,40", help="comma-separated layer counts")
    add_json(p, "one JSON list")
    p.set_defaults(func=cmd_abstract)
    return parser


def _add_run(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options: what to measure (shapes, strategies, dtypes, budget, devices)."""
    p.add_argument("--shapes", help="shape set(s): preset, fetched name or path; a,b")
    _add_run_scenarios(p)
    p.add_argument("--strategies", help="a,b (default: every strategy predicted to fit)")
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_MIN_REPEATS,
        help="runs of each strategy at least, interleaved; more follow until its time's 95%% "
        f"confidence interval is within ±5%% (default {DEFAULT_MIN_REPEATS})",
    )
    p.add_argument(
        "--max-repeats",
        type=int,
        help="the most runs of one strategy while its time is not settled (default "
        f"{DEFAULT_MAX_REPEATS}, or --repeats where that is more)",
    )
    p.add_argument(
        "--repeat-budget",
        metavar="TIME",
        help="wall time one strategy's runs may take in all before no more are added, e.g. 30s "
        f"or 2min (default {DEFAULT_REPEAT_BUDGET_S:g}s; --repeats always run)",
    )
    p.add_argument("--dtype", default=None, help="store and load every float tensor in this dtype")
    p.add_argument(
        "--model-dtype",
        default=None,
        help="build the model in this dtype; the checkpoint keeps its own (or --dtype): "
        "a real cast",
    )
    add_model_options(p)
    add_load_options(p)
    add_remote(p)
    p.add_argument("--devices", type=int, default=1, help="simulated host devices (XLA_FLAGS)")
    p.add_argument(
        "--processes",
        default=None,
        help="processes of multi-process strategies (`sharded`, `sharded-dir`, the peer "
        "`orbax-safetensors`), e.g. 2 or 1,2,4 (each count its own configuration; default "
        f"{DEFAULT_PROCESSES}, a peer's 1)",
    )
    _add_run_limits(p)
    p.set_defaults(func=cmd_run)


def _add_run_scenarios(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options on the situation users face: their checkpoint, a cold cache, a
    limit."""
    p.add_argument(
        "--checkpoint",
        action="append",
        help="your own checkpoint: a .safetensors file, a folder of shards or an *.index.json "
        "(repeatable); loads are verified bit-exact, nothing is written beside it",
    )
    add_cache(
        p,
        both=True,
        help="page cache before each child: warm (default), cold (evicted first), or both",
    )
    p.add_argument(
        "--host-ram", help="run each child inside a memory cgroup of this size, e.g. 4GiB"
    )
    p.add_argument(
        "--cpus",
        type=int,
        help="run each child inside a cgroup of this many CPUs (cpu.max, CFS quota or a cpuset)",
    )
    p.add_argument(
        "--disk-read-speed",
        help="cap each child's reads from the checkpoint's disk at this speed (a blkio cgroup), "
        "e.g. 300MB/s: a cold load as the target's disk would serve it; needs --cache cold|both",
    )


def _add_run_limits(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options on how each child runs (limits, memray) and where results go."""
    p.add_argument(
        "--memray", action="store_true", help="also capture one run per strategy with memray"
    )
    add_out(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per child (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--memory-budget",
        help=f"kill a child above this RSS (default {BUDGET_FRACTION * 100:.0f}%% of RAM)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="probe this machine's ceiling again (default: the probe cached in the results folder)",
    )
    add_json(p, "one JSON object (results_file, strategies, decisions)")
