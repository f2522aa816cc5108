"""The bench summary's answer: which measured strategy to use on the host the runs were on.

A block of the summary (one configuration) leads with it. A strategy fits this host when its
measured peak RSS leaves 10% of the host's RAM to spare (`bench.analysis.recommend.verdict`; the
host's RAM is the `--host-ram` limit the children ran under, else the machine's). The answer is
`bench.analysis.verdicts.choose` over our own strategies that fit: the fastest, and among those
whose 95% intervals overlap its own (too close to call), the lighter beyond the repeats' spread;
its sentence is the one every view prints. Rows are ordered: the answer, the others that fit by
time, those that do not fit by time, the reference line, then skipped and failed rows. No jax.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.recommend import TIGHT_FRACTION, verdict
from bench.analysis.verdicts import PAIRED, SECONDS, Candidate, Choice, choose
from bench.intervals import Interval
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
    choice: Choice | None = None  # the rule's choice and its sentence (None: none fits)


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


def _number(row: pd.Series, key: str) -> float | None:
    value = row.get(key)
    return None if value is None or pd.isna(value) else float(value)


def candidate(row: pd.Series, paired_ok: bool = True) -> Candidate:
    """A summary row as the tie rule sees it: its paired ratio's interval where its repeats
    carried a reference (and `paired_ok`: every row it is compared with did too), else its wall
    time's (t on the log walls, in seconds)."""
    n = int(_number(row, "paired_n") or 0)
    paired = _number(row, "paired_ratio")
    time: Interval | None
    unit = PAIRED
    if paired_ok and n and paired is not None:
        low, high = _number(row, "paired_low"), _number(row, "paired_high")
        time = Interval(paired, low or paired, high or paired, n)
    else:
        unit, wall = SECONDS, float(row["wall_s"])
        low, high = _number(row, "wall_low"), _number(row, "wall_high")
        repeats = int(_number(row, "ok_repeats") or 1)
        time = Interval(wall, low or wall, high or wall, repeats if low is not None else 1)
    peak = float(row["peak_rss_bytes"])
    spread = (_number(row, "peak_rss_max") or peak) - (_number(row, "peak_rss_min") or peak)
    unstable = row.get("unstable")
    return Candidate(
        strategy=str(row["strategy"]),
        seconds=float(row["wall_s"]),
        time=time,
        peak_bytes=peak,
        peak_spread_bytes=spread,
        unit=unit,
        unstable=unstable if isinstance(unstable, str) else None,
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
    by_name = {str(r["strategy"]): i for i, r in ours.iterrows()}
    paired_ok = bool(
        (pd.to_numeric(ours.get("paired_n", pd.Series(0, index=ours.index))) > 0).all()
    )
    choice = choose([candidate(r, paired_ok) for _, r in ours.iterrows()])
    best = by_name[choice.best.strategy] if choice else None
    rest = measured.drop(fits.index).sort_values("wall_s", kind="stable")
    reference = group[group["kind"] == REFERENCE]
    failed = group.drop([*measured.index, *reference.index]).sort_values("status", kind="stable")
    order = [i for i in fits.index if i != best]
    order = ([best] if best is not None else []) + order
    order += [*rest.index, *reference.index, *failed.index]
    return Lead(
        ram,
        choice.best.strategy if choice else None,
        order,
        [t.strategy for t in choice.ties] if choice else [],
        choice,
    )


def use_line(group: pd.DataFrame, answer: Lead, format_size) -> str:
    """The block's last line: `use X: P peak, T s`, then the rule's sentence (why X), on this
    host; or that none fits."""
    if answer.host_ram_bytes is None:
        return "no run record: this host's RAM is unknown, so no strategy is named"
    ram = format_size(answer.host_ram_bytes)
    if answer.recommended is None or answer.choice is None:
        measured = _measured(group)
        if not (measured["kind"] == STRATEGY).any():
            return "no strategy of loadbench's own loaded a model ok here, so none is named"
        return f"no strategy fits this host's {ram} with {TIGHT_FRACTION:.0%} to spare"
    row = group[group["strategy"] == answer.recommended].iloc[0]
    shaky = [c.strategy for c in (answer.choice.best, *answer.choice.ties) if c.unstable]
    caveat = (
        f" ({', '.join(shaky)}: unstable, see above; the choice may change with more repeats)"
        if shaky
        else ""
    )
    return (
        f"use {answer.recommended}: {format_size(row['peak_rss_bytes'])} peak, "
        f"{float(row['wall_s']):.2f} s, of those that fit this host's {ram} with "
        f"{TIGHT_FRACTION:.0%} to spare: {answer.choice.sentence}{caveat}"
    )
