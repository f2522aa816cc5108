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
    KEYS,
    MIN_REPEATS,
    absent,
    compare,
    failures,
    parse_threshold,
    ratio_text,
    rule_text,
    sides_text,
    values_text,
)
from bench.analysis.difference import CONFIDENCE
from bench.commands.common import add_allow_partial, add_json, example, read_whole
from bench.errors import BenchError
from bench.records.configuration import limits_text
from bench.records.results import MEANINGS, Results, routed
from bench.vocabulary import (
    BROKEN,
    MISSING,
    NEW_ONLY,
    NOT_COMPARABLE,
    REGRESSED,
    UNDECIDED,
    UNSTABLE,
)


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    return v.item() if hasattr(v, "item") else v


def _sides(args: argparse.Namespace) -> dict[str, Results]:
    sides = {}
    for name, path in (("base", args.base), ("new", args.new)):
        res = read_whole([path], allow_partial=args.allow_partial, given_as=name.upper())
        if res.phases.empty:
            raise BenchError(
                f"{name} {path}: no results there; give a results file (.jsonl) or folder "
                "written by `loadbench bench run --out`"
            )
        sides[name] = res
    return sides


def side_text(results: Results) -> str:
    """`commit 1a2b3c4 · 2026-12-03 18:40 · unconstrained`: what code each run of a side ran,
    when, and under which limits (runs in start order; `commit ?` where none was recorded)."""
    said = []
    runs = results.runs.sort_values("started_utc", kind="stable")
    for run in runs.to_dict("records"):
        rows = results.phases[results.phases["run_id"] == run["run_id"]]
        if rows.empty:
            continue
        commit = run.get("git_commit") if isinstance(run.get("git_commit"), str) else "?"
        when = str(run.get("started_utc") or "")[:16].replace("T", " ")
        said.append(f"commit {commit} · {when} · {limits_text(run, rows)}")
    return "; ".join(dict.fromkeys(said)) or "no run record"


def _comparable(table: pd.DataFrame) -> None:
    """Refuse where every combination on both sides ran under another configuration: nothing
    can be judged, and a gate that passes on nothing would say nothing."""
    on_both = table[~table["verdict"].isin([MISSING, NEW_ONLY])]
    if on_both.empty or not (on_both["verdict"] == NOT_COMPARABLE).all():
        return
    changes = "; ".join(dict.fromkeys(on_both["configuration_change"]))
    raise BenchError(
        f"BASE and NEW ran under different configurations ({changes}): no combination is "
        "comparable, so nothing was judged; compare runs made with the same --cpus, --host-ram, "
        "--disk-read-speed, --budget and strategy options"
    )


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
    "peak base -> new",
    "peak, new / base",
    "wall base -> new",
    "time, new / base",
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
                values_text(r, "peak"),
                ratio_text(r, "peak"),
                values_text(r, "wall"),
                ratio_text(r, "wall"),
                sides_text(r, "floor"),
                sides_text(r, "ceiling"),
                r["verdict"],
            ]
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


MARKDOWN_HEADER = [
    "shapes",
    "strategy",
    "ok repeats",
    "peak base -> new",
    "peak",
    "wall base -> new",
    "time",
    "verdict",
]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _apart(table: pd.DataFrame) -> list[str]:
    """One line per combination not judged because its configuration changed."""
    rows = table[table["verdict"] == NOT_COMPARABLE]
    return [
        f"not comparable: {routed(r.strategy, r.route)} on {r.shapes}: the configuration "
        f"changed ({r.configuration_change}), so it is not judged"
        for r in rows.itertuples()
    ]


def _unstable(table: pd.DataFrame, strict: bool) -> list[str]:
    """One line per combination whose time is no verdict (`compare.contended`: other processes
    held the CPUs on a side), with its figures, then what it means for the gate."""
    rows = table[table["verdict"] == UNSTABLE]
    if rows.empty:
        return []
    gate = "--strict fails on them" if strict else "not a failure (--strict fails on them)"
    return [
        *(
            f"unstable: {routed(r['strategy'], r['route'])} on {r['shapes']}: time "
            f"{ratio_text(r, 'wall')}; {r['wall_unstable_why']}"
            for _, r in rows.iterrows()
        ),
        f"unstable times are no verdict: a neighbour slows each strategy by its threads, by "
        f"another amount each run; {gate}; rerun on a quieter machine",
    ]


def _headline(args: argparse.Namespace, sides: dict[str, Results]) -> list[str]:
    """`base PATH: commit 1a2b3c4 · 2026-12-03 18:40 · unconstrained`, and new's."""
    return [f"{name} {getattr(args, name)}: {side_text(sides[name])}" for name in ("base", "new")]


