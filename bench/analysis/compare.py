"""`loadbench compare BASE NEW`: did a strategy get heavier or slower, beyond the noise? (a CI gate)

BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes,
cache, model, route: a local load and one over s3 at concurrency 16 are two combinations)
measured on either side, over the ok repeats of each side, each metric is judged by the one rule
for "is it different?" (`bench.analysis.difference`: the ratio NEW / BASE of the geometric means
and its 95% interval, Welch's t on the logarithms):

- **peak** (`peak_*`): the peak over the baseline; `peak_base`, `peak_new` the sides' medians,
  `peak_ratio`, `_lo`, `_hi` the ratio and its interval, `peak_difference` its words (`1.20x
  heavier (95% CI 1.15-1.26)`).
- **time** (`wall_*`): judged on the paired ratios (each repeat's wall over the reference timed
  beside it, `bench.run.reference`) where both sides carry them, else on the walls (files from
  before the reference): a machine that was slower on one side slowed its reference too, so the
  ratio of the same moment is what moves only with the code. Where other processes took a
  different share of the CPUs on the two sides (a CPU-heavy neighbour on one), wall time moves
  by each strategy's threads, and the time is judged on the CPU ratios instead (each repeat's
  CPU seconds over its reference's: `bench.intervals.basis`); `wall_basis` says which
  (`paired`, `cpu`, `wall`). `wall_base`, `wall_new` are the sides' median walls.

A metric whose interval leaves out 1 is `faster` or `slower`, `lighter` or `heavier` (`m_verdict`);
one slower or heavier with its whole interval above 1 + threshold has `regressed`; else `same`.
One rule for contention, as `history` keeps it: a time where other processes held over
`SHARED_LIMIT` of the CPUs on either side (the median of the combination's repeats'
`others_cpu_fraction`, `bench.intervals.contention`) is `unstable`, not a verdict, whichever
way it moved (`contended`; why in `wall_unstable_why`, each side's share in `others_base`,
`others_new`): a neighbour slows each strategy by its threads, which its reference does not
undo, and by how much changes from one run to the next, which the repeats of one run cannot
show; nor does its CPU ratio hold still (`docs/bench.md`, "Beside other processes, no time
verdict"). The peak is judged as ever. The CLI exits 0 on an unstable time, 1 under `--strict`.
`wall_p`, `peak_p` are the one-sided p that NEW is greater (`_p_less`: smaller). With fewer than
`MIN_REPEATS` ok repeats on a side no call is made: `too few repeats`.

Configuration: a combination whose sides ran under different limits or options (`--cpus`,
`--host-ram`, `--disk-read-speed`, `--budget`, threads, cache policy, staging, model dtype:
`bench.records.configuration`) is `not comparable`, with what changed (`configuration_change`;
each side's in `configuration_base`, `configuration_new`), and is not judged.

A combination ok in BASE with no ok repeat in NEW is `broken`; one with no ok repeat on either side
reads `skipped` where NEW skipped it (a peer not installed, a strategy predicted not to fit) and
`failed on both` otherwise, never `same`; one in BASE and absent from NEW (not run, or its lines
deleted) is `missing`; one only in NEW is `only in new`. Each side's `x ceiling` and `x floor`
(`bench.records.results.MEANINGS`: their one definition) are shown beside, as `ceiling_base`,
`ceiling_new`, `floor_base` and `floor_new`; they take no part in the verdict. The threshold
carries its unit (`5%`, `1.05x`); a bare number is refused (`parse_threshold`). The CLI exits 1
on regressed, broken or missing (unless `--allow-missing`), else 0 (2 on bad input). No jax.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from bench.analysis.difference import (
    MEMORY_MEASURE,
    TIME_MEASURE,
    Difference,
    difference,
)
from bench.errors import BenchError
from bench.intervals import CPU_BASIS, PAIRED_BASIS, SHARED_LIMIT, WALL_BASIS, basis, contention
from bench.records.configuration import key_change, key_text, row_key
from bench.records.results import (
    ROUTE,
    headline,
    routed,
    summarize,
    with_route,
    worst_status,
    x_ceiling,
)
from bench.vocabulary import (
    BROKEN,
    FAILED_BOTH,
    HEAVIER,
    MISSING,
    NEW_ONLY,
    NOT_COMPARABLE,
    OK,
    REGRESSED,
    SAME,
    SKIPPED,
    SLOWER,
    UNDECIDED,
    UNSTABLE,
)
from loader.vocabulary import TOTAL
from shapes.sizes import MISSING as MISSING_CELL
from shapes.sizes import format_seconds, significant

KEYS = ["shapes", "strategy", "dtype", "devices", "processes", "cache", "model", ROUTE]
METRICS = {"peak": "peak_over_baseline_bytes", "wall": "wall_s"}
PAIRED = "paired_ratio"  # each repeat's wall over its own moment's reference
CPU = "cpu_ratio"  # each repeat's CPU seconds over its reference's
OTHERS = "others_cpu_fraction"  # the share of the CPUs other processes took meanwhile
MIN_REPEATS = 3  # ok repeats a side needs before a regression (or improvement) is called
MAX_THRESHOLD = 10.0  # --max-regression must be below 1000%
_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%|x|X|×)?\s*$")


def parse_threshold(text: str) -> float:
    """`5%` or `1.05x` -> 0.05. A bare number is refused: `5` could mean 5% or 500%. Raises
    BenchError naming the option, both forms and an example.

    Example:
        >>> parse_threshold("5%"), parse_threshold("1.05x")
        (0.05, 0.05...)
    """
    match = _THRESHOLD.match(str(text))
    forms = "write a percentage (5%) or a ratio (1.05x)"
    if not match:
        raise BenchError(f"--max-regression {text!r}: cannot read it; {forms}")
    number, unit = float(match.group(1)), match.group(2)
    if unit is None:
        raise BenchError(
            f"--max-regression {text!r}: a bare number has no unit ({number:g}% or "
            f"{number:g}x?); {forms}"
        )
    value = number / 100 if unit == "%" else number - 1
    if value <= 0 or value >= MAX_THRESHOLD:
        raise BenchError(
            f"--max-regression {text!r} is out of range: give more than 0% (1x) and less than "
            f"{MAX_THRESHOLD:.0%} ({1 + MAX_THRESHOLD:g}x), e.g. 5% or 1.05x"
        )
    return value


def _repeats(phases: pd.DataFrame) -> pd.DataFrame:
    """The whole-run `total` rows, with `peak_over_baseline_bytes`."""
    rows = with_route(headline(phases))
    rows = rows[rows["phase"] == TOTAL]
    over = pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"])

    def numbers(name: str) -> pd.Series:
        return pd.to_numeric(rows.get(name, pd.Series(index=rows.index, dtype=float)))

    return rows.assign(
        peak_over_baseline_bytes=over,
        wall_s=pd.to_numeric(rows["wall_s"]),
        configuration=pd.Series(
            [row_key(r) for r in rows.to_dict("records")], index=rows.index, dtype=object
        ),
        **{name: numbers(name) for name in (PAIRED, CPU, OTHERS)},
    )


def _side(phases: pd.DataFrame) -> pd.DataFrame:
    """Per combination: repeats, ok repeats, and each metric's median/min/max/list (ok ones)."""
    rows = _repeats(phases)
    ok = rows[rows["status"] == OK]
    counts = rows.groupby(KEYS).agg(
        repeats=("result_id", "nunique"),
        status=("status", worst_status),
        configuration=("configuration", lambda keys: tuple(sorted(set(keys)))),
    )
    cols = [*METRICS.values(), PAIRED, CPU, OTHERS]
    stats = ok.groupby(KEYS, dropna=False)[cols].agg(["median", "min", "max", list])
    stats.columns = ["_".join(pair) for pair in stats.columns]  # (metric, stat) -> metric_stat
    ok_counts = ok.groupby(KEYS).agg(ok_repeats=("result_id", "nunique"))
    out = counts.join(ok_counts, how="left").join(stats, how="left")
    return out.assign(ok_repeats=out["ok_repeats"].fillna(0).astype(int)).join(
        _ratios(phases), how="left"
    )


