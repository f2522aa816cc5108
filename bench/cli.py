"""`loadbench`: measure how much host RAM and time each way of loading a checkpoint costs.

Subcommands: `bench list|run|abstract`, `recommend`, `compare`, and those that other packages register
(`shapes ...` from shapes.cli, `dashboard` from dashboard.cli). The one module above all four
packages.

`main(argv=None) -> int` catches the project's errors (`loader.errors.CheckpointError`, which the
shapes errors subclass, and `bench.errors.BenchError`) and prints one line,
`loadbench: error: ...`, exit status 2. Never imports jax itself.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

import dashboard.cli
import shapes.cli
from bench import compare
from bench.config import BUDGET_FRACTION, DEFAULT_PROCESSES, DEFAULT_TIMEOUT_S
from bench.errors import BenchError
from loader.errors import CheckpointError
from loader.strategies import StrategyInfo
from loader.vocabulary import FILE, STRATEGY

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


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
    hint = f"; install: {info.install_hint}" if info.install_hint else ""
    return f"unavailable: needs {', '.join(info.missing())}{hint}"


def cmd_list(args: argparse.Namespace) -> int:
    from bench import strategies

    entries = strategies.catalog()
    if args.json:
        keys = ("name", "description", "kind", "checkpoint", "multiprocess", "install_hint")
        rows = [{**{k: getattr(e, k) for k in keys}, "available": e.available(),
                 "missing": e.missing()} for e in entries.values()]  # fmt: skip
        print(json.dumps(rows, indent=1))
        return 0
    width = max((len(n) for n in entries), default=0)
    for e in entries.values():
        print(f"{e.name.ljust(width)}  {e.description}{_tags(e)}")
    return 0


def _disk_speed(args: argparse.Namespace) -> int | None:
    """`--disk-read-speed` in bytes/s; only with a cold cache (a warm load reads no disk)."""
    if not args.disk_read_speed:
        return None
    if args.cache == "warm":
        raise BenchError(
            "--disk-read-speed caps reads from the disk, and a warm page cache reads none: add "
            "--cache cold (or both)"
        )
    from bench.units import parse_speed

    return parse_speed(args.disk_read_speed, what="--disk-read-speed")


def cmd_run(args: argparse.Namespace) -> int:
    from bench.config import RunConfig
    from bench.results import read_results
    from bench.run_checks import check_counts
    from bench.runner import run_bench
    from bench.summary import json_summary, tables
    from bench.units import parse_size

    budget = parse_size(args.memory_budget, what="--memory-budget") if args.memory_budget else None
    if not args.shapes and not args.checkpoint:
        raise BenchError(
            "give --shapes (shape sets) or --checkpoint (your own checkpoint), or both"
        )
    host_ram = parse_size(args.host_ram, what="--host-ram") if args.host_ram else None
    disk_speed = _disk_speed(args)
    load_budget = parse_size(args.budget, what="--budget") if args.budget else None
    config = RunConfig(
        shapes=_csv(args.shapes or ""), checkpoints=list(args.checkpoint or []),
        cache=args.cache, host_ram_bytes=host_ram, disk_read_bytes_per_s=disk_speed, strategies=_csv(args.strategies) if args.strategies else None,
        repeats=args.repeats, dtype=args.dtype, devices=args.devices, processes=args.processes,
        memray=args.memray, out=Path(args.out), timeout_s=args.timeout,
        memory_budget_bytes=budget, model_dtype=args.model_dtype, load_budget_bytes=load_budget,
        argv=["loadbench", *args.argv],
    )  # fmt: skip
    check_counts(args.repeats, args.devices, args.processes, args.timeout)
    # Ctrl-C must stop the run cleanly even where SIGINT was inherited as ignored (a shell's
    # background job ignores it, and Python then installs no KeyboardInterrupt handler).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    outcome = run_bench(config)
    results = read_results(outcome.jsonl)
    if args.json:  # the file first, so a script can find what this run wrote
        print(json.dumps({"results_file": str(outcome.jsonl), "strategies": json_summary(results)}, indent=1))  # fmt: skip
    else:
        print(tables(results), end="")
        print(f"results: {outcome.jsonl} (+ .parquet); view them with `loadbench dashboard --results {args.out}`")  # fmt: skip
    return EXIT_INTERRUPTED if outcome.interrupted else 0


def cmd_abstract(args: argparse.Namespace) -> int:
    from bench.child import abstract_build

    rows = abstract_build.measure([int(n) for n in _csv(args.layers)])
    print(json.dumps(rows, indent=1) if args.json else abstract_build.format_table(rows))
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    from bench.recommend_cli import run_cli

    return run_cli(args)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    """`bench list`, `bench run`, `bench abstract`."""
    bench = sub.add_parser("bench", help="list and run load strategies").add_subparsers(
        dest="bench_command", required=True
    )
    p = bench.add_parser("list", help="the registered strategies")
    p.add_argument("--json", action="store_true", help="one JSON list")
    p.set_defaults(func=cmd_list)
    _add_run(bench.add_parser(
        "run", help="measure strategies, each run in a fresh process",
        description="Measure strategies, each load in a fresh process. Synthetic checkpoints (and their "
        "converted forms) are made once and kept in $LOADBENCH_CACHE/checkpoints/ (default: "
        "./.cache/loadbench, relative to where you run it); delete that folder to reclaim the space.",
    ))  # fmt: skip
    p = bench.add_parser("abstract", help="abstract model build time against layer count")
    p.add_argument("--layers", default="5,10,20,40", help="comma-separated layer counts")
    p.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    p.set_defaults(func=cmd_abstract)


def _add_run(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options: what to measure (shapes, strategies, dtypes, budget, devices)."""
    p.add_argument("--shapes", help="shape set(s): preset, fetched name or path; a,b")
    _add_run_scenarios(p)
    p.add_argument("--strategies", help="a,b (default: every strategy predicted to fit)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dtype", default=None, help="store and load every float tensor in this dtype")
    p.add_argument(
        "--model-dtype",
        default=None,
        help="build the model in this dtype; the checkpoint keeps its own (or --dtype): a real cast",
    )
    p.add_argument(
        "--budget",
        default=None,
        help="host bytes in flight beyond the model's own, for strategies that take a budget "
        "(pipelined; default there 256MiB), e.g. 256MiB",
    )
    p.add_argument("--devices", type=int, default=1, help="simulated host devices (XLA_FLAGS)")
    p.add_argument(
        "--processes",
        type=int,
        default=None,
        help=f"processes of multi-process strategies (default {DEFAULT_PROCESSES})",
    )
    _add_run_limits(p)
    p.set_defaults(func=cmd_run)


