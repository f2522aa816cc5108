"""`loadbench compare BASE NEW`: the CI gate over two results (the rule: `bench.analysis.compare`).

It never passes in silence: what either side lacks is listed, a strategy of BASE missing from NEW
fails the gate (unless `--allow-missing`), too few repeats are said, and `--json` always prints
JSON (an `error` object on bad input, exit 2).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pandas as pd

from bench.analysis.compare import (
    ALPHA,
    KEYS,
    MIN_REPEATS,
    absent,
    compare,
    failures,
    parse_threshold,
    ratio_text,
    rule_text,
    sides_text,
)
from bench.commands.common import add_json, example, read_stated
from bench.errors import BenchError
from bench.records.results import routed
from bench.vocabulary import BROKEN, MISSING, NEW_ONLY, REGRESSED, UNDECIDED


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v.item() if hasattr(v, "item") else v


def _sides(args: argparse.Namespace) -> dict[str, pd.DataFrame]:
    sides = {}
    for name, path in (("base", args.base), ("new", args.new)):
        res = read_stated([path], given_as=name.upper())
        if res.phases.empty:
            raise BenchError(
                f"{name} {path}: no results there; give a results file (.jsonl) or folder "
                "written by `loadbench bench run --out`"
            )
        sides[name] = res.phases
    return sides


def _named(rows: pd.DataFrame) -> str:
    return ", ".join(f"{routed(r.strategy, r.route)} on {r.shapes}" for r in rows.itertuples())


def _lacks(what: dict[str, list[Any]], side: str) -> list[str]:
    if not what["combinations"]:
        return []
    shapes = f"; shape sets: {', '.join(what['shapes'])}" if what["shapes"] else ""
    return [f"missing in {side}: strategies {', '.join(what['strategies'])}{shapes}"]


HEADER = [
    "shapes",
    "strategy",
    "ok repeats",
    "peak over baseline",
    "wall time",
    "x floor",
    "x ceiling",
    "verdict",
]


def _table_lines(table: pd.DataFrame) -> list[str]:
    rows = [HEADER]
    for _, r in table.iterrows():
        rows.append(
            [
                r["shapes"],
                routed(r["strategy"], r["route"]),
                f"{int(r['ok_repeats_base'])}/{int(r['ok_repeats_new'])}",
                ratio_text(r, "peak"),
                ratio_text(r, "wall"),
                sides_text(r, "floor"),
                sides_text(r, "ceiling"),
                r["verdict"],
            ]
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


MARKDOWN_HEADER = ["shapes", "strategy", "ok repeats", "peak", "time", "verdict"]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def to_markdown(table: pd.DataFrame, args: argparse.Namespace, threshold: float) -> str:
    """A GitHub-flavoured Markdown table and the gate's verdict, for a PR comment."""
    bad = failures(table, allow_missing=args.allow_missing)
    verdict = (
        "**no regression**"
        if bad.empty
        else "**FAILED**: " + ", ".join(_failure(r) for r in bad.itertuples())
    )
    lines = [
        f"### loadbench compare: {verdict}",
        "",
        f"`{args.new}` against `{args.base}`; {rule_text(threshold)}.",
        "",
        "| " + " | ".join(MARKDOWN_HEADER) + " |",
        "|" + "---|" * len(MARKDOWN_HEADER),
    ]
    for _, r in table.iterrows():
        cells = [
            r["shapes"],
            routed(r["strategy"], r["route"]),
            f"{int(r['ok_repeats_base'])}/{int(r['ok_repeats_new'])}",
            ratio_text(r, "peak"),
            ratio_text(r, "wall"),
            f"**{r['verdict']}**" if r["verdict"] in (REGRESSED, BROKEN, MISSING) else r["verdict"],
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lacks = _lacks(absent(table, MISSING), "new") + _lacks(absent(table, NEW_ONLY), "base")
    return "\n".join(lines + ([""] + [f"- {line}" for line in lacks] if lacks else [])) + "\n"


def to_text(table: pd.DataFrame, args: argparse.Namespace, threshold: float) -> str:
    """The table (NEW / BASE, spread, p), what each side lacks, and the gate's verdict."""
    lines = [f"new {args.new} / base {args.base}; {rule_text(threshold)}", ""]
    lines += _table_lines(table) + [""]
    lines += _lacks(absent(table, MISSING), "new") + _lacks(absent(table, NEW_ONLY), "base")
    few = table[table["verdict"] == UNDECIDED]
    if len(few):
        lines.append(
            f"too few repeats to call a regression (fewer than {MIN_REPEATS} ok a side): "
            + _named(few)
        )
    bad = failures(table, allow_missing=args.allow_missing)
    if bad.empty:
        lines.append(
            "no regression" + (" (missing strategies allowed)" if args.allow_missing else "")
        )
    else:
        lines.append("FAILED: " + ", ".join(_failure(r) for r in bad.itertuples()))
    return "\n".join(lines) + "\n"


def _failure(row: Any) -> str:
    where = f"{routed(row.strategy, row.route)} on {row.shapes}"
    if row.verdict == MISSING:
        return f"{where} (missing in new)"
    if row.verdict == BROKEN:
        return f"{where} (no ok repeat in new)"
    what = " and ".join(m for m in ("peak", "wall") if getattr(row, f"{m}_verdict") == REGRESSED)
    return f"{where} ({what} regressed)"


def _json(table: pd.DataFrame, args: argparse.Namespace, threshold: float) -> str:
    bad = failures(table, allow_missing=args.allow_missing)
    few = table[table["verdict"] == UNDECIDED]
    out = {
        "base": str(args.base),
        "new": str(args.new),
        "max_regression": threshold,
        "min_repeats": MIN_REPEATS,
        "alpha": ALPHA,
        "allow_missing": bool(args.allow_missing),
        "regressed": not bad.empty,
        "failed": [{k: _json_value(v) for k, v in r.items()} for r in bad[KEYS].to_dict("records")],
        "missing_in_new": absent(table, MISSING),
        "missing_in_base": absent(table, NEW_ONLY),
        "too_few_repeats": [
            {k: _json_value(v) for k, v in r.items()} for r in few[KEYS].to_dict("records")
        ],
        "rows": [{k: _json_value(v) for k, v in r.items()} for r in table.to_dict("records")],
    }
    return json.dumps(out, indent=1)


def run_cli(args: argparse.Namespace) -> int:
    """`loadbench compare BASE NEW`: exit 1 if the gate fails, 0 if not, 2 on bad input."""
    try:
        threshold = parse_threshold(args.max_regression)
        sides = _sides(args)
    except BenchError as e:
        if args.json:
            print(json.dumps({"error": str(e)}))
        raise
    table = compare(sides["base"], sides["new"], threshold)
    form = "json" if args.json else args.format
    if form == "json":
        print(_json(table, args, threshold))
    elif form == "markdown":
        print(to_markdown(table, args, threshold), end="")
    else:
        print(to_text(table, args, threshold), end="")
    return 0 if failures(table, allow_missing=args.allow_missing).empty else 1


_DESCRIPTION = (
    "BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes, "
    "route: local, or source, link and concurrency) a metric (peak over baseline, wall time) has "
    "regressed when its median ratio NEW/BASE is over the threshold, beyond the spread of "
    "repeats, and a one-sided Mann-Whitney U test gives "
    f"p <= {ALPHA}; with fewer than {MIN_REPEATS} ok repeats a side no regression is called (and "
    "that is said). Exit 1 when anything regressed, broke, or is in BASE and missing in NEW "
    "(unless --allow-missing), 0 if not, 2 on bad input."
)


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `loadbench compare BASE NEW [--max-regression 5%] [--allow-missing] [--json]`."""
    p = sub.add_parser(
        "compare",
        help="compare two results (files or folders); exit 1 on a regression",
        description=_DESCRIPTION,
        **example("loadbench compare results-main results --max-regression 5%"),
    )
    p.add_argument("base", metavar="BASE", help="the reference results file or folder")
    p.add_argument("new", metavar="NEW", help="the results file or folder to check")
    p.add_argument(
        "--max-regression",
        default="5%",
        metavar="LIMIT",
        help="allowed growth, with its unit: 5%% or 1.05x (default 5%%, below 1000%%); a bare "
        "number is refused",
    )
    p.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="text (default), markdown (a table a PR comment can take) or json (as --json)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="pass although a strategy or shape set of BASE is missing in NEW (still listed)",
    )
    add_json(p)
    p.set_defaults(func=run_cli)
    return p
