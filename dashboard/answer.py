"""The Overview's answer, without Streamlit: per shape set, which strategy to use and what it costs.

`shape_set_rows` gives one row per strategy of a shape set (with its kind, peak over baseline and
Pareto flag); `headline` names the fastest strategy whose measured peak fits a host's RAM (the
verdict rule of `bench.analysis.recommend.verdict`, the one `loadbench recommend` applies to predictions)
and sets its cost beside the naive path's. Reference rows (kind `reference`, e.g. `floor`) are a
line to compare with, never a candidate; peers (kind `peer`) are shown apart and never recommended.
The dashboard and `loadbench report` both use this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.recommend import MIN_FIT_BYTES, verdict
from dashboard import style
from loader.vocabulary import OK, REFERENCE, STRATEGY

CONFIG = ["dtype", "devices_per_process"]


def configurations(rows: pd.DataFrame) -> pd.DataFrame:
    """The distinct (dtype, devices per process) configurations of summary rows, sorted."""
    rows = rows.assign(devices_per_process=rows["devices"] // rows["processes"].clip(lower=1))
    return rows[CONFIG].drop_duplicates().sort_values(CONFIG).reset_index(drop=True)


def config_label(config: pd.Series) -> str:
    return f"{config['dtype']}, {config['devices_per_process']} device(s) per process"


def shape_set_rows(
    summary: pd.DataFrame, shapes: str, config: pd.Series | None = None
) -> pd.DataFrame:
    """One row per strategy of `shapes` in one configuration, with kind, costs and Pareto flag.

    A multi-process strategy is one more row named `strategy (N processes)`; `base_strategy`
    keeps the registered name (for colours and filters).
    """
    rows = summary[summary["shapes"] == shapes]
    rows = rows.assign(devices_per_process=rows["devices"] // rows["processes"].clip(lower=1))
    if config is not None:
        rows = rows[(rows[CONFIG] == config[CONFIG].values).all(axis=1)]
    multi = rows["processes"] > 1
    names = rows["strategy"].where(
        ~multi, rows["strategy"] + " (" + rows["processes"].astype(str) + " processes)"
    )
    rows = style.with_kind(rows).assign(strategy=names, base_strategy=rows["strategy"])
    rows = rows.assign(peak_over_baseline_bytes=rows["peak_rss_bytes"] - rows["baseline_rss_bytes"])
    rows = rows.reset_index(drop=True)
    front = pareto_front(rows[(rows["status"] == OK) & (rows["kind"] == STRATEGY)])
    return rows.assign(pareto=front.reindex(rows.index, fill_value=False).astype(bool))


def pareto_front(df: pd.DataFrame, x: str = "wall_s", y: str = "peak_ratio") -> pd.Series:
    """Which rows no other row beats on both `x` and `y` (lower is better for both).

    Rows of kind `reference` (when `df` has a kind column) and rows without numbers are never on
    the front.
    """
    eligible = df[df[x].notna() & df[y].notna()]
    if "kind" in df.columns:
        eligible = eligible[eligible["kind"] != REFERENCE]
    front = pd.Series(False, index=df.index)
    for i, row in eligible.iterrows():
        others = eligible.drop(index=i)
        better = (others[x] <= row[x]) & (others[y] <= row[y])
        front[i] = not (better & ((others[x] < row[x]) | (others[y] < row[y]))).any()
    return front


@dataclass(frozen=True)
class Headline:
    """The answer for one shape set: `text` (Markdown), the recommended strategy (or None)."""

    text: str
    recommended: str | None
    fits: bool


def _cost(row: pd.Series) -> str:
    return f"{style.ratio(row['peak_ratio'])} / {style.seconds(row['wall_s'])}"


def headline(rows: pd.DataFrame, host_ram_bytes: int) -> Headline:
    """The fastest ok strategy whose measured peak RSS fits `host_ram_bytes`, beside the naive path.

    E.g. "`stream`: 1.01× / 1.90 s — `eager` costs 3.20× / 13.00 s" (peak over baseline as a
    multiple of the checkpoint, median wall time).
    """
    ok = rows[(rows["status"] == OK) & (rows["kind"] == STRATEGY) & rows["peak_rss_bytes"].notna()]
    if ok.empty:
        return Headline(
            "No strategy loaded this shape set successfully; see the runs below.", None, False
        )
    verdicts = ok["peak_rss_bytes"].map(lambda p: verdict(int(p), host_ram_bytes))
    fitting = ok[verdicts == "fits"].sort_values("wall_s")
    naive = ok[ok["base_strategy"] == style.NAIVE]
    if fitting.empty:
        lightest = ok.sort_values("peak_rss_bytes").iloc[0]
        text = (
            f"No strategy fits in {style.size(host_ram_bytes)} with 10% to spare: the lightest, "
            f"`{lightest['strategy']}`, peaks at {style.size(lightest['peak_rss_bytes'])} RSS."
        )
        return Headline(text, None, False)
    best = fitting.iloc[0]
    text = f"`{best['strategy']}`: {_cost(best)}"
    if len(naive) and naive.iloc[0]["strategy"] != best["strategy"]:
        text += f" — `{naive.iloc[0]['strategy']}` costs {_cost(naive.iloc[0])}"
    else:  # the naive path is the answer: say what the lightest would cost instead
        lightest = ok.sort_values("peak_ratio").iloc[0]
        if lightest["strategy"] != best["strategy"]:
            text += f" (the fastest that fits; the lightest, `{lightest['strategy']}`, costs {_cost(lightest)})"
    return Headline(text, str(best["strategy"]), True)


def small_checkpoint_note(checkpoint_bytes: float) -> str | None:
    """A warning when a checkpoint is too small for its ratios to mean anything (under 64 MiB)."""
    if checkpoint_bytes >= MIN_FIT_BYTES:
        return None
    return (
        f"checkpoint under {style.size(MIN_FIT_BYTES)}: its peaks are mostly per-process "
        "overhead, so the × checkpoint figures say little"
    )
