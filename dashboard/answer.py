"""The Overview's answer, without Streamlit: per shape set, which strategy to use and its cost.

`shape_set_rows` gives one row per strategy of a shape set (with its kind, peak over baseline and
Pareto flag); `headline` names the strategy to use on a host's RAM by the bench summary's own rule
(`bench.analysis.lead`: the fastest whose measured peak fits with 10% to spare, ties on time going
to the lighter; the verdict is `bench.analysis.recommend.verdict`, as `loadbench recommend`'s),
the least RAM that fits and the naive path's need, in the words of `bench.analysis.advice.answer`
(`recommend`'s own wording module). Reference rows (kind
`reference`, e.g. `floor`) are a line to compare with, never a candidate; peers (kind `peer`) are
shown apart and never recommended. The dashboard and `loadbench report` both use this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.advice import Cost, answer, minimum_ram
from bench.analysis.backend import backend_sentence, backends
from bench.analysis.lead import lead
from bench.analysis.recommend import MIN_FIT_BYTES, TIGHT_FRACTION, verdict
from bench.records.results import LOCAL, ROUTE
from bench.vocabulary import DOES_NOT_FIT, FITS, OK, TIGHT
from dashboard import frames, style
from loader.vocabulary import PEER, REFERENCE, STRATEGY

CONFIG = ["dtype", "devices_per_process"]


def _columns(rows: pd.DataFrame) -> list[str]:
    """What tells configurations apart: the dtype, the devices per process, and the model (spec,
    port or transposed) and the route (local, or `s3 · 1Gbit · c16`) where the rows say them."""
    return [*CONFIG, *(c for c in ("model", ROUTE) if c in rows)]


def configurations(rows: pd.DataFrame) -> pd.DataFrame:
    """The distinct (dtype, devices per process, model, route) configurations of summary rows,
    the one with the most strategies first (the answer's default), then in order (routes local
    first, then by source, link and concurrency: `frames.route_order`)."""
    rows = rows.assign(devices_per_process=rows["devices"] // rows["processes"].clip(lower=1))
    columns = _columns(rows)
    counts = rows.groupby(columns).size().rename("strategies").reset_index()
    counts = counts.assign(most=-counts["strategies"])
    if ROUTE in columns:
        rank = {r: i for i, r in enumerate(frames.route_order(rows))}
        counts = counts.assign(route_rank=counts[ROUTE].map(rank))
    order = ["most", *("route_rank" if c == ROUTE else c for c in columns)]
    return counts.sort_values(order)[columns].reset_index(drop=True)


def config_label(config: pd.Series) -> str:
    """`native, 8 device(s) per process, model spec, over s3 · 1Gbit · c16` (a local load's
    label says no route)."""
    label = f"{config['dtype']}, {config['devices_per_process']} device(s) per process"
    label += f", model {config['model']}" if "model" in config else ""
    return label + (route_words(config[ROUTE]) if config.get(ROUTE, LOCAL) != LOCAL else "")


def route_words(route: object) -> str:
    """`, over s3 · 1Gbit · c16` for a remote route, `, from the local disk` for a local one,
    nothing where none is known: how a title or an answer names where the bytes came from."""
    if not isinstance(route, str):
        return ""
    return ", from the local disk" if route == LOCAL else f", over {route}"


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
        columns = [c for c in _columns(rows) if c in config]
        rows = rows[(rows[columns] == config[columns].values).all(axis=1)]
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
    front = {i: False for i in df.index}
    for i, row in eligible.iterrows():
        others = eligible.drop(index=i)
        better = (others[x] <= row[x]) & (others[y] <= row[y])
        front[i] = not (better & ((others[x] < row[x]) | (others[y] < row[y]))).any()
    return pd.Series(front, index=df.index, dtype=bool)


@dataclass(frozen=True)
class Headline:
    """The answer for one shape set: `text` (the sentence `bench.analysis.advice.answer` words),
    the recommended strategy (or None), whether any fits, and `backend`: the backend the runs
    were on and what it means for the host RAM (`bench.analysis.backend`)."""

    text: str
    recommended: str | None
    fits: bool
    backend: str = ""
    ties: tuple[str, ...] = ()  # the strategies tied with the recommended one on time

    @property
    def sentence(self) -> str:
        """The answer and its backend, as the Overview, the Target host page and the report
        print it."""
        return f"{self.text} {self.backend}" if self.backend else self.text


def backend(rows: pd.DataFrame) -> str:
    """`CPU backend: the weights live in host RAM.`: the backend the rows' runs loaded on and what
    that means, in the sentence `loadbench recommend` and the bench summary print
    (`bench.analysis.backend`; summary or phase rows)."""
    return backend_sentence(backends(rows))


def margin_bytes(host_ram_bytes: int) -> int:
    """The largest peak RSS that fits `host_ram_bytes` with the headline's room to spare (the
    host RAM less `TIGHT_FRACTION`, 10%): the line the chart draws."""
    return int(host_ram_bytes * (1 - TIGHT_FRACTION))


def _cost(row: pd.Series) -> Cost:
    ratio = row["peak_ratio"]
    return Cost(
        str(row["strategy"]),
        int(row["peak_rss_bytes"]),
        float(row["wall_s"]),
        None if pd.isna(ratio) else float(ratio),
    )


def fits_column(rows: pd.DataFrame, host_ram_bytes: int) -> pd.Series:
    """Each row's verdict on a host of `host_ram_bytes` (fits, tight, does not fit; "–" unknown),
    by `bench.analysis.recommend.verdict` on its measured peak RSS."""
    return rows["peak_rss_bytes"].map(
        lambda p: "–" if pd.isna(p) else verdict(int(p), host_ram_bytes)
    )


def headline(rows: pd.DataFrame, host_ram_bytes: int) -> Headline:
    """The strategy to use on `host_ram_bytes` by the bench summary's rule
    (`bench.analysis.lead`: the fastest ok strategy whose measured peak RSS fits with 10% to
    spare, and among those too close to call on time, the lightest), what it costs, the least
    RAM that fits (and the fastest strategy there), and the naive path's need."""
    ok = rows[(rows["status"] == OK) & (rows["kind"] == STRATEGY) & rows["peak_rss_bytes"].notna()]
    ok = ok[ok["wall_s"].notna()]
    if ok.empty:
        text = "No strategy loaded this shape set successfully; see the runs below."
        return Headline(text, None, False, backend(rows))
    for spread in ("wall_s_min", "wall_s_max"):  # frames without the repeats' spread
        if spread not in ok:
            ok = ok.assign(**{spread: ok["wall_s"]})
    picked = lead(ok, host_ram_bytes)
    chosen = ok[ok["strategy"] == picked.recommended]
    naive = ok[ok["base_strategy"] == style.NAIVE]
    best = _cost(chosen.iloc[0]) if len(chosen) else None
    costs = [_cost(r) for _, r in ok.iterrows()]
    text = answer(host_ram_bytes, best, costs, _cost(naive.iloc[0]) if len(naive) else None)
    if best is not None and picked.choice is not None:
        text += f" Why: {picked.choice.sentence}."
    if len(chosen):
        text += _ready(chosen.iloc[0])
    recommended = best.strategy if best else None
    return Headline(text, recommended, best is not None, backend(rows), tuple(picked.ties))


