"""`loadbench`: measure how much host RAM and time each way of loading a checkpoint costs.

The one module above all four packages: it lists every subcommand in `COMMANDS` (the bench's own
in `bench.commands`, `shapes ...` from `shapes.cli`, `dashboard` and `report` from `dashboard.cli`:
the one sanctioned upward arrow, tested in `tests/unit/test_architecture.py`).

`main(argv=None) -> int` catches the project's errors (`loader.errors.CheckpointError`, which the
shapes errors subclass, and `bench.errors.BenchError`) and prints one line,
`loadbench: error: ...`, exit status 2. Never imports jax itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import dashboard.cli
import shapes.cli
from bench.commands import bench, compare, history, plan, probe, recommend, show
from bench.commands.bench import EXIT_INTERRUPTED
from bench.errors import BenchError
from loader.errors import CheckpointError

EXIT_ERROR = 2

Register = Callable[[argparse._SubParsersAction], argparse.ArgumentParser]
# Every subcommand, in `loadbench --help` order: adding one is one module plus one line here.
COMMANDS: tuple[Register, ...] = (
    bench.register,
    recommend.register,
    compare.register,
    history.register,
    show.register,
    probe.register,
    plan.register,
    shapes.cli.register,
    dashboard.cli.register,
    dashboard.cli.register_report,
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loadbench")
    except PackageNotFoundError:
        return "unknown (not installed; run `make install`)"


def build_parser() -> argparse.ArgumentParser:
    """The `loadbench` parser with every command of `COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="loadbench", description=(__doc__ or "").split("\n")[0].replace("`", "")
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in COMMANDS:
        register(sub)
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