def _add_run_scenarios(p: argparse.ArgumentParser) -> None:
    """`bench run`'s options on the situation users face: their checkpoint, a cold cache, a limit."""
    p.add_argument(
        "--checkpoint", action="append",
        help="your own checkpoint: a .safetensors file, a folder of shards or an *.index.json "
        "(repeatable); loads are verified bit-exact, nothing is written beside it",
    )  # fmt: skip
    p.add_argument(
        "--cache", choices=("warm", "cold", "both"), default="warm",
        help="page cache before each child: warm (default), cold (evicted first), or both",
    )  # fmt: skip
    p.add_argument(
        "--host-ram", help="run each child inside a memory cgroup of this size, e.g. 4GiB"
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
    p.add_argument("--out", default="results", help="results folder (default: results)")
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
    p.add_argument("--json", action="store_true", help="print one JSON object (results_file, strategies) instead of tables")  # fmt: skip


def _add_recommend(sub: argparse._SubParsersAction) -> None:
    from bench.recommend_cli import add_arguments

    p = sub.add_parser("recommend", help="predict peak RAM and time on a target host")
    add_arguments(p)
    p.set_defaults(func=cmd_recommend)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loadbench")
    except PackageNotFoundError:
        return "unknown (not installed; run `make install`)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadbench", description=__doc__.split("\n")[0].replace("`", "")
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_bench(sub)
    _add_recommend(sub)
    compare.register(sub)
    shapes.cli.register(sub)
    dashboard.cli.register(sub)
    dashboard.cli.register_report(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `loadbench` with `argv` (default: sys.argv[1:]); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        args.argv = argv
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("loadbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (BenchError, CheckpointError) as exc:
        print(f"loadbench: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
