"""`recommend --check`: do the verdicts hold under a real memory limit of the target's size?

Runs, on this machine, the recommended strategy and every one predicted not to fit, once
each (a "does not fit" verdict is what a memory limit tests; the first of them alone may be a
strategy such as `mmap` whose peak is mostly reclaimable file-backed pages), on the target
shape set, each child inside a memory cgroup of `--host-ram` (`bench run --host-ram`; the rows
say whether the limit was really enforced, or only watched).
The verdict "fits" holds when the run ends ok; "does not fit" holds when the limit kills it (an
`oom` row; a group is `oom` when any of its processes was killed for memory). The runs land in
`<results>/checks/`, never among the results the dashboard and `recommend` read by default, and
their run record says `check: true`. Never imports jax.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.analysis.recommend import Recommendation
from bench.records.results import headline, read_results
from bench.run.config import RunConfig
from bench.run.runner import run_bench
from bench.units import format_bytes
from bench.vocabulary import DOES_NOT_FIT, FITS, OK, OOM
from loader.options import NO_OPTIONS, LoadOptions
from loader.vocabulary import TOTAL

CHECKS_FOLDER = "checks"  # under the results folder: `recommend --check`'s own runs


def _picks(rec: Recommendation) -> dict[str, str]:
    """strategy -> the status its verdict expects."""
    picks = {rec.recommended: OK} if rec.recommended else {}
    for s in rec.strategies:
        if s.verdict == DOES_NOT_FIT:
            picks[s.strategy] = OOM
    return picks


def _line(row, expected: str) -> tuple[bool, str]:
    held = row.status == expected
    limit = f"{row.memory_limit}{'' if row.memory_limit_enforced else ' (not enforced)'}"
    peak = row.cgroup_peak_bytes if row.cgroup_peak_bytes == row.cgroup_peak_bytes else None
    seen = f", cgroup peak {format_bytes(int(peak))}" if peak else ""
    verdict = FITS if expected == OK else DOES_NOT_FIT
    word = "held" if held else "DID NOT HOLD"
    return (
        held,
        f"  {row.strategy:<15} predicted {verdict:<13} -> {row.status:<8} {word} [{limit}{seen}]",
    )


def check(
    rec: Recommendation, args: argparse.Namespace, host_ram: int, options: LoadOptions = NO_OPTIONS
) -> bool:
    """Run the picks under the limit, with the load `options` the answer was fitted for; print
    one line each; True when every verdict held."""
    picks = _picks(rec)
    if not picks:
        print("check: no strategy to check (nothing recommended and nothing predicted not to fit)")
        return False
    print(f"\nchecking under a {format_bytes(host_ram)} memory limit: {', '.join(picks)}")
    config = RunConfig(
        shapes=[args.shapes],
        strategies=list(picks),
        repeats=1,
        host_ram_bytes=host_ram,
        out=Path(args.results) / CHECKS_FOLDER,
        argv=["recommend --check"],
        options=options,
        check=True,
    )
    outcome = run_bench(config)
    phases = headline(read_results(outcome.jsonl).phases)  # a group's summed row speaks for it
    totals = phases[phases["phase"] == TOTAL]
    results = []
    for strategy, expected in picks.items():
        rows = totals[totals["strategy"] == strategy]
        if rows.empty:
            print(f"  {strategy:<15} no result (interrupted?)")
            results.append(False)
            continue
        held, line = _line(rows.iloc[0], expected)
        print(line)
        results.append(held)
    print("check: " + ("every verdict held" if all(results) else "a verdict did not hold"))
    return all(results)