def _ratios(phases: pd.DataFrame) -> pd.DataFrame:
    """Per combination, the `x ceiling` and `x floor` every surface prints (their one definition:
    `bench.records.results.x_ceiling`, `with_floor_ratio`), as `ceiling` and `floor` (the median
    over a side's runs)."""
    summary = summarize(phases)
    if summary.empty:
        return pd.DataFrame(columns=["ceiling", "floor"])
    summary = summary.assign(ceiling=x_ceiling(summary), floor=summary["floor_ratio"])
    return summary.groupby(KEYS, dropna=False)[["ceiling", "floor"]].median()


def _sided(d: Difference) -> tuple[float, float]:
    """The one-sided p-values (NEW greater, NEW less) of a difference's two-sided Welch p."""
    if d.p != d.p:
        return d.p, d.p
    half = d.p / 2
    return (half, 1 - half) if d.ratio >= 1 else (1 - half, half)


def _judge(d: Difference, threshold: float, enough: bool) -> str:
    """One metric's verdict (`bench.analysis.difference`): REGRESSED where NEW is slower or
    heavier with its whole interval beyond 1 + threshold; else which way it differs (faster,
    slower within the threshold, lighter, heavier), SAME, or UNDECIDED with too few repeats."""
    if d.ratio != d.ratio:
        return MISSING_CELL
    if not enough or not d.judged:
        return UNDECIDED
    worse = d.direction in (SLOWER, HEAVIER)
    return REGRESSED if worse and d.beyond(1 + threshold) else d.direction


