"""`loadbench compare BASE NEW`: did a strategy get heavier or slower, beyond the noise? (a CI gate)

BASE and NEW are results files or folders. Per (shapes, strategy, dtype, devices, processes)
measured in both, over the ok repeats of each side:

    peak_ratio = median(peak - baseline in NEW) / median(peak - baseline in BASE)
    wall_ratio = median(wall_s in NEW) / median(wall_s in BASE)

with the spread of the repeats as a range: `*_lo` = NEW's best over BASE's worst repeat, `*_hi` =
NEW's worst over BASE's best. A metric has `regressed` when its ratio exceeds 1 + threshold AND its
`_lo` exceeds 1 (even NEW's best repeat is worse than BASE's worst: the change is beyond the
spread); `improved` is the mirror image. A combination that was ok in BASE and has no ok repeat in
NEW is `broken`. Each side's median `ceiling_ratio` (wall over its machine's ceiling,
`bench.run.ceiling`) is shown beside, as `ceiling_base` and `ceiling_new`; it takes no part in the
verdict. The exit status is 1 when anything regressed or broke, else 0 (2 on bad input). No
jax.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.records.results import headline
from bench.vocabulary import BROKEN, COMPARE_FAILURES, IMPROVED, REGRESSED, SAME
from loader.vocabulary import OK, TOTAL

KEYS = ["shapes", "strategy", "dtype", "devices", "processes"]
METRICS = {"peak": "peak_over_baseline_bytes", "wall": "wall_s"}
_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


def parse_threshold(text: str) -> float:
    """`5%` or `0.05` -> 0.05. Raises BenchError naming the option and an example."""
    match = _THRESHOLD.match(str(text))
    if not match:
        raise BenchError(
            f"--max-regression: cannot read {text!r}; write a percentage such as 5% "
            "(or a fraction, 0.05)"
        )
    value = float(match.group(1)) / (100 if match.group(2) else 1)
    if value <= 0 or value >= 10:
        raise BenchError(f"--max-regression: {text!r} is out of range; use e.g. 5% (more than 0)")
    return value


def _repeats(phases: pd.DataFrame) -> pd.DataFrame:
    """The whole-run `total` rows, with `peak_over_baseline_bytes`."""
    rows = headline(phases)
    rows = rows[rows["phase"] == TOTAL]
    over = pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"])
    ceiling = pd.to_numeric(rows.get("ceiling_ratio", pd.Series(index=rows.index, dtype=float)))
    return rows.assign(
        peak_over_baseline_bytes=over, wall_s=pd.to_numeric(rows["wall_s"]), ceiling=ceiling
    )


def _side(phases: pd.DataFrame) -> pd.DataFrame:
    """Per combination: repeats, ok repeats and median/min/max of each metric over the ok ones."""
    rows = _repeats(phases)
    ok = rows[rows["status"] == OK]
    counts = rows.groupby(KEYS).agg(repeats=("result_id", "nunique"))
    stats = ok.groupby(KEYS)[list(METRICS.values())].agg(["median", "min", "max"])
    stats.columns = ["_".join(pair) for pair in stats.columns]  # (metric, stat) -> metric_stat
    ok_counts = ok.groupby(KEYS).agg(
        ok_repeats=("result_id", "nunique"), ceiling=("ceiling", "median")
    )
    out = counts.join(ok_counts, how="left").join(stats, how="left")
    return out.assign(ok_repeats=out["ok_repeats"].fillna(0).astype(int))


def _verdict(ratio: float, lo: float, hi: float, threshold: float) -> str:
    if pd.isna(ratio):
        return "–"
    if ratio > 1 + threshold and lo > 1:
        return REGRESSED
    if ratio < 1 - threshold and hi < 1:
        return IMPROVED
    return SAME


def compare(base: pd.DataFrame, new: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """One row per combination measured in both `base` and `new` phase frames (see the module doc).

    Columns: the keys, `repeats_base`, `repeats_new`, `ok_repeats_*`, per metric m in (peak, wall):
    `m_base`, `m_new` (medians), `m_ratio`, `m_ratio_lo`, `m_ratio_hi`, `m_verdict`; and `verdict`
    (broken, regressed, improved or same).
    """
    both = (
        _side(base)
        .reset_index()
        .merge(_side(new).reset_index(), on=KEYS, suffixes=("_base", "_new"))
    )
    for m, col in METRICS.items():
        both[f"{m}_base"], both[f"{m}_new"] = both[f"{col}_median_base"], both[f"{col}_median_new"]
        both[f"{m}_ratio"] = both[f"{m}_new"] / both[f"{m}_base"]
        both[f"{m}_ratio_lo"] = both[f"{col}_min_new"] / both[f"{col}_max_base"]
        both[f"{m}_ratio_hi"] = both[f"{col}_max_new"] / both[f"{col}_min_base"]
        both[f"{m}_verdict"] = [
            _verdict(r, lo, hi, threshold)
            for r, lo, hi in both[[f"{m}_ratio", f"{m}_ratio_lo", f"{m}_ratio_hi"]].itertuples(
                index=False
            )
        ]
    broken = (both["ok_repeats_base"] > 0) & (both["ok_repeats_new"] == 0)
    verdicts = both[["peak_verdict", "wall_verdict"]]
    both["verdict"] = SAME
    both.loc[(verdicts == IMPROVED).any(axis=1), "verdict"] = IMPROVED
    both.loc[(verdicts == REGRESSED).any(axis=1), "verdict"] = REGRESSED
    both.loc[broken, "verdict"] = BROKEN
    keep = [c for c in both.columns if not c.startswith(tuple(METRICS.values()))]
    return both[keep].sort_values(["shapes", "strategy"]).reset_index(drop=True)


def ratio_text(row: pd.Series, m: str) -> str:
    """`1.20x (1.15-1.26)`: the median ratio of metric `m` and, in brackets, its spread."""
    if pd.isna(row[f"{m}_ratio"]):
        return "-"
    return f"{row[f'{m}_ratio']:.2f}x ({row[f'{m}_ratio_lo']:.2f}-{row[f'{m}_ratio_hi']:.2f})"


def ceiling_text(row: pd.Series) -> str:
    """`2.40x -> 2.10x`: each side's wall over its machine's ceiling (`-` where unknown)."""
    sides = [row.get(f"ceiling_{side}") for side in ("base", "new")]
    return " -> ".join("-" if v is None or pd.isna(v) else f"{v:.2f}x" for v in sides)


def to_text(table: pd.DataFrame, base: str, new: str, threshold: float) -> str:
    """A table (NEW / BASE, with the spread of repeats in brackets) and a one-line verdict."""
    lines = [
        f"new {new} / base {base}; a regression is over {threshold:.0%} and beyond the spread "
        "of repeats",
        "",
    ]
    rows = [
        ["shapes", "strategy", "repeats", "peak over baseline", "wall time", "x ceiling", "verdict"]
    ]
    for _, r in table.iterrows():
        rows.append(
            [
                r["shapes"],
                r["strategy"],
                f"{int(r['repeats_base'])}/{int(r['repeats_new'])}",
                ratio_text(r, "peak"),
                ratio_text(r, "wall"),
                ceiling_text(r),
                r["verdict"],
            ]
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    bad = table[table["verdict"].isin(list(COMPARE_FAILURES))]
    summary = (
        "no regression"
        if bad.empty
        else "regressed: "
        + ", ".join(f"{r.strategy} on {r.shapes} ({_what(r)})" for r in bad.itertuples())
    )
    return "\n".join([*lines, "", summary]) + "\n"


def _what(row: Any) -> str:
    if row.verdict == BROKEN:
        return "no ok repeat in new"
    return " and ".join(m for m in METRICS if getattr(row, f"{m}_verdict") == REGRESSED)
