"""Two runs compared, without Streamlit: what the Compare page and the report's Compare section
show, in `loadbench compare`'s words (`bench.analysis.compare`).

`compared(results, base, new, threshold)` holds, once: the rows per shape set (a combination
includes its route: a local load is never held against one over s3, nor concurrency 1 against
64), their table, the gate's answer, what either side lacks, and both runs' machine facts.
`default_base` picks the run a new one is compared with by default. No jax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.analysis import compare as bench_compare
from bench.records.results import LOCAL, ROUTE, Results, routed
from bench.vocabulary import MISSING, NEW_ONLY, UNDECIDED
from dashboard import frames, style

FACTS = [
    "machine",
    "started_utc",
    "cpu_model",
    "cpu_count",
    "ram_bytes",
    "kernel",
    "python",
    "jax_version",
    "flax_version",
    "safetensors_version",
    "numpy_version",
    "loadbench_version",
    "allocator_env",
    "command",
]
KEYS = bench_compare.KEYS
DEFAULT_THRESHOLD = 0.05  # `loadbench compare`'s example, `--max-regression 5%`
ERROR, WARNING, INFO, SUCCESS = "error", "warning", "info", "success"  # how a sentence is boxed


def _fact(name: str, value: Any) -> str:
    """One fact as text: sizes in GiB, a missing one as "-"."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value == "":
        return style.UNKNOWN
    return style.size(value) if name == "ram_bytes" else str(value)


def machine_facts(runs: pd.DataFrame, base: str, new: str) -> pd.DataFrame:
    """The run records of `base` and `new` as two text columns, one row per fact."""
    out = {}
    for name, run_id in (("base", base), ("new", new)):
        rows = runs[runs["run_id"] == run_id]
        rec = rows.iloc[0].to_dict() if len(rows) else {}
        out[name] = [_fact(f, rec.get(f)) for f in FACTS]
    return pd.DataFrame(out, index=FACTS)


def _combinations(phases: pd.DataFrame, run_id: str) -> set[tuple]:
    return set(map(tuple, phases.loc[phases["run_id"] == run_id, KEYS].drop_duplicates().values))


def default_base(results: Results, new: str) -> str | None:
    """The run `new` is compared with by default: the newest complete, unconstrained run before
    it sharing a combination with it (else one after it, else any other sharing one); None
    where no run does."""
    facts = frames.run_facts(results.runs, results.phases)
    if facts.empty or new not in facts.index:
        return None
    mine = _combinations(results.phases, new)
    started = facts.loc[new, "started_utc"]
    ordered = sorted(  # stable: newest first within each kind
        facts["run_id"],
        key=lambda r: (facts.loc[r, "started_utc"] > started, not facts.loc[r, "usual"]),
    )
    return next((r for r in ordered if r != new and mine & _combinations(results.phases, r)), None)


def named(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` whose strategy names its route where it is remote (`pipelined · s3 · 1Gbit ·
    c16`): the table's rows and the chart's bars are one per combination, never per name."""
    return rows.assign(strategy=list(map(routed, rows["strategy"], rows[ROUTE])))


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows as `loadbench compare` prints them: the ratios with their spread or interval,
    then the verdict; beside them, for a remote route, each side's wall over its link's
    ceiling."""
    ceiling = (
        {
            "wall ÷ ceiling (base → new)": [
                bench_compare.sides_text(r, "ceiling") for r in _each(rows)
            ]
        }
        if (rows[ROUTE] != LOCAL).any()
        else {}
    )
    return pd.DataFrame(
        {
            "strategy": rows["strategy"],
            "ok repeats (base/new)": [
                f"{b}/{n}"
                for b, n in zip(rows["ok_repeats_base"], rows["ok_repeats_new"], strict=True)
            ],
            "peak over baseline, new / base": [
                bench_compare.ratio_text(r, "peak") for r in _each(rows)
            ],
            "time, new / base": [bench_compare.ratio_text(r, "wall") for r in _each(rows)],
            **ceiling,
            "verdict": rows["verdict"],
        }
    )


def _each(rows: pd.DataFrame) -> list[pd.Series]:
    return [r for _, r in rows.iterrows()]


def lacks(both: pd.DataFrame) -> list[tuple[str, str]]:
    """What either side lacks, where a time is unstable because other processes shared the
    machine, and where too few repeats stand, as (box, sentence): the gate fails on what NEW
    lacks."""
    out = []
    for verdict, side, box in ((MISSING, "new", ERROR), (NEW_ONLY, "base", INFO)):
        what = bench_compare.absent(both, verdict)
        if what["combinations"]:
            sets = f"; shape sets: {', '.join(what['shapes'])}" if what["shapes"] else ""
            out.append(
                (box, f"Missing in {side}: strategies {', '.join(what['strategies'])}{sets}.")
            )
    busy = both[both.get("wall_unstable_why", pd.Series("", index=both.index)).astype(bool)]
    if len(busy):
        listed = "; ".join(
            f"`{r.strategy}` on `{r.shapes}`: {r.wall_unstable_why}"
            for r in named(busy).itertuples()
        )
        out.append((WARNING, f"Times unstable, not a failure: {listed}."))
    few = both[both["verdict"] == UNDECIDED]
    if len(few):
        listed = ", ".join(f"`{r.strategy}` on `{r.shapes}`" for r in named(few).itertuples())
        out.append(
            (
                WARNING,
                f"Too few repeats to call a regression (fewer than {bench_compare.MIN_REPEATS} ok "
                f"a side): {listed}",
            )
        )
    return out


def verdict(both: pd.DataFrame, threshold: float) -> tuple[str, str] | None:
    """The gate's answer in `loadbench compare`'s words, as (box, sentence); None where only
    what NEW lacks fails it (said by `lacks`)."""
    bad = bench_compare.failures(both, allow_missing=False)
    bad = bad[bad["verdict"] != MISSING]
    if len(bad):
        listed = ", ".join(
            f"`{r.strategy}` on `{r.shapes}` ({r.verdict})" for r in named(bad).itertuples()
        )
        return ERROR, f"Failed: {listed}"
    if (both["verdict"] == MISSING).any():
        return None
    return SUCCESS, f"No regression: {bench_compare.rule_text(threshold)}."


@dataclass(frozen=True)
class Compared:
    """Two runs compared: each shape set's rows (named with their routes), the gate's answer
    and what either side lacks (each a (box, sentence)), and the machine facts."""

    base: str
    new: str
    threshold: float
    shape_sets: dict[str, pd.DataFrame]
    said: tuple[tuple[str, str], ...]
    facts: pd.DataFrame


def compared(results: Results, base: str, new: str, threshold: float) -> Compared:
    """`base` and `new` compared at `threshold` (a fraction: 0.05 for 5%)."""
    phases = results.phases
    both = bench_compare.compare(
        phases[phases["run_id"] == base], phases[phases["run_id"] == new], threshold
    )
    answer = verdict(both, threshold)
    measured = both[~both["verdict"].isin([MISSING, NEW_ONLY])]
    return Compared(
        base,
        new,
        threshold,
        {s: named(measured[measured["shapes"] == s]) for s in sorted(measured["shapes"].unique())},
        (*lacks(both), *([answer] if answer else [])),
        machine_facts(results.runs, base, new),
    )


def command(base: str, new: str, threshold: float) -> str:
    """`loadbench compare BASE NEW --max-regression 5%`: the gate in a terminal or CI."""
    return f"loadbench compare {base} {new} --max-regression {threshold * 100:g}%"