def _record(both: pd.DataFrame, m: str, found: list[Difference], verdicts: list[str]) -> None:
    """Add metric `m`'s ratio, interval, p-values, sentence and verdict to `both` (in place)."""
    both[f"{m}_ratio"] = [d.ratio for d in found]
    both[f"{m}_ratio_lo"] = [d.low for d in found]
    both[f"{m}_ratio_hi"] = [d.high for d in found]
    sided = [_sided(d) for d in found]
    both[f"{m}_p"] = [g for g, _ in sided]
    both[f"{m}_p_less"] = [s for _, s in sided]
    both[f"{m}_difference"] = [d.text() for d in found]
    both[f"{m}_verdict"] = verdicts


def _time_metric(both: pd.DataFrame, threshold: float, enough: pd.Series) -> None:
    """Add the time's ratio, interval, p, basis and verdict to `both` (in place): on the paired
    ratios where both sides carry them and their machines were shared alike, on the CPU ratios
    where they were not (`bench.intervals.basis`), else on the walls; UNSTABLE where either
    side's machine was shared (`contended`)."""
    found, bases = [], []
    for _, r in both.iterrows():
        basis = _basis(r)
        column = {PAIRED_BASIS: PAIRED, CPU_BASIS: CPU, WALL_BASIS: "wall_s"}[basis]
        base, new = _values(r[f"{column}_list_base"]), _values(r[f"{column}_list_new"])
        found.append(difference(base, new, measure=TIME_MEASURE))
        bases.append(basis)
    both["wall_base"], both["wall_new"] = both["wall_s_median_base"], both["wall_s_median_new"]
    verdicts = [_judge(d, threshold, e) for d, e in zip(found, enough)]
    for side in ("base", "new"):
        both[f"others_{side}"] = [
            contention(_cell_list(cell)) for cell in both[f"{OTHERS}_list_{side}"]
        ]
    why = [
        contended(v, r["others_base"], r["others_new"])
        for v, (_, r) in zip(verdicts, both.iterrows())
    ]
    verdicts = [UNSTABLE if w else v for v, w in zip(verdicts, why)]
    _record(both, "wall", found, verdicts)
    both["wall_basis"] = bases
    both["wall_unstable_why"] = why
    cpu = [_cpu_difference(r) for _, r in both.iterrows()]
    both["cpu_difference"] = [c.text() if c is not None else MISSING_CELL for c in cpu]


def _cpu_difference(r: pd.Series) -> Difference | None:
    """NEW's CPU ratios against BASE's (each repeat's CPU seconds over its reference's), where
    every ok repeat of both sides carries one; None where not."""
    base, new = _values(r[f"{CPU}_list_base"]), _values(r[f"{CPU}_list_new"])
    if not base or len(base) != r["ok_repeats_base"] or len(new) != r["ok_repeats_new"]:
        return None
    return difference(base, new, measure=TIME_MEASURE)


def contended(verdict: str, base: float | None, new: float | None) -> str:
    """Why a time's `verdict` is no verdict: other processes held over `SHARED_LIMIT` of the
    CPUs on either side (`base`, `new`: the median share of each side's repeats,
    `intervals.contention`; None or NaN: unknown, taken as quiet); "" where it stands (both
    sides quiet, or no call was made: too few repeats, no ratio).

    Example:
        >>> contended(REGRESSED, 0.46, 0.47)
        'other processes took 46% (base), 47% (new) of the CPUs (over 25% on a side)'
        >>> contended(REGRESSED, 0.0, 0.01)
        ''
    """
    shares = {"base": base, "new": new}
    known = {k: v for k, v in shares.items() if v is not None and v == v}
    if verdict in (UNDECIDED, MISSING_CELL) or not any(v > SHARED_LIMIT for v in known.values()):
        return ""
    took = ", ".join(f"{v:.0%} ({k})" for k, v in known.items())
    return f"other processes took {took} of the CPUs (over {SHARED_LIMIT:.0%} on a side)"