RECOMMENDED, FITS_BY_TIME, DOES_NOT, REFERENCE_LINE, NOT_RUN = range(5)  # the table's row groups


def ranked(rows: pd.DataFrame, host_ram_bytes: int) -> pd.DataFrame:
    """`rows` in the order the table leads with the answer: the recommended strategy first, then
    those that fit (fastest first), then those that do not (tight or over), the reference line,
    and skipped or failed rows last. Adds `fits` (the verdict), `recommended` (bool), `group`
    and `reason`: why the row stands where it does, in a few words (a failed row's own error)."""
    head = headline(rows, host_ram_bytes)
    ok = (rows["status"] == OK) & rows["peak_rss_bytes"].notna() & rows["wall_s"].notna()
    fits = fits_column(rows, host_ram_bytes)
    best = rows.loc[rows["strategy"] == head.recommended, "wall_s"]
    best_wall = float(best.iloc[0]) if len(best) else None
    groups, reasons = [], []
    for (_, row), measured, said in zip(rows.iterrows(), ok, fits, strict=True):
        group, reason = _standing(row, measured, said, head, best_wall)
        groups.append(group)
        reasons.append(reason)
    out = rows.assign(
        fits=fits, recommended=rows["strategy"] == head.recommended, group=groups, reason=reasons
    )
    return out.sort_values(["group", "wall_s", "strategy"], na_position="last").reset_index(
        drop=True
    )


