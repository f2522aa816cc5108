"""`loadbench compare BASE NEW`: did a strategy get heavier or slower, beyond the noise? (a CI gate)

BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes,
route: a local load and one over s3 at concurrency 16 are two combinations) measured on either
side, over the ok repeats of each side:

- **peak**: `peak_ratio = median(peak - baseline in NEW) / median(peak - baseline in BASE)`, with
  the spread of the repeats as a range (`peak_ratio_lo` = NEW's best over BASE's worst repeat,
  `_hi` = NEW's worst over BASE's best). It has `regressed` when its ratio exceeds
  1 + threshold, its `_lo` exceeds 1 (beyond the spread), and a one-sided Mann-Whitney U test
  of NEW > BASE gives p <= `ALPHA` (`peak_p`).
- **time** (`wall_*`): judged on the paired ratios (each repeat's wall over the reference timed
  beside it, `bench.run.reference`) where both sides carry them, else on the walls (files from
  before the reference). `wall_ratio` is NEW's geometric mean over BASE's, and `wall_ratio_lo`,
  `_hi` its 95% interval (Welch's t on the logarithms, `ratio_interval`): a machine that was
  slower on one side slowed its reference too, so the ratio of the same moment is what moves
  only with the code. Where other processes took a different share of the CPUs on the two sides
  (a CPU-heavy neighbour on one), wall time moves by each strategy's threads, and the time is
  judged on the CPU ratios instead (each repeat's CPU seconds over its reference's:
  `bench.intervals.basis`); `wall_basis` says which (`paired`, `cpu`, `wall`). It has
  `regressed` when the whole interval lies above 1 + threshold: slower by more than the
  threshold, with 95% confidence (`wall_p` is the one-sided p that it is slower at all).

`improved` is the mirror image of either. With fewer than `MIN_REPEATS` ok repeats on a side no
such call is made: the metric reads `too few repeats`. A combination ok in BASE with no ok repeat
in NEW is `broken`; one with no ok repeat on either side reads `skipped` where NEW skipped it (a
peer not installed, a strategy predicted not to fit) and `failed on both` otherwise, never
`same`; one in BASE and absent from NEW (not run, or its lines deleted) is `missing`; one only in
NEW is `only in new`. Each side's median `ceiling_ratio` (wall over its machine's ceiling,
`bench.run.ceiling`) is shown beside, as `ceiling_base` and `ceiling_new`, and so is its time over
the same side's `floor` on the shape set (`floor_base`, `floor_new`); they take no part in the
verdict. The threshold carries its unit (`5%`, `1.05x`); a bare number is refused
(`parse_threshold`). The CLI exits 1 on regressed, broken or missing (unless `--allow-missing`),
else 0 (2 on bad input). No jax.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu
from scipy.stats import t as student_t

from bench.errors import BenchError
from bench.intervals import CPU_BASIS, PAIRED_BASIS, WALL_BASIS, basis
from bench.records.results import ROUTE, headline, routed, with_route, worst_status
from bench.vocabulary import (
    BROKEN,
    FAILED_BOTH,
    IMPROVED,
    MISSING,
    NEW_ONLY,
    OK,
    REGRESSED,
    SAME,
    SKIPPED,
    UNDECIDED,
)
from loader.vocabulary import REFERENCE, TOTAL

KEYS = ["shapes", "strategy", "dtype", "devices", "processes", ROUTE]
METRICS = {"peak": "peak_over_baseline_bytes", "wall": "wall_s"}
PAIRED = "paired_ratio"  # each repeat's wall over its own moment's reference
CPU = "cpu_ratio"  # each repeat's CPU seconds over its reference's
OTHERS = "others_cpu_fraction"  # the share of the CPUs other processes took meanwhile
MIN_REPEATS = 3  # ok repeats a side needs before a regression (or improvement) is called
ALPHA = 0.05  # the Mann-Whitney U test's level (3 against 3 fully apart gives p = 0.05)
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
    ceiling = pd.to_numeric(rows.get("ceiling_ratio", pd.Series(index=rows.index, dtype=float)))

    def numbers(name: str) -> pd.Series:
        return pd.to_numeric(rows.get(name, pd.Series(index=rows.index, dtype=float)))

    return rows.assign(
        peak_over_baseline_bytes=over,
        wall_s=pd.to_numeric(rows["wall_s"]),
        ceiling=ceiling,
        **{name: numbers(name) for name in (PAIRED, CPU, OTHERS)},
    )


def _side(phases: pd.DataFrame) -> pd.DataFrame:
    """Per combination: repeats, ok repeats, and each metric's median/min/max/list (ok ones)."""
    rows = _repeats(phases)
    ok = rows[rows["status"] == OK]
    counts = rows.groupby(KEYS).agg(
        repeats=("result_id", "nunique"), status=("status", worst_status)
    )
    cols = [*METRICS.values(), PAIRED, CPU, OTHERS]
    stats = ok.groupby(KEYS, dropna=False)[cols].agg(["median", "min", "max", list])
    stats.columns = ["_".join(pair) for pair in stats.columns]  # (metric, stat) -> metric_stat
    ok_counts = ok.groupby(KEYS).agg(
        ok_repeats=("result_id", "nunique"), ceiling=("ceiling", "median")
    )
    out = counts.join(ok_counts, how="left").join(stats, how="left")
    reference = ok[ok["kind"] == REFERENCE].groupby("shapes")
    floor = reference["wall_s"].median().to_dict()
    floor_paired = reference[PAIRED].median().to_dict()
    shapes = out.index.get_level_values("shapes")
    floor_walls = pd.Series([floor.get(n, float("nan")) for n in shapes], index=out.index)
    paired_floor = pd.Series([floor_paired.get(n, float("nan")) for n in shapes], index=out.index)
    by_wall = out["wall_s_median"] / floor_walls
    by_pair = out[f"{PAIRED}_median"] / paired_floor
    return out.assign(
        ok_repeats=out["ok_repeats"].fillna(0).astype(int),
        floor=by_pair.where(by_pair.notna(), by_wall),
    )


