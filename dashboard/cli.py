"""`loadbench dashboard`: start Streamlit on 127.0.0.1 over a results folder.

`register(subparsers)` adds the subcommand to the `loadbench` parser (`bench/cli.py` calls it);
`python -m dashboard.cli [--results DIR] [--port P]` runs it on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from dashboard import MAKE_COMMAND, RESULTS_ENV
from dashboard.views import titles

APP = Path(__file__).resolve().parent / "app.py"
DEFAULT_PORT = 8501


def streamlit_command(port: int) -> list[str]:
    """The `streamlit run` command line for the app, bound to 127.0.0.1 only, no browser."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def run(args: argparse.Namespace) -> int:
    """Start the dashboard and wait for it (Ctrl-C stops it).

    Args:
        args: `results` (folder) and `port` (int).

    Returns:
        Streamlit's exit status (0 after Ctrl-C).
    """
    folder = Path(args.results).expanduser().resolve()
    if not (1 <= args.port <= 65535):
        return _refuse(f"--port {args.port} is not a TCP port (1-65535)")
    if not _port_free(args.port):
        return _refuse(
            f"127.0.0.1:{args.port} is already in use (another dashboard?); "
            f"stop it or pick another with --port"
        )
    if not folder.is_dir():
        print(
            f"loadbench dashboard: no results folder at {folder} yet; make one with "
            f"`{MAKE_COMMAND} RESULTS={folder}` (the dashboard starts anyway and says so)",
            file=sys.stderr,
        )
    print(f"loadbench dashboard: http://127.0.0.1:{args.port} over {folder}", flush=True)
    env = dict(os.environ, **{RESULTS_ENV: str(folder)})
    return _serve(streamlit_command(args.port), env)


def _refuse(message: str) -> int:
    print(f"loadbench dashboard: error: {message}", file=sys.stderr)
    return 2


def _port_free(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be bound now (checked before the URL is printed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _serve(cmd: list[str], env: dict[str, str]) -> int:
    """Run Streamlit until it exits; Ctrl-C or SIGTERM here stops it too (no orphan server)."""
    with contextlib.suppress(ValueError):  # not the main thread: keep the default handler
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    proc = subprocess.Popen(cmd, env=env)
    try:
        return proc.wait()
    except (KeyboardInterrupt, SystemExit):
        return 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--results",
        default="results",
        metavar="DIR",
        help="the results folder to show (default: results)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="P",
        help=f"port on 127.0.0.1 (default: {DEFAULT_PORT})",
    )
    parser.set_defaults(func=run)
    return parser


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `dashboard` subcommand; its `func(args) -> int` starts Streamlit."""
    parser = subparsers.add_parser(
        "dashboard",
        help="open the Streamlit dashboard over a results folder",
        description=f"Start the dashboard on 127.0.0.1 ({titles()}).",
        epilog="example: loadbench dashboard --results results",
    )
    return _add_arguments(parser)


def _report(args: argparse.Namespace) -> int:
    from bench.commands.common import read_whole
    from dashboard.report import run as write_report  # altair and vl-convert: only when asked

    # a folder not there is named as missing; one holding part of a run refused (--allow-partial)
    read_whole([args.results], allow_partial=args.allow_partial, given_as="RESULTS")
    return write_report(args)


def register_report(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench report RESULTS --out report.html` (see `dashboard.report`)."""
    from bench.commands.common import add_allow_partial

    p = subparsers.add_parser(
        "report",
        help="write one self-contained HTML report of a results folder",
        description=(
            "Write the Overview, Phases, Timeline, Target host, Compare and History charts and "
            "tables of one run in RESULTS (default: the newest complete, unconstrained run of "
            "each shape set; --run ID picks one) to one HTML file that opens offline "
            "(JavaScript inlined, no CDN)."
        ),
        epilog="example: loadbench report results --out report.html",
    )
    p.add_argument("results", metavar="RESULTS", help="results folder or file")
    p.add_argument(
        "--run",
        metavar="ID",
        default=None,
        help="the run to report (default: each shape set's newest complete, unconstrained run)",
    )
    p.add_argument(
        "--host-ram",
        metavar="SIZE",
        default=None,
        help="the host RAM the answers and the Target host view are for, e.g. 4GiB (default: "
        "the RAM of the machine that measured the run)",
    )
    p.add_argument(
        "--out",
        default="report.html",
        metavar="FILE",
        help="the HTML file to write (default: report.html)",
    )
    add_allow_partial(p)
    p.set_defaults(func=_report)
    return p


def main(argv: list[str] | None = None) -> int:
    """`python -m dashboard.cli`: the same as `loadbench dashboard`."""
    parser = _add_arguments(argparse.ArgumentParser(prog="loadbench dashboard"))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