def _standing(
    row: pd.Series, measured: bool, said: str, head: Headline, best_wall: float | None
) -> tuple[int, str]:
    """(the row's group in `ranked`, the reason it stands there): a row that fits is either tied
    with the recommended one on time (their 95% intervals overlap, `bench.analysis.verdicts`) or
    slower by the difference of their medians."""
    recommended = head.recommended
    if not measured:
        error = row.get("error")
        why = error if isinstance(error, str) and error else "no reason recorded"
        return NOT_RUN, f"{row['status']}: {why}"
    if row["kind"] == REFERENCE:
        return REFERENCE_LINE, "reference line: reads the bytes only, loads no model"
    need = style.size(minimum_ram(int(row["peak_rss_bytes"])))
    if row["strategy"] == recommended:
        return RECOMMENDED, f"recommended: the fastest that fits with {TIGHT_FRACTION:.0%} to spare"
    peer = " (a peer: compared, never recommended)" if row["kind"] == PEER else ""
    if said == FITS:
        if row["strategy"] in head.ties:
            slower = f"; ties on time with {recommended} (their 95% intervals overlap)"
        elif best_wall is not None and recommended:
            behind = style.seconds(float(row["wall_s"]) - best_wall)
            slower = f"; {behind} slower than {recommended}"
        else:
            slower = ""
        return FITS_BY_TIME, f"fits{slower}{peer}"
    if said == TIGHT:
        return DOES_NOT, f"tight: under {TIGHT_FRACTION:.0%} to spare; needs {need}{peer}"
    return DOES_NOT, f"{DOES_NOT_FIT}: needs {need}{peer}"


def _ready(row: pd.Series) -> str:
    """The sentence saying when the strategy was ready to run, where measured (`--compile`)."""
    ready = row.get("ready_s")
    if ready is None or pd.isna(ready):
        return ""
    return f" Ready (loaded and its forward compiled) in {style.seconds(float(ready))}."


def small_checkpoint_note(checkpoint_bytes: float) -> str | None:
    """A warning when a checkpoint is too small for its ratios to mean anything (under 64 MiB)."""
    if checkpoint_bytes >= MIN_FIT_BYTES:
        return None
    return (
        f"checkpoint under {style.size(MIN_FIT_BYTES)}: its peaks are mostly per-process "
        "overhead, so the × checkpoint figures say little"
    )


COLUMNS = {  # the table's columns, in order: name -> header
    "strategy": "strategy",
    "fits": "fits?",
    "peak": "peak RSS",
    "needs": "needs RAM",
    "wall": "wall (median)",
    "ready": "ready (compiled)",
    "ratio": "× checkpoint",
    "over": "peak over baseline",
    "floor": "× floor",
    "ceiling": "× ceiling",
    "throughput": "throughput",
    "received": "bytes received",
    "reason": "why here",
}
RECOMMENDED_MARK = "★ "  # before the recommended strategy's name in the table


def cost_table(shown: pd.DataFrame, ram: int) -> pd.DataFrame:
    """The table that leads with the answer (`answer.ranked`): the recommended row first and
    marked, then those that fit by time, then those that do not, skipped and failed rows last
    with their reason; the absolute peak (the headline's number) and the RAM it needs beside the
    peak over baseline. Columns empty on every row are left out. The report prints it too."""
    rows = ranked(shown, ram)
    nan = pd.Series(float("nan"), index=rows.index)
    peak = pd.to_numeric(rows["peak_rss_bytes"])
    table = pd.DataFrame(
        {
            "strategy": rows["strategy"].where(
                ~rows["recommended"], RECOMMENDED_MARK + rows["strategy"]
            ),
            "fits": rows["fits"].where((rows["status"] == OK) & (rows["kind"] != REFERENCE), "–"),
            "peak": peak.map(style.size),
            "needs": peak.map(lambda p: style.size(minimum_ram(int(p))) if pd.notna(p) else "–"),
            "wall": rows["wall_s"].map(style.seconds),
            "ready": rows.get("ready_s", nan).map(style.seconds),
            "ratio": rows["peak_ratio"].map(style.ratio),
            "over": rows["peak_over_baseline_bytes"].map(style.size),
            "floor": rows.get("floor_ratio", nan).map(style.ratio),
            "ceiling": rows.get("ceiling_ratio", nan).map(style.ratio),
            "throughput": rows["throughput_bytes_per_s"].map(style.rate),
            "received": rows.get("bytes_received", nan).map(style.size),
            "reason": rows["reason"],
        }
    )
    empty = [c for c in table if c not in ("strategy", "reason") and (table[c] == "–").all()]
    table = table.drop(columns=empty)
    return table.rename(columns={**COLUMNS, "fits": f"fits {style.size(ram)}?"})
