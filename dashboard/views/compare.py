"""Compare: two runs (machines, versions, dates) side by side, NEW / BASE per strategy and shapes.

The same table, verdicts and lists of what either side lacks as `loadbench compare BASE NEW`
(`bench.analysis.compare`): peak over baseline and wall-time ratios with the spread of the
repeats and the U test's p, a regression only over the threshold, beyond that spread and with
enough repeats. A combination includes its route: a local load is never held against one over
s3, nor concurrency 1 against 64; a remote strategy is named with its route, and each side's
wall over its link's ceiling is shown beside.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from bench.analysis import compare as bench_compare
from bench.records.results import LOCAL, ROUTE, routed
from bench.vocabulary import MISSING, NEW_ONLY, UNDECIDED
from dashboard import charts, frames, link, style, widgets

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
DEFAULT_PERCENT = 5.0  # the threshold the page opens on, as `loadbench compare`'s example


def _fact(name: str, value: Any) -> str:
    """One fact as text: sizes in GiB, a missing one as "–" (as the report writes it)."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value == "":
        return "–"
    return style.size(value) if name == "ram_bytes" else str(value)


def machine_facts(runs: pd.DataFrame, base: str, new: str) -> pd.DataFrame:
    """The run records of `base` and `new` as two text columns, one row per fact."""
    out = {}
    for name, run_id in (("base", base), ("new", new)):
        rows = runs[runs["run_id"] == run_id]
        rec = rows.iloc[0].to_dict() if len(rows) else {}
        out[name] = [_fact(f, rec.get(f)) for f in FACTS]
    return pd.DataFrame(out, index=FACTS)


def _default_base(results: Any, ids: list[str], new: str) -> int:
    """The newest other complete, unconstrained run sharing a combination with `new` (else any
    other sharing one, else the next one)."""
    phases = results.phases
    mine = set(map(tuple, phases.loc[phases["run_id"] == new, KEYS].drop_duplicates().to_numpy()))
    facts = frames.run_facts(results.runs, phases)
    usual = set(facts.index[facts["usual"]]) if len(facts) else set()
    for i, run_id in sorted(enumerate(ids), key=lambda p: (p[1] not in usual, p[0])):
        theirs = set(
            map(tuple, phases.loc[phases["run_id"] == run_id, KEYS].drop_duplicates().to_numpy())
        )
        if run_id != new and mine & theirs:
            return i
    return 1


def _named(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` whose strategy names its route where it is remote (`pipelined · s3 · 1Gbit ·
    c16`): the table's rows and the chart's bars are one per combination, never per name."""
    return rows.assign(strategy=list(map(routed, rows["strategy"], rows[ROUTE])))


def _table(rows: pd.DataFrame) -> None:
    """The rows as `loadbench compare` prints them: ratio (spread, p), then the verdict; beside
    them, for a remote route, each side's wall over its link's ceiling."""
    remote = (rows[ROUTE] != LOCAL).any()
    shown = pd.DataFrame(
        {
            "strategy": rows["strategy"],
            "ok repeats (base/new)": [
                f"{b}/{n}"
                for b, n in zip(rows["ok_repeats_base"], rows["ok_repeats_new"], strict=True)
            ],
            "peak over baseline, new / base (spread, p)": [
                bench_compare.ratio_text(r, "peak") for _, r in rows.iterrows()
            ],
            "wall time, new / base (spread, p)": [
                bench_compare.ratio_text(r, "wall") for _, r in rows.iterrows()
            ],
            **(
                {
                    "wall ÷ ceiling (base → new)": [
                        bench_compare.sides_text(r, "ceiling") for _, r in rows.iterrows()
                    ]
                }
                if remote
                else {}
            ),
            "verdict": rows["verdict"],
        }
    )
    st.dataframe(shown, hide_index=True, width="stretch")


def _pick(results: Any, ids: list[str]) -> tuple[str, str, float]:
    """The base and new run pickers and the threshold (a fraction)."""
    cols = st.columns([2, 2, 1])
    with cols[1]:
        new = widgets.pick_run(results, key="compare_new", label="New")
    with cols[0]:
        index = _default_base(results, ids, new)
        base = widgets.pick_run(
            results, key="compare_base", label="Base", index=index, param=link.BASE
        )
    percent = link.bound(
        "compare_threshold",
        link.THRESHOLD,
        DEFAULT_PERCENT,
        lambda: cols[2].number_input(
            "Max regression (%)", 0.5, 500.0, step=0.5, key="compare_threshold"
        ),
        valid=lambda p: 0.5 <= p <= 500,
        omit=DEFAULT_PERCENT,
    )
    return base, new, percent / 100


def _lacks(both: pd.DataFrame) -> None:
    """What either side lacks, listed (the gate fails on what NEW lacks)."""
    for verdict, side in ((MISSING, "new"), (NEW_ONLY, "base")):
        what = bench_compare.absent(both, verdict)
        if what["combinations"]:
            sets = f"; shape sets: {', '.join(what['shapes'])}" if what["shapes"] else ""
            text = f"Missing in {side}: strategies {', '.join(what['strategies'])}{sets}."
            (st.error if side == "new" else st.info)(text)
    few = both[both["verdict"] == UNDECIDED]
    if len(few):
        st.warning(
            f"Too few repeats to call a regression (fewer than {bench_compare.MIN_REPEATS} ok "
            "a side): "
            + ", ".join(f"`{r.strategy}` on `{r.shapes}`" for r in _named(few).itertuples())
        )


def _verdict(both: pd.DataFrame, threshold: float) -> None:
    """The gate's answer, in `loadbench compare`'s words."""
    bad = bench_compare.failures(both, allow_missing=False)
    bad = bad[bad["verdict"] != MISSING]  # listed by `_lacks` above
    if len(bad):
        st.error(
            "Failed: "
            + ", ".join(
                f"`{r.strategy}` on `{r.shapes}` ({r.verdict})" for r in _named(bad).itertuples()
            )
        )
    elif not (both["verdict"] == MISSING).any():
        st.success(f"No regression: {bench_compare.rule_text(threshold)}.")


def main() -> None:
    st.title("Compare")
    st.caption(
        "New relative to base: below 1 means lighter or faster. Bars: median ratio; whiskers: "
        "the spread of the repeats."
    )
    results = widgets.page_results()
    ids = list(dict.fromkeys(widgets.run_ids(results)))
    if len(ids) < 2:
        st.info(
            "Only one run in the results folder; run the bench again (another machine, "
            "allocator or version) to compare."
        )
        return
    base, new, threshold = _pick(results, ids)
    phases = results.phases
    both = bench_compare.compare(
        phases[phases["run_id"] == base], phases[phases["run_id"] == new], threshold
    )
    _lacks(both)
    _verdict(both, threshold)
    measured = both[~both["verdict"].isin([MISSING, NEW_ONLY])]
    for shapes in sorted(measured["shapes"].unique()):
        rows = _named(measured[measured["shapes"] == shapes])
        st.subheader(f"Shape set `{shapes}`")
        st.altair_chart(charts.compare_bars(rows), width="stretch")
        _table(rows)
    st.caption(
        f"Spread: new's best repeat over base's worst, to new's worst over base's best; "
        f"{bench_compare.rule_text(threshold)}."
    )
    st.subheader("Machine facts")
    st.table(machine_facts(results.runs, base, new))
    st.caption(
        f"In a terminal or CI: `loadbench compare BASE NEW --max-regression {threshold:.0%}` "
        "(exit 1 on a regression, or a strategy of BASE missing in NEW)."
    )


main()