def to_markdown(
    table: pd.DataFrame, args: argparse.Namespace, threshold: float, sides: dict[str, Results]
) -> str:
    """A GitHub-flavoured Markdown table and the gate's verdict, for a PR comment."""
    bad = failures(table, allow_missing=args.allow_missing, strict=args.strict)
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
        *[f"- {line}" for line in _headline(args, sides)],
        "",
        "| " + " | ".join(MARKDOWN_HEADER) + " |",
        "|" + "---|" * len(MARKDOWN_HEADER),
    ]
    for _, r in table.iterrows():
        cells = [
            r["shapes"],
            routed(r["strategy"], r["route"]),
            f"{int(r['ok_repeats_base'])}/{int(r['ok_repeats_new'])}",
            values_text(r, "peak"),
            ratio_text(r, "peak"),
            values_text(r, "wall"),
            ratio_text(r, "wall"),
            f"**{r['verdict']}**"
            if r["verdict"] in (REGRESSED, BROKEN, MISSING, UNSTABLE)
            else r["verdict"],
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lacks = _lacks(absent(table, MISSING), "new") + _lacks(absent(table, NEW_ONLY), "base")
    lacks += _apart(table) + _unstable(table, args.strict)
    return "\n".join(lines + ([""] + [f"- {line}" for line in lacks] if lacks else [])) + "\n"


def to_text(
    table: pd.DataFrame, args: argparse.Namespace, threshold: float, sides: dict[str, Results]
) -> str:
    """Each side's commit and limits, the table (values, NEW / BASE with its interval), what
    each side lacks, what was not comparable, and the gate's verdict."""
    lines = [f"new {args.new} / base {args.base}; {rule_text(threshold)}"]
    lines += _headline(args, sides) + [""]
    lines += _table_lines(table) + [""]
    lines.append("legend: " + "; ".join(f"{name}: {MEANINGS[name]}" for name in MEANINGS))
    lines += _lacks(absent(table, MISSING), "new") + _lacks(absent(table, NEW_ONLY), "base")
    lines += _apart(table) + _unstable(table, args.strict)
    few = table[table["verdict"] == UNDECIDED]
    if len(few):
        lines.append(
            f"too few repeats to call a regression (fewer than {MIN_REPEATS} ok a side): "
            + _named(few)
        )
    bad = failures(table, allow_missing=args.allow_missing, strict=args.strict)
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
    if row.verdict == UNSTABLE:
        return f"{where} (time unstable: no verdict, --strict)"
    what = " and ".join(m for m in ("peak", "wall") if getattr(row, f"{m}_verdict") == REGRESSED)
    return f"{where} ({what} regressed)"


def _json(
    table: pd.DataFrame, args: argparse.Namespace, threshold: float, sides: dict[str, Results]
) -> str:
    bad = failures(table, allow_missing=args.allow_missing, strict=args.strict)
    few = table[table["verdict"] == UNDECIDED]
    out = {
        "base": str(args.base),
        "new": str(args.new),
        "max_regression": threshold,
        "min_repeats": MIN_REPEATS,
        "confidence": CONFIDENCE,
        "allow_missing": bool(args.allow_missing),
        "allow_partial": bool(args.allow_partial),
        "strict": bool(args.strict),
        "base_runs": side_text(sides["base"]),
        "new_runs": side_text(sides["new"]),
        "not_comparable": [
            {**{k: _json_value(r[k]) for k in KEYS}, "change": r["configuration_change"]}
            for r in table[table["verdict"] == NOT_COMPARABLE].to_dict("records")
        ],
        "regressed": not bad.empty,
        "failed": [{k: _json_value(v) for k, v in r.items()} for r in bad[KEYS].to_dict("records")],
        "missing_in_new": absent(table, MISSING),
        "missing_in_base": absent(table, NEW_ONLY),
        "unstable": [
            {
                **{k: _json_value(r[k]) for k in KEYS},
                "why": r["wall_unstable_why"],
                "wall_difference": r["wall_difference"],
                "others_base": _json_value(r["others_base"]),
                "others_new": _json_value(r["others_new"]),
                "cpu_difference": r["cpu_difference"],
            }
            for r in table[table["verdict"] == UNSTABLE].to_dict("records")
        ],
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
        table = compare(sides["base"].phases, sides["new"].phases, threshold)
        _comparable(table)
    except BenchError as e:
        if args.json or args.format == "json":
            print(json.dumps({"error": str(e)}))
        raise
    form = "json" if args.json else args.format
    if form == "json":
        print(_json(table, args, threshold, sides))
    elif form == "markdown":
        print(to_markdown(table, args, threshold, sides), end="")
    else:
        print(to_text(table, args, threshold, sides), end="")
    return 0 if failures(table, allow_missing=args.allow_missing, strict=args.strict).empty else 1


_DESCRIPTION = (
    "BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes, "
    "cache, model, route: local, or source, link and concurrency) a metric (peak over baseline, "
    "time) differs where the 95% interval of NEW / BASE leaves out 1 (faster or slower, lighter "
    "or heavier), and has regressed where it is slower or heavier with that interval wholly over "
    f"the threshold; with fewer than {MIN_REPEATS} ok repeats a side no call is made (and that "
    "is said). A time where other processes held over a quarter of the CPUs on either side is "
    "unstable, not a verdict: exit 0 for it, 1 under --strict. "
    "A combination whose sides ran under different limits or options is not "
    "comparable and not judged; where none is, compare refuses. A folder holding part of a run "
    "is refused unless --allow-partial. Exit 1 when anything regressed, broke, or is in BASE and "
    "missing in NEW (unless --allow-missing), 0 if not, 2 on bad input."
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
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail on an unstable time too (other processes held over a quarter of the CPUs on "
        "either side), which is no verdict by default",
    )
    add_allow_partial(p)
    add_json(p)
    p.set_defaults(func=run_cli)
    return p
