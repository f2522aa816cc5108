"""`loadbench compare BASE NEW`: did a strategy get heavier or slower, beyond the noise? (a CI gate)

BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes,
route: a local load and one over s3 at concurrency 16 are two combinations) measured on either
side, over the ok repeats of each side:

    peak_ratio = median(peak - baseline in NEW) / median(peak - baseline in BASE)
    wall_ratio = median(wall_s in NEW) / median(wall_s in BASE)

with the spread of the repeats as a range: `*_lo` = NEW's best over BASE's worst repeat, `*_hi` =
NEW's worst over BASE's best. A metric has `regressed` when all three hold: its ratio exceeds
1 + threshold, its `_lo` exceeds 1 (even NEW's best repeat is worse than BASE's worst: beyond the
spread, the floor), and a one-sided Mann-Whitney U test of NEW > BASE gives p <= `ALPHA` (`*_p`).
`improved` is the mirror image. With fewer than `MIN_REPEATS` ok repeats on a side no such call is
made: the metric reads `too few repeats`. A combination ok in BASE with no ok repeat in NEW is
`broken`; one with no ok repeat on either side reads `skipped` where NEW skipped it (a peer not
installed, a strategy predicted not to fit) and `failed on both` otherwise, never `same`; one in
BASE and absent from NEW (not run, or its lines deleted) is `missing`; one only
in NEW is `only in new`. Each side's median `ceiling_ratio` (wall over its machine's ceiling,
`bench.run.ceiling`) is shown beside, as `ceiling_base` and `ceiling_new`, and so is its wall over
the same side's `floor` on the shape set (`floor_base`, `floor_new`); they take no part in
the verdict. The CLI exits 1 on regressed, broken or missing (unless `--allow-missing`), else 0
(2 on bad input). No jax.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
from scipy.stats import mannwhitneyu

from bench.errors import BenchError
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
MIN_REPEATS = 3  # ok repeats a side needs before a regression (or improvement) is called
ALPHA = 0.05  # the Mann-Whitney U test's level (3 against 3 fully apart gives p = 0.05)
MAX_THRESHOLD = 10.0  # --max-regression must be below 1000%
_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


def parse_threshold(text: str) -> float:
    """`5%` or `0.05` -> 0.05. Raises BenchError naming the option, the range and an example."""
    match = _THRESHOLD.match(str(text))
    if not match:
        raise BenchError(
            f"--max-regression: cannot read {text!r}; "
            "write a percentage such as 5% (or a fraction, 0.05)"
        )
    value = float(match.group(1)) / (100 if match.group(2) else 1)
    if value <= 0 or value >= MAX_THRESHOLD:
        raise BenchError(
            f"--max-regression: {text!r} is out of range; "
            f"give more than 0% and less than {MAX_THRESHOLD:.0%}, e.g. 5%"
        )
    return value


def _repeats(phases: pd.DataFrame) -> pd.DataFrame:
    """The whole-run `total` rows, with `peak_over_baseline_bytes`."""
    rows = with_route(headline(phases))
    rows = rows[rows["phase"] == TOTAL]
    over = pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"])
    ceiling = pd.to_numeric(rows.get("ceiling_ratio", pd.Series(index=rows.index, dtype=float)))
    return rows.assign(
        peak_over_baseline_bytes=over, wall_s=pd.to_numeric(rows["wall_s"]), ceiling=ceiling
    )


def _side(phases: pd.DataFrame) -> pd.DataFrame:
    """Per combination: repeats, ok repeats, and each metric's median/min/max/list (ok ones)."""
    rows = _repeats(phases)
    ok = rows[rows["status"] == OK]
    counts = rows.groupby(KEYS).agg(
        repeats=("result_id", "nunique"), status=("status", worst_status)
    )
    cols = list(METRICS.values())
    stats = ok.groupby(KEYS)[cols].agg(["median", "min", "max", list])
    stats.columns = ["_".join(pair) for pair in stats.columns]  # (metric, stat) -> metric_stat
    ok_counts = ok.groupby(KEYS).agg(
        ok_repeats=("result_id", "nunique"), ceiling=("ceiling", "median")
    )
    out = counts.join(ok_counts, how="left").join(stats, how="left")
    floor = ok[ok["kind"] == REFERENCE].groupby("shapes")["wall_s"].median().to_dict()
    shapes = out.index.get_level_values("shapes")
    floor_walls = [floor.get(name, float("nan")) for name in shapes]
    return out.assign(
        ok_repeats=out["ok_repeats"].fillna(0).astype(int),
        floor=out["wall_s_median"] / floor_walls,
    )


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
    for m, col in METRICS.items():
        _metric(both, m, col, threshold)
    both["verdict"] = _overall(both)
    drop = tuple(METRICS.values()) + ("_merge",)
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
    """`1.20x (1.15-1.26) p=0.05`: the median ratio of `m`, its spread and the U test's p."""
    if pd.isna(row[f"{m}_ratio"]):
        return "–"
    p = row[f"{m}_p"]
    test = f" p={p:.2f}" if not pd.isna(p) else ""
    return f"{row[f'{m}_ratio']:.2f}x ({row[f'{m}_ratio_lo']:.2f}-{row[f'{m}_ratio_hi']:.2f}){test}"


def sides_text(row: pd.Series, name: str) -> str:
    """`2.40x -> 2.10x`: each side's `ceiling` or `floor` ratio, wall over that side's own
    reference (`-` where unknown)."""
    sides = [row.get(f"{name}_{side}") for side in ("base", "new")]
    return " -> ".join("-" if v is None or pd.isna(v) else f"{v:.2f}x" for v in sides)


def rule_text(threshold: float) -> str:
    """The rule in one sentence (the header of the text and the dashboard's caption)."""
    return (
        f"a regression is over {threshold:.0%}, beyond the spread of repeats and p <= {ALPHA} "
        f"(Mann-Whitney U, one-sided); it needs {MIN_REPEATS} ok repeats a side"
    )
