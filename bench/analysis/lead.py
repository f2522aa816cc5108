"""The bench summary's answer: which measured strategy to use on the host the runs were on.

A block of the summary (one configuration) leads with it. A strategy fits this host when its
measured peak RSS leaves 10% of the host's RAM to spare (`bench.analysis.recommend.verdict`; the
host's RAM is the `--host-ram` limit the children ran under, else the machine's). The answer is
the fastest that fits; among those whose measured times overlap its own (min-max over the repeats:
too close to call), the one with the lowest peak, as `recommend` breaks ties
(`bench.analysis.ties`). Rows are ordered: the answer, the others that fit by time, those that do
not fit by time, the reference line, then skipped and failed rows. No jax.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.recommend import TIGHT_FRACTION, verdict
from bench.analysis.ties import PEAK_TIE_FRACTION, lightest_first, strictly_lighter
from bench.records.results import Results
from bench.vocabulary import FITS
from loader.vocabulary import REFERENCE, STRATEGY


@dataclass(frozen=True)
class Lead:
    """One block's answer: the host's RAM, the strategy to use (None: none fits or none ran ok),
    the rows in the order to print them, and the strategies too close to call with the answer."""

    host_ram_bytes: int | None
    recommended: str | None
    order: list[int]  # index labels of the block's rows
    ties: list[str]


def host_ram(results: Results, run_ids: list[str]) -> int | None:
    """The RAM the runs' children had: their `--host-ram` limit where set, else the machine's."""
    runs = results.runs[results.runs["run_id"].isin(run_ids)]
    if runs.empty:
        return None
    limits = pd.to_numeric(runs["host_ram_bytes"]).dropna()
    if len(limits):
        return int(limits.min())
    return int(pd.to_numeric(runs["ram_bytes"]).min())


def _measured(group: pd.DataFrame) -> pd.DataFrame:
    """The rows with an ok repeat (a median wall and peak), the reference line left out."""
    wall, peak = pd.to_numeric(group["wall_s"]), pd.to_numeric(group["peak_rss_bytes"])
    return group[(group["kind"] != REFERENCE) & wall.notna() & peak.notna()]


def _overlaps(a: pd.Series, b: pd.Series) -> bool:
    """The two rows' measured times (min-max over repeats) overlap: too close to call."""
    return float(a["wall_s_min"]) <= float(b["wall_s_max"]) and float(b["wall_s_min"]) <= float(
        a["wall_s_max"]
    )


def lead(group: pd.DataFrame, ram: int | None) -> Lead:
    """The answer for one block of `summary_frame` rows on a host of `ram` bytes."""
    measured = _measured(group)
    fitting = [ram is not None and verdict(int(p), ram) == FITS for p in measured["peak_rss_bytes"]]
    fits = measured.loc[pd.Series(fitting, index=measured.index, dtype=bool)]
    fits = fits.sort_values("wall_s", kind="stable")
    # a peer is measured beside ours and ranked with them, but only our own are recommended
    # (the dashboard's headline reads this same rule)
    ours = fits[fits["kind"] == STRATEGY]
    best, ties = None, []
    if len(ours):
        fastest = ours.iloc[0]
        close = ours[[_overlaps(fastest, r) for _, r in ours.iterrows()]]
        peaks = [float(p) for p in close["peak_rss_bytes"]]
        best = close.iloc[lightest_first(peaks, [float(w) for w in close["wall_s"]])[0]]
        ties = [str(s) for s in close["strategy"] if s != best["strategy"]]
    rest = measured.drop(fits.index).sort_values("wall_s", kind="stable")
    reference = group[group["kind"] == REFERENCE]
    failed = group.drop([*measured.index, *reference.index]).sort_values("status", kind="stable")
    order = [i for i in fits.index if best is None or i != best.name]
    order = ([best.name] if best is not None else []) + order
    order += [*rest.index, *reference.index, *failed.index]
    return Lead(ram, str(best["strategy"]) if best is not None else None, order, ties)


def use_line(group: pd.DataFrame, answer: Lead, format_size) -> str:
    """The block's last line: `use X: P peak, T s` on this host, or that none fits."""
    if answer.host_ram_bytes is None:
        return "no run record: this host's RAM is unknown, so no strategy is named"
    ram = format_size(answer.host_ram_bytes)
    if answer.recommended is None:
        measured = _measured(group)
        if not (measured["kind"] == STRATEGY).any():
            return "no strategy of loadbench's own loaded a model ok here, so none is named"
        return f"no strategy fits this host's {ram} with {TIGHT_FRACTION:.0%} to spare"
    row = group[group["strategy"] == answer.recommended].iloc[0]
    why = f"the fastest that fits this host's {ram} with {TIGHT_FRACTION:.0%} to spare"
    if answer.ties:
        tied = group[group["strategy"].isin(answer.ties)]["peak_rss_bytes"]
        lighter = strictly_lighter(float(row["peak_rss_bytes"]), [float(p) for p in tied])
        edge = "lighter" if lighter else f"as light (within {PEAK_TIE_FRACTION:.0%}) and faster"
        why += f"; {', '.join(answer.ties)} too close to call on time, {answer.recommended} {edge}"
    return (
        f"use {answer.recommended}: {format_size(row['peak_rss_bytes'])} peak, "
        f"{float(row['wall_s']):.2f} s ({why})"
    )