def ratio_interval(new: list[float], base: list[float]) -> tuple[float, float, float, float]:
    """NEW's geometric mean over BASE's, its 95% interval and the one-sided p that NEW is
    greater (Welch's t on the logarithms: the two sides may spread differently). The interval
    and p are NaN where a side has fewer than two positive values (all NaN with none).

    Example:
        >>> ratio, low, high, p = ratio_interval([1.3, 1.31, 1.29], [1.0, 1.01, 0.99])
        >>> round(ratio, 2), low > 1, p < 0.01
        (1.3, True, True)
    """
    a = [math.log(v) for v in new if v > 0 and math.isfinite(v)]
    b = [math.log(v) for v in base if v > 0 and math.isfinite(v)]
    nan = float("nan")
    if not a or not b:
        return nan, nan, nan, nan
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:  # a ratio, but no interval: one repeat says nothing of noise
        return math.exp(diff), nan, nan, nan
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(diff), math.exp(diff), math.exp(diff), 0.0 if diff > 0 else 1.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(student_t.ppf(0.975, df)) * se
    p_greater = float(student_t.sf(diff / se, df))
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half), p_greater


def _time_metric(both: pd.DataFrame, threshold: float, enough: pd.Series) -> None:
    """Add the time's ratio, 95% interval, p, basis and verdict to `both` (in place): on the
    paired ratios where both sides carry them and their machines were shared alike, on the CPU
    ratios where they were not (`bench.intervals.basis`), else on the walls."""
    figures, bases = [], []
    for _, r in both.iterrows():
        basis = _basis(r)
        column = {PAIRED_BASIS: PAIRED, CPU_BASIS: CPU, WALL_BASIS: "wall_s"}[basis]
        new, base = _values(r[f"{column}_list_new"]), _values(r[f"{column}_list_base"])
        figures.append(ratio_interval(new, base))
        bases.append(basis)
    both["wall_base"], both["wall_new"] = both["wall_s_median_base"], both["wall_s_median_new"]
    for i, name in enumerate(("wall_ratio", "wall_ratio_lo", "wall_ratio_hi", "wall_p")):
        both[name] = [f[i] for f in figures]
    both["wall_p_less"] = [1 - f[3] if f[3] == f[3] else f[3] for f in figures]
    both["wall_basis"] = bases
    both["wall_verdict"] = [
        _time_verdict(r, threshold, e) for (_, r), e in zip(both.iterrows(), enough)
    ]


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


def _time_verdict(r: pd.Series, threshold: float, enough: bool) -> str:
    """Regressed: the whole 95% interval above 1 + threshold (slower by more than the threshold,
    with confidence); improved: the whole interval below 1 - threshold."""
    ratio, lo, hi = r["wall_ratio"], r["wall_ratio_lo"], r["wall_ratio_hi"]
    if pd.isna(ratio):
        return UNDECIDED if not pd.isna(r["wall_base"]) and not pd.isna(r["wall_new"]) else "–"
    if not enough:
        return UNDECIDED
    if lo > 1 + threshold:
        return REGRESSED
    if hi < 1 - threshold:
        return IMPROVED
    return SAME