def _basis(r: pd.Series) -> str:
    """What one combination's time is judged on: paired or CPU ratios where every ok repeat of
    both sides carries them (`intervals.basis` picks), else the walls."""

    def whole(column: str) -> bool:
        new, base = _values(r[f"{column}_list_new"]), _values(r[f"{column}_list_base"])
        return bool(new) and len(new) == r["ok_repeats_new"] and len(base) == r["ok_repeats_base"]

    if not whole(PAIRED):
        return WALL_BASIS
    picked = basis(_cell_list(r[f"{OTHERS}_list_base"]), _cell_list(r[f"{OTHERS}_list_new"]))
    return picked if picked == PAIRED_BASIS or whole(CPU) else WALL_BASIS


def _cell_list(cell: Any) -> list[float | None]:
    return [None if v != v else float(v) for v in cell] if isinstance(cell, list) else []


def _values(cell: Any) -> list[float]:
    return [float(v) for v in cell if v == v] if isinstance(cell, list) else []


def _peak_metric(both: pd.DataFrame, threshold: float, enough: pd.Series) -> None:
    """Add the peak's medians, ratio, interval, p-values and verdict to `both` (in place)."""
    col = METRICS["peak"]
    both["peak_base"], both["peak_new"] = both[f"{col}_median_base"], both[f"{col}_median_new"]
    found = [
        difference(_values(b), _values(n), measure=MEMORY_MEASURE)
        for b, n in zip(both[f"{col}_list_base"], both[f"{col}_list_new"])
    ]
    _record(both, "peak", found, [_judge(d, threshold, e) for d, e in zip(found, enough)])


def _overall(both: pd.DataFrame) -> pd.Series:
    """One verdict a row: missing, only in new, not comparable, broken, regressed, too few, the
    ways it differs (`faster`, `lighter, slower`), or same."""
    verdicts = both[[f"{m}_verdict" for m in METRICS]]
    moved = [
        ", ".join(v for v in row if v not in (SAME, MISSING_CELL)) or SAME
        for row in verdicts.itertuples(index=False)
    ]
    out = pd.Series(moved, index=both.index, dtype=object)
    out[(verdicts == UNDECIDED).any(axis=1)] = UNDECIDED
    out[(verdicts == UNSTABLE).any(axis=1)] = UNSTABLE
    out[(verdicts == REGRESSED).any(axis=1)] = REGRESSED
    out[(both["ok_repeats_base"] > 0) & (both["ok_repeats_new"] == 0)] = BROKEN
    neither = (both["ok_repeats_base"] == 0) & (both["ok_repeats_new"] == 0)
    out[neither] = FAILED_BOTH
    out[neither & (both["status_new"] == SKIPPED)] = SKIPPED
    out[both["configuration_change"] != ""] = NOT_COMPARABLE
    out[both["_merge"] == "left_only"] = MISSING
    out[both["_merge"] == "right_only"] = NEW_ONLY
    return out


def _configurations(both: pd.DataFrame) -> None:
    """Add each side's configuration in words and what changed between them (empty: the same,
    or a side absent) to `both` (in place); a row whose configuration changed is not judged."""
    said: dict[str, list[str]] = {"base": [], "new": []}
    changes: list[str] = []
    for _, r in both.iterrows():
        keys = {side: r[f"configuration_{side}"] for side in ("base", "new")}
        for side, key in keys.items():
            said[side].append(
                "; ".join(key_text(k) for k in key) if isinstance(key, tuple) else MISSING_CELL
            )
        whole = all(isinstance(k, tuple) for k in keys.values())
        differ = whole and keys["base"] != keys["new"]
        changes.append(_change(keys["base"], keys["new"]) if differ else "")
    both["configuration_base"], both["configuration_new"] = said["base"], said["new"]
    both["configuration_change"] = changes
    for m in METRICS:
        apart = both["configuration_change"] != ""
        both.loc[apart, f"{m}_verdict"] = NOT_COMPARABLE
        both.loc[apart, f"{m}_difference"] = MISSING_CELL


def _change(base: tuple, new: tuple) -> str:
    """`CPU limit 1 -> -`: what differs between two sides' configurations."""
    if len(base) == 1 and len(new) == 1:
        return key_change(base[0], new[0])
    return f"{'; '.join(map(key_text, base))} -> {'; '.join(map(key_text, new))}"


