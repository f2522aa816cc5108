"""`loadbench compare BASE NEW`: the CI gate over two results (its rule:
`bench.analysis.compare`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.analysis.compare import compare, parse_threshold, to_text
from bench.commands.common import add_json
from bench.errors import BenchError
from bench.records.results import read_results
from bench.vocabulary import COMPARE_FAILURES


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v.item() if hasattr(v, "item") else v


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench compare BASE NEW`: exit 1 if a strategy regressed or broke, 0 if not, 2 on
    errors."""
    threshold = parse_threshold(args.max_regression)
    sides = {}
    for name, path in (("base", args.base), ("new", args.new)):
        res = read_results(path)
        if res.phases.empty:
            raise BenchError(
                f"{name} {path}: no results there; give a results file (.jsonl) or folder "
                "written by `loadbench bench run --out`"
            )
        sides[name] = res.phases
    table = compare(sides["base"], sides["new"], threshold)
    if table.empty:
        raise BenchError(
            f"{args.base} and {args.new} share no (shapes, strategy, dtype, devices, "
            "processes); run the same `bench run` for both"
        )
    failed = bool(table["verdict"].isin(list(COMPARE_FAILURES)).any())
    if args.json:
        rows = [{k: _json_value(v) for k, v in r.items()} for r in table.to_dict("records")]
        print(
            json.dumps(
                {
                    "base": str(args.base),
                    "new": str(args.new),
                    "max_regression": threshold,
                    "regressed": failed,
                    "rows": rows,
                },
                indent=1,
            )
        )
    else:
        print(to_text(table, args.base, args.new, threshold), end="")
    return 1 if failed else 0


_DESCRIPTION = (
    "BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes) "
    "measured in both, a metric (peak over baseline, wall time) has regressed when its median "
    "ratio NEW/BASE is over the threshold and beyond the spread of repeats. Exit 1 when anything "
    "regressed or broke, 0 if not, 2 on bad input."
)


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench compare BASE NEW [--max-regression 5%] [--json]`."""
    p = sub.add_parser(
        "compare",
        help="compare two results (files or folders); exit 1 on a regression",
        description=_DESCRIPTION,
    )
    p.add_argument("base", metavar="BASE", help="the reference results file or folder")
    p.add_argument("new", metavar="NEW", help="the results file or folder to check")
    p.add_argument(
        "--max-regression",
        default="5%",
        metavar="PCT",
        help="allowed growth of a median beyond the spread of repeats (default 5%%)",
    )
    add_json(p)
    p.set_defaults(func=run_cli)
    return p
