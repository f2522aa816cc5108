"""The options several `loadbench` commands share, each defined once: `--json`, `--results`,
`--out`, `--cache`, `pipelined`'s knobs, and the comma-separated lists they take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.records.results import Results, partial_runs, read_folders
from bench.vocabulary import CACHE_CHOICES, CACHE_STATES, WARM
from loader.vocabulary import CACHE_POLICIES, SHARE_CHOICES

RESULTS_DEFAULT = "results"


def csv(text: str) -> list[str]:
    """`a, b,,c` -> `['a', 'b', 'c']`."""
    return [part.strip() for part in text.split(",") if part.strip()]


def add_json(p: argparse.ArgumentParser, what: str = "one JSON object") -> None:
    """`--json`: print `what` instead of text."""
    p.add_argument("--json", action="store_true", help=f"print {what} instead of text")


def add_results(p: argparse.ArgumentParser, help: str = "measured results folder") -> None:
    """`--results DIR`: a results folder to read."""
    p.add_argument("--results", default=RESULTS_DEFAULT, help=f"{help} (default: results)")


def existing_results(folder: str | Path, given_as: str = "--results") -> Path:
    """`folder` if it exists; else a one-line error naming it as missing, how to fill it, and
    the argument it was given as (`--results`, or a positional `RESULTS`, `BASE`, `NEW`)."""
    path = Path(folder)
    if not path.exists():
        raise BenchError(
            f"results folder {folder} does not exist: run `loadbench bench run --shapes gpt2 "
            f"--out {folder}` first, or give {given_as} a folder of runs"
        )
    return path


def read_stated(folders: list[str], given_as: str = "--results") -> Results:
    """The results of `folders` read as one, each named as missing if it is; every file or line
    skipped is said on stderr in one line each (which, and why)."""
    results = read_folders([existing_results(f, given_as) for f in folders])
    for file, message in results.errors:
        print(f"loadbench: skipped part of {file}: {message}", file=sys.stderr)
    return results


def add_allow_partial(p: argparse.ArgumentParser) -> None:
    """`--allow-partial`: read a results folder that holds part of a run (each loss still said)."""
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="read the results although a run there lost strategies or lines (each is said)",
    )


def losses(results: Results) -> list[str]:
    """What a folder lacks of its runs, one line each: runs that lost strategies
    (`partial_runs`), and the files or lines that could not be read."""
    lost = partial_runs(results)
    if results.errors:
        lost.append(f"{len(results.errors)} file(s) or line(s) could not be read (said above)")
    return lost


def read_whole(folders: list[str], *, allow_partial: bool, given_as: str = "--results") -> Results:
    """The results of `folders` read as one (`read_stated`), refused where a run there holds part
    of what it was asked (a truncated file, a killed run): an answer from part of a run is an
    answer about what is left, not about what was measured. With `allow_partial`, each loss is
    said on stderr instead, and the results are read as they are.

    Raises:
        BenchError: naming each loss and the two ways on (run again, or `--allow-partial`).
    """
    results = read_stated(folders, given_as)
    lost = losses(results)
    if lost and not allow_partial:
        raise BenchError(
            f"{', '.join(folders)} holds part of a run only: {'; '.join(lost)}. Run the bench "
            "again, or answer from what is there with --allow-partial"
        )
    for line in lost:
        print(f"loadbench: answering from part of a run (--allow-partial): {line}", file=sys.stderr)
    return results


def example(*lines: str) -> dict[str, Any]:
    """A subparser's epilog with its example(s): `add_parser(..., **example("loadbench ..."))`."""
    return {"epilog": f"example{'s' if len(lines) > 1 else ''}: {'; '.join(lines)}"}


def add_out(p: argparse.ArgumentParser) -> None:
    """`--out DIR`: the results folder a run writes."""
    p.add_argument("--out", default=RESULTS_DEFAULT, help="results folder (default: results)")


def add_cache(p: argparse.ArgumentParser, *, both: bool, help: str) -> None:
    """`--cache`: the page cache a load starts from; `both` only where a run can do each."""
    choices = CACHE_CHOICES if both else CACHE_STATES
    p.add_argument("--cache", choices=choices, default=WARM, help=help)


def _positive_int(text: str) -> int:
    """`--threads`: a whole number >= 1 (argparse reports anything else in one line)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of threads, >= 1")
    return int(text)


def add_pipelined(p: argparse.ArgumentParser) -> None:
    """`pipelined`'s own knobs (passed only to strategies whose `load` takes them)."""
    p.add_argument(
        "--budget",
        default=None,
        help="host bytes in flight beyond the model's own, for strategies that take a budget "
        "(pipelined; default there 256MiB), e.g. 256MiB",
    )
    p.add_argument(
        "--staging",
        action="store_true",
        help="pipelined: read through a bounded ring of host staging buffers onto the devices "
        "(what it does on a GPU/TPU; forced here on the CPU backend)",
    )
    p.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="pipelined: reader threads (default: from the usable CPUs and the page cache)",
    )
    p.add_argument(
        "--cache-policy",
        choices=CACHE_POLICIES,
        default=None,
        help="pipelined: auto (default: drop the file's pages behind the readers only where file "
        "and model do not fit in memory together), keep, or dontneed (drop them all)",
    )


def add_sharded(p: argparse.ArgumentParser) -> None:
    """`sharded`'s own knob (passed only to strategies whose `load` takes it)."""
    p.add_argument(
        "--share",
        choices=SHARE_CHOICES,
        default=None,
        help="sharded: how its processes split the checkpoint: regions (each its devices' index "
        "ranges), bytes (a leading-axis block each, resharded over the interconnect), or auto "
        "(default: bytes over a URL where regions would send too many requests)",
    )