def compare(base: pd.DataFrame, new: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """One row per combination measured in `base` or `new` phase frames (see the module doc).

    Columns: the keys, `repeats_base`, `repeats_new`, `ok_repeats_*` (0 on the side that lacks
    it), per metric m in (peak, wall): `m_base`, `m_new` (medians), `m_ratio`, `m_ratio_lo`,
    `m_ratio_hi`, `m_p` (NEW greater), `m_p_less`, `m_verdict`; and `verdict`.
    """
    both = (
        _side(base)
        .reset_index()
        .merge(
            _side(new).reset_index(),
            on=KEYS,
            how="outer",
            suffixes=("_base", "_new"),
            indicator=True,
        )
    )
    for side in ("base", "new"):
        for c in (f"repeats_{side}", f"ok_repeats_{side}"):
            both[c] = both[c].fillna(0).astype(int)
    enough = (both["ok_repeats_base"] >= MIN_REPEATS) & (both["ok_repeats_new"] >= MIN_REPEATS)
    _peak_metric(both, threshold, enough)
    _time_metric(both, threshold, enough)
    _configurations(both)
    both["verdict"] = _overall(both)
    drop = (*METRICS.values(), PAIRED, "_merge")
    keep = [c for c in both.columns if not c.startswith(drop)]
    return both[keep].sort_values(["shapes", "strategy"]).reset_index(drop=True)


def absent(table: pd.DataFrame, verdict: str) -> dict[str, list[Any]]:
    """What one side lacks: the shape sets it has no row of at all, the strategies absent from
    it on some shape set, and every combination (`verdict` MISSING: absent from NEW; NEW_ONLY:
    absent from BASE)."""
    gone = table[table["verdict"] == verdict]
    other = table[table["verdict"] != verdict]
    return {
        "shapes": sorted(set(gone["shapes"]) - set(other["shapes"])),
        "strategies": sorted(set(map(routed, gone["strategy"], gone[ROUTE]))),
        "combinations": [
            {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in gone[KEYS].to_dict("records")
        ],
    }


def failures(table: pd.DataFrame, *, allow_missing: bool, strict: bool = False) -> pd.DataFrame:
    """The rows that make the gate fail: regressed, broken, missing unless allowed, and
    unstable (`contended`: a time beside other processes) where `strict`."""
    bad = [REGRESSED, BROKEN] + ([] if allow_missing else [MISSING])
    return table[table["verdict"].isin(bad + ([UNSTABLE] if strict else []))]


def ratio_text(row: pd.Series, m: str) -> str:
    """A metric's difference in its own words (`bench.analysis.difference`): `1.32x faster (95%
    CI 1.20-1.45; paired)` for the time, with what it was judged on; `1.20x heavier (95% CI
    1.15-1.26)` for the peak; `–` without a ratio or where the configurations differ."""
    said = row.get(f"{m}_difference")
    if not isinstance(said, str) or said == MISSING_CELL:
        return MISSING_CELL
    if m == "wall":
        return f"{said[:-1]}; {row.get('wall_basis', WALL_BASIS)})" if said.endswith(")") else said
    return said


def values_text(row: pd.Series, m: str) -> str:
    """`0.38 s -> 0.51 s` (the time) or `757 MiB -> 760 MiB` (the peak): each side's median, in
    one unit for both (`-` where a side has none)."""
    base, new = row.get(f"{m}_base"), row.get(f"{m}_new")
    if m == "wall":
        return " -> ".join(format_seconds(v) for v in (base, new))
    known = [v for v in (base, new) if v is not None and v == v]
    unit, size = next(
        ((u, n) for u, n in (("GiB", 1 << 30), ("MiB", 1 << 20)) if known and max(known) >= n),
        ("KiB", 1 << 10),
    )
    return " -> ".join(
        MISSING_CELL if v is None or v != v else f"{significant(v / size)} {unit}"
        for v in (base, new)
    )


def sides_text(row: pd.Series, name: str) -> str:
    """`2.40x -> 2.10x`: each side's `ceiling` or `floor` ratio, wall over that side's own
    reference (`-` where unknown)."""
    sides = [row.get(f"{name}_{side}") for side in ("base", "new")]
    return " -> ".join(MISSING_CELL if v is None or pd.isna(v) else f"{v:.2f}x" for v in sides)


def rule_text(threshold: float) -> str:
    """The rule in one sentence (the header of the text and the dashboard's caption)."""
    return (
        "NEW differs from BASE where the 95% interval of NEW / BASE leaves out 1 (Welch's t on "
        "the logarithms: of the peaks; of the times as paired ratios, each repeat over the "
        "reference timed beside it, or CPU ratios where one side's machine was shared more); "
        f"a regression is slower or heavier with that interval wholly over {threshold:.0%} "
        f"({1 + threshold:.2f}x); it needs {MIN_REPEATS} ok repeats a side, and one "
        "configuration on both; a time where other processes held over "
        f"{SHARED_LIMIT:.0%} of the CPUs on either side is unstable, not a verdict"
    )
