"""`loadbench show RUN`: reprint a stored run's summary, as `bench run` printed it at its end.

RUN is a run's results file (`results/<machine>/<run-id>.jsonl`), its run id (a unique start
of it is enough) under `--results`, or a results folder (the `--out` that `bench run` was given):
its newest run. Text is `bench run`'s own summary under a header naming the
run, its commit and the limits its children ran under (`unconstrained` where none); `--json` is
`bench run --json`'s object; `--format markdown` one table a PR comment can take, `--format csv`
the same columns as raw numbers (bytes, seconds). A file holding part of a run is refused unless
`--allow-partial`, which says what is lost.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from bench.commands.common import (
    RESULTS_DEFAULT,
    add_allow_partial,
    add_json,
    example,
    read_whole,
)
from bench.errors import BenchError
from bench.records.configuration import limits_text
from bench.records.results import X_CEILING, Results
from shapes.sizes import MISSING, format_gib, format_seconds

#: The columns of `--format markdown|csv`: (header, `bench run --json` key).
COLUMNS = (
    ("shapes", "shapes"),
    ("strategy", "strategy"),
    ("devices", "devices"),
    ("cache", "cache"),
    ("status", "status"),
    ("ok repeats", "ok_repeats"),
    ("repeats", "repeats"),
    ("wall s", "wall_s"),
    (X_CEILING, "paired_ratio"),  # the one definition (`bench.records.results.MEANINGS`)
    (f"{X_CEILING} low", "paired_low"),
    (f"{X_CEILING} high", "paired_high"),
    ("wall / probe read", "ceiling_ratio"),  # the older yardstick, under its own name
    ("peak RSS", "peak_rss_bytes"),
    ("baseline RSS", "baseline_rss_bytes"),
    ("unstable", "unstable"),
)


def find_run(run: str, results: str) -> Path:
    """The results file of `run`: a path to one, a folder's newest run (run ids start with their
    UTC start, so the last name is the newest), else the one file under `results` whose name
    starts with it. Raises BenchError naming what was looked for and how to find a run id."""
    path = Path(run)
    if path.is_file():
        return path
    if path.is_dir():
        return _newest_run(path)
    root = Path(results)
    found = sorted(root.rglob(f"{run}*.jsonl")) if root.is_dir() else []
    if len(found) == 1:
        return found[0]
    how = f"`ls {results}/*/` lists the runs (one <run-id>.jsonl each)"
    if not found:
        raise BenchError(
            f"no run {run!r} under {results}: give a results file (.jsonl) or a run id; {how}"
        )
    names = ", ".join(p.stem for p in found[:5]) + (", ..." if len(found) > 5 else "")
    raise BenchError(f"run {run!r} names {len(found)} runs under {results} ({names}): give more")


def _newest_run(folder: Path) -> Path:
    """The newest run's results file in a results folder; the others named on stderr."""
    runs = sorted(folder.rglob("*.jsonl"), key=lambda p: p.stem)
    if not runs:
        raise BenchError(
            f"{folder}: no runs here (no <machine>/<run-id>.jsonl); `bench run --out {folder}` "
            "writes one"
        )
    if len(runs) > 1:
        print(
            f"loadbench: {folder} holds {len(runs)} runs; showing the newest, {runs[-1].stem} "
            "(give a run id for another)",
            file=sys.stderr,
        )
    return runs[-1]


def run_json(path: Path, results: Results) -> dict[str, Any]:
    """`bench run --json`'s object, which `show --json` prints too: the results file, the
    summary per configuration and the judge's decisions."""
    from bench.analysis.summary import json_decisions, json_summary

    return {
        "results_file": str(path),
        "strategies": json_summary(results),
        "decisions": json_decisions(results),  # the judge's, as the text summary ends
    }


def run_header(results: Results) -> str:
    """`run 20261203T184000Z-1a2b3c · here · 2026-12-03 18:40 · commit 1a2b3c4 · complete ·
    1 CPU`: one line per run in the results, with the limits its children ran under."""
    lines = []
    for run in results.runs.to_dict("records"):
        rows = results.phases[results.phases["run_id"] == run["run_id"]]
        when = str(run.get("started_utc") or "")[:16].replace("T", " ")
        commit = run.get("git_commit") if isinstance(run.get("git_commit"), str) else "?"
        lines.append(
            f"run {run['run_id']} · {run.get('machine', '?')} · {when} · commit {commit} · "
            f"{run.get('status', '?')} · {limits_text(run, rows)}"
        )
    return "\n".join(lines)


def _cell(key: str, value: Any) -> str:
    """One markdown cell: sizes in GiB (one unit for the column), seconds, ratios; `-` unset."""
    if value is None:
        return MISSING
    if key.endswith("_bytes"):
        return format_gib(value)
    if key == "wall_s":
        return format_seconds(value)
    if isinstance(value, float):
        return f"{value:.2f}x"
    return str(value).replace("|", "\\|")


def to_markdown(rows: list[dict[str, Any]], header: str) -> str:
    """A GitHub-flavoured Markdown table of `rows` (`bench run --json`'s objects)."""
    lines = [*(f"- {line}" for line in header.splitlines()), ""]
    lines.append("| " + " | ".join(name for name, _ in COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for row in rows:
        lines.append("| " + " | ".join(_cell(k, row.get(k)) for _, k in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The same columns as raw values (bytes, seconds, ratios), empty where unset."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([key for _, key in COLUMNS])
    for row in rows:
        writer.writerow(["" if row.get(k) is None else row.get(k) for _, k in COLUMNS])
    return out.getvalue()


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench show RUN`: exit 0 with the summary, 2 when the run is not found or partial."""
    from bench.analysis.summary import json_summary, tables

    path = find_run(args.run, args.results)
    results = read_whole([str(path)], allow_partial=args.allow_partial, given_as="RUN")
    if results.phases.empty:
        raise BenchError(f"{path}: no rows to show; was the run stopped before its first child?")
    form = "json" if args.json else args.format
    if form == "json":
        print(json.dumps(run_json(path, results), indent=1))
    elif form == "markdown":
        print(to_markdown(json_summary(results), run_header(results)), end="")
    elif form == "csv":
        print(to_csv(json_summary(results)), end="")
    else:
        print(f"{run_header(results)}\nresults: {path}\n")
        print(tables(results), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench show RUN [--results DIR] [--json | --format text|markdown|csv]`."""
    p = sub.add_parser(
        "show",
        help="reprint a stored run's summary (text, JSON, markdown or CSV)",
        description="Reprint the summary `bench run` printed at the end of a run, from its "
        "results file: RUN is the file, or the run id (a unique start of it) under --results.",
        **example(
            "loadbench show 20261203T184000Z",
            "loadbench show results/here/20261203T184000Z-1a2b3c.jsonl --format markdown",
        ),
    )
    p.add_argument(
        "run",
        metavar="RUN",
        help="a run's results file, its run id, or a results folder (its newest run)",
    )
    p.add_argument(
        "--results", default=RESULTS_DEFAULT, help="where to look for a run id (default: results)"
    )
    p.add_argument(
        "--format",
        choices=("text", "markdown", "csv", "json"),
        default="text",
        help="text (default: as `bench run` printed it), markdown, csv, or json (as --json)",
    )
    add_allow_partial(p)
    add_json(p, "`bench run --json`'s object")
    p.set_defaults(func=run_cli)
    return p