def _p_values(new: Any, base: Any) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values (NEW greater, NEW less); NaN when a side has no values."""
    if not isinstance(new, list) or not isinstance(base, list) or not new or not base:
        return float("nan"), float("nan")
    greater = mannwhitneyu(new, base, alternative="greater").pvalue
    less = mannwhitneyu(new, base, alternative="less").pvalue
    return float(greater), float(less)


def _verdict(r: pd.Series, m: str, threshold: float, enough: bool) -> str:
    ratio, lo, hi = r[f"{m}_ratio"], r[f"{m}_ratio_lo"], r[f"{m}_ratio_hi"]
    if pd.isna(ratio):
        return "–"
    if not enough:
        return UNDECIDED
    if ratio > 1 + threshold and lo > 1 and r[f"{m}_p"] <= ALPHA:
        return REGRESSED
    if ratio < 1 - threshold and hi < 1 and r[f"{m}_p_less"] <= ALPHA:
        return IMPROVED
    return SAME


def _metric(both: pd.DataFrame, m: str, col: str, threshold: float) -> None:
    """Add metric `m`'s medians, ratios, spread, p-values and verdict to `both` (in place)."""
    both[f"{m}_base"], both[f"{m}_new"] = both[f"{col}_median_base"], both[f"{col}_median_new"]
    both[f"{m}_ratio"] = both[f"{m}_new"] / both[f"{m}_base"]
    both[f"{m}_ratio_lo"] = both[f"{col}_min_new"] / both[f"{col}_max_base"]
    both[f"{m}_ratio_hi"] = both[f"{col}_max_new"] / both[f"{col}_min_base"]
    p = [_p_values(n, b) for n, b in zip(both[f"{col}_list_new"], both[f"{col}_list_base"])]
    both[f"{m}_p"] = [g for g, _ in p]
    both[f"{m}_p_less"] = [s for _, s in p]
    enough = (both["ok_repeats_base"] >= MIN_REPEATS) & (both["ok_repeats_new"] >= MIN_REPEATS)
    both[f"{m}_verdict"] = [
        _verdict(r, m, threshold, e) for (_, r), e in zip(both.iterrows(), enough)
    ]


def _overall(both: pd.DataFrame) -> pd.Series:
    """One verdict a row: missing, only in new, broken, regressed, too few, improved or same."""
    verdicts = both[[f"{m}_verdict" for m in METRICS]]
    out = pd.Series(SAME, index=both.index, dtype=object)
    out[(verdicts == IMPROVED).any(axis=1)] = IMPROVED
    out[(verdicts == UNDECIDED).any(axis=1)] = UNDECIDED
    out[(verdicts == REGRESSED).any(axis=1)] = REGRESSED
    out[(both["ok_repeats_base"] > 0) & (both["ok_repeats_new"] == 0)] = BROKEN
    neither = (both["ok_repeats_base"] == 0) & (both["ok_repeats_new"] == 0)
    out[neither] = FAILED_BOTH
    out[neither & (both["status_new"] == SKIPPED)] = SKIPPED
    out[both["_merge"] == "left_only"] = MISSING
    out[both["_merge"] == "right_only"] = NEW_ONLY
    return out


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
    _metric(both, "peak", METRICS["peak"], threshold)
    enough = (both["ok_repeats_base"] >= MIN_REPEATS) & (both["ok_repeats_new"] >= MIN_REPEATS)
    _time_metric(both, threshold, enough)
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


def failures(table: pd.DataFrame, *, allow_missing: bool) -> pd.DataFrame:
    """The rows that make the gate fail: regressed, broken, and missing unless allowed."""
    bad = [REGRESSED, BROKEN] + ([] if allow_missing else [MISSING])
    return table[table["verdict"].isin(bad)]


def ratio_text(row: pd.Series, m: str) -> str:
    """`1.20x (1.15-1.26) p=0.05` for the peak: its median ratio, the repeats' spread and the U
    test's p; `1.31x (95% CI 1.22-1.40, paired)` for the time: its ratio, 95% interval and
    basis."""
    if pd.isna(row[f"{m}_ratio"]):
        return "–"
    ratio, lo, hi = row[f"{m}_ratio"], row[f"{m}_ratio_lo"], row[f"{m}_ratio_hi"]
    if m == "wall":
        return f"{ratio:.2f}x (95% CI {lo:.2f}-{hi:.2f}, {row.get('wall_basis', WALL_BASIS)})"
    p = row[f"{m}_p"]
    test = f" p={p:.2f}" if not pd.isna(p) else ""
    return f"{ratio:.2f}x ({lo:.2f}-{hi:.2f}){test}"


def sides_text(row: pd.Series, name: str) -> str:
    """`2.40x -> 2.10x`: each side's `ceiling` or `floor` ratio, wall over that side's own
    reference (`-` where unknown)."""
    sides = [row.get(f"{name}_{side}") for side in ("base", "new")]
    return " -> ".join("-" if v is None or pd.isna(v) else f"{v:.2f}x" for v in sides)


def rule_text(threshold: float) -> str:
    """The rule in one sentence (the header of the text and the dashboard's caption)."""
    return (
        f"a regression is over {threshold:.0%} ({1 + threshold:.2f}x): for a peak, beyond the "
        f"spread of repeats and p <= {ALPHA} (Mann-Whitney U, one-sided); for a time, its 95% "
        "interval wholly above the threshold (Welch's t on the logarithms of the paired ratios, "
        "each repeat over the reference timed beside it; of the CPU ratios where one side's "
        f"machine was shared more); it needs {MIN_REPEATS} ok repeats a side"
    )
