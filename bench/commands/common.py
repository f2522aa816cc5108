"""The options several `loadbench` commands share, each defined once: `--json`, `--results`,
`--out`, `--cache`, and the comma-separated lists they take."""

from __future__ import annotations

import argparse

from bench.vocabulary import CACHE_CHOICES, CACHE_STATES, WARM

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


def add_out(p: argparse.ArgumentParser) -> None:
    """`--out DIR`: the results folder a run writes."""
    p.add_argument("--out", default=RESULTS_DEFAULT, help="results folder (default: results)")


def add_cache(p: argparse.ArgumentParser, *, both: bool, help: str) -> None:
    """`--cache`: the page cache a load starts from; `both` only where a run can do each."""
    choices = CACHE_CHOICES if both else CACHE_STATES
    p.add_argument("--cache", choices=choices, default=WARM, help=help)
