"""The Overview's answer, without Streamlit: per shape set, which strategy to use and its cost.

`shape_set_rows` gives one row per strategy of a shape set (with its kind, peak over baseline and
Pareto flag) in one configuration (one device count: the judge decides per count); `headline`
states the judge's decision for a host's RAM (`bench.analysis.judge.judge`, the record the bench
summary and `loadbench recommend` render, in its one sentence, `bench.analysis.decision_words`),
then the least RAM that fits and the naive path's need (`bench.analysis.advice.needs_text`).
Reference rows (kind `reference`, e.g. `floor`) are a line to compare with, never a candidate;
peers (kind `peer`) are candidates as everywhere. The dashboard and `loadbench report` both use
this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.analysis.advice import Cost, minimum_ram, needs_text
from bench.analysis.backend import backend_sentence, backends
from bench.analysis.decision_words import MEASURE_NAMES, sentence, wins
from bench.analysis.judge import Decision, TargetHost, judge, time_difference
from bench.analysis.recommend import MIN_FIT_BYTES, TIGHT_FRACTION, verdict
from bench.records.results import LOCAL, MEANINGS, ROUTE, X_CEILING, X_FLOOR, Results, x_ceiling
from bench.vocabulary import DOES_NOT_FIT, FITS, OK, TIGHT
from dashboard import frames, style
from loader.vocabulary import PEER, REFERENCE, STRATEGY

CONFIG = ["dtype", "devices"]


def _columns(rows: pd.DataFrame) -> list[str]:
    """What tells configurations apart: the dtype, the device count (the judge decides per
    count, as the bench summary's blocks do), and the model (spec, port or transposed) and the
    route (local, or `s3 · 1Gbit · c16`) where the rows say them."""
    return [*CONFIG, *(c for c in ("model", ROUTE) if c in rows)]


def configurations(rows: pd.DataFrame) -> pd.DataFrame:
    """The distinct (dtype, devices, model, route) configurations of summary rows, the one with
    the most strategies first (the answer's default; among equals the fewer devices, as
    `bench.analysis.judge.default_devices`), then in order (routes local first, then by source,
    link and concurrency: `frames.route_order`)."""
    columns = _columns(rows)
    counts = rows.groupby(columns).size().rename("strategies").reset_index()
    counts = counts.assign(most=-counts["strategies"])
    if ROUTE in columns:
        rank = {r: i for i, r in enumerate(frames.route_order(rows))}
        counts = counts.assign(route_rank=counts[ROUTE].map(rank))
    order = ["most", *("route_rank" if c == ROUTE else c for c in columns)]
    return counts.sort_values(order)[columns].reset_index(drop=True)


def config_label(config: pd.Series) -> str:
    """`native, 8 device(s), model spec, over s3 · 1Gbit · c16` (a local load's label says no
    route)."""
    label = f"{config['dtype']}, {config['devices']} device(s)"
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
    """The answer for one shape set in one configuration: the judge's `decision`, `text` (its
    sentence, then the least RAM that fits and the naive path's need, and when it was ready),
    and `backend`: the backend the runs were on and what it means for the host RAM
    (`bench.analysis.backend`)."""

    text: str
    decision: Decision | None
    backend: str = ""

    @property
    def recommended(self) -> str | None:
        """The judge's pick (None: none fits, or none loaded ok)."""
        return self.decision.pick if self.decision is not None else None

    @property
    def fits(self) -> bool:
        """Some strategy fits and is picked."""
        return self.recommended is not None

    @property
    def sentence(self) -> str:
        """The answer and its backend, as the Overview and the report print it."""
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
    return Cost(str(row["strategy"]), int(row["peak_rss_bytes"]), float(row["wall_s"]))


def fits_column(rows: pd.DataFrame, host_ram_bytes: int) -> pd.Series:
    """Each row's verdict on a host of `host_ram_bytes` (fits, tight, does not fit; "-" unknown),
    by `bench.analysis.recommend.verdict` on its measured peak RSS."""
    return rows["peak_rss_bytes"].map(
        lambda p: style.UNKNOWN if pd.isna(p) else verdict(int(p), host_ram_bytes)
    )


def headline(rows: pd.DataFrame, host_ram_bytes: int, results: Results | None = None) -> Headline:
    """The judge's decision over `rows` (one configuration's `shape_set_rows`) on a host of
    `host_ram_bytes` (`bench.analysis.judge.judge`: with `results`, it carries the limits the
    runs ran under and whether they lost strategies), its sentence, then the least RAM that fits
    (and the fastest strategy there), the naive path's need, and when the pick was ready."""
    ok = rows[(rows["status"] == OK) & (rows["kind"] != REFERENCE) & rows["peak_rss_bytes"].notna()]
    ok = ok[ok["wall_s"].notna()]
    if ok.empty:
        text = "No strategy loaded this shape set successfully; see the runs below."
        return Headline(text, None, backend(rows))
    decision = judge(rows, TargetHost(host_ram_bytes), results)
    said = sentence(decision) + "."
    naive = ok[ok["base_strategy"] == style.NAIVE]
    costs = [_cost(r) for _, r in ok.iterrows()]
    needs = needs_text(
        host_ram_bytes, costs, _cost(naive.iloc[0]) if len(naive) else None, decision.pick
    )
    text = f"{said} {needs}" if needs else said
    chosen = ok[ok["strategy"] == decision.pick]
    if len(chosen):
        text += _ready(chosen.iloc[0])
    return Headline(text, decision, backend(rows))


RECOMMENDED, FITS_BY_TIME, DOES_NOT, REFERENCE_LINE, NOT_RUN = range(5)  # the table's row groups


def ranked(rows: pd.DataFrame, host_ram_bytes: int) -> pd.DataFrame:
    """`rows` in the order the table leads with the answer: the recommended strategy first, then
    those that fit (fastest first), then those that do not (tight or over), the reference line,
    and skipped or failed rows last. Adds `fits` (the verdict), `recommended` (bool), `group`
    and `reason`: why the row stands where it does, in a few words (a failed row's own error)."""
    head = headline(rows, host_ram_bytes)
    ok = (rows["status"] == OK) & rows["peak_rss_bytes"].notna() & rows["wall_s"].notna()
    fits = fits_column(rows, host_ram_bytes)
    groups, reasons = [], []
    for (_, row), measured, said in zip(rows.iterrows(), ok, fits, strict=True):
        group, reason = _standing(row, measured, said, head)
        groups.append(group)
        reasons.append(reason)
    out = rows.assign(
        fits=fits, recommended=rows["strategy"] == head.recommended, group=groups, reason=reasons
    )
    return out.sort_values(["group", "wall_s", "strategy"], na_position="last").reset_index(
        drop=True
    )


def _standing(row: pd.Series, measured: bool, said: str, head: Headline) -> tuple[int, str]:
    """(the row's group in `ranked`, the reason it stands there): a row that fits is tied with
    the pick on time (the 95% interval of their ratio holds 1: `judge.time_difference`, said in
    its own words), not judged on time against it (one run), or called apart from it on the
    measure ranked (`bench.analysis.judge`)."""
    recommended = head.recommended
    decision = head.decision
    if not measured:
        error = row.get("error")
        why = error if isinstance(error, str) and error else "no reason recorded"
        return NOT_RUN, f"{row['status']}: {why}"
    if row["kind"] == REFERENCE:
        return REFERENCE_LINE, "reference line: reads the bytes only, loads no model"
    need = style.size(minimum_ram(int(row["peak_rss_bytes"])))
    peer = " (a peer: another project's loader)" if row["kind"] == PEER else ""
    if row["strategy"] == recommended and decision is not None:
        return RECOMMENDED, f"picked: {picked_how(decision)}{peer}"
    if said == FITS:
        slower = ""
        this = decision.candidate(row["strategy"]) if decision is not None else None
        if decision is not None and decision.picked and this and this.strategy in decision.tied:
            same = time_difference(decision.picked, this).text()
            slower = f"; ties on time with {recommended}: {same}"
        elif decision is not None and row["strategy"] in decision.unjudged:
            slower = f"; one run: not judged on time against {recommended}"
        elif decision is not None and recommended:
            slower = f"; slower than {recommended} by {MEASURE_NAMES[decision.measure]}"
        return FITS_BY_TIME, f"fits{slower}{peer}"
    if said == TIGHT:
        return DOES_NOT, f"tight: under {TIGHT_FRACTION:.0%} to spare; needs {need}{peer}"
    return DOES_NOT, f"{DOES_NOT_FIT}: needs {need}{peer}"


def picked_how(decision: Decision) -> str:
    """Why the pick stands first, in the table's few words: the only one, the fastest, the
    lightest of those tied on time, or the fixed order among those tied on time and peak
    (`judge.preference`), never "the lightest" of several as light."""
    if decision.alone:
        return "the only one measured"
    if not (decision.tied or decision.unjudged):
        return "the fastest that fits"
    if decision.lighter_beyond:
        return "the lightest of the tied"
    if not decision.judged_on_time and not decision.tied:
        return "the fastest of the as light; one run: time not judged"
    return f"tied on time and peak: {wins(decision)}"


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
        "overhead, so the x checkpoint figures say little"
    )


COLUMNS = {  # the table's columns, in order: name -> header
    "strategy": "strategy",
    "fits": "fits?",
    "peak": "peak RSS",
    "needs": "needs RAM",
    "wall": "wall (median)",
    "ready": "ready (compiled)",
    "ratio": "x checkpoint",
    "over": "peak over baseline",
    "floor": "x floor",
    "ceiling": "x ceiling",
    "throughput": "throughput",
    "received": "bytes received",
    "reason": "why here",
}
#: The cost table's legend: its ratios, each in the one definition every surface uses.
LEGEND = f"{X_CEILING}: {MEANINGS[X_CEILING]}. {X_FLOOR}: {MEANINGS[X_FLOOR]}."
RECOMMENDED_MARK = "★ "  # before the recommended strategy's name in the table


def cost_table(shown: pd.DataFrame, ram: int) -> pd.DataFrame:
    """The table that leads with the answer (`answer.ranked`): the recommended row first and
    marked, then those that fit by time, then those that do not, skipped and failed rows last
    with their reason; the absolute peak (the headline's number) and the RAM it needs beside the
    peak over baseline, each column of sizes in one unit (`style.sizes`); `x ceiling` and `x floor`
    as every surface defines them (`bench.records.results.x_ceiling`, `LEGEND`). Columns empty on
    every row are left out. The report prints it too."""
    rows = ranked(shown, ram)
    nan = pd.Series(float("nan"), index=rows.index)
    peak = pd.to_numeric(rows["peak_rss_bytes"])
    table = pd.DataFrame(
        {
            "strategy": rows["strategy"].where(
                ~rows["recommended"], RECOMMENDED_MARK + rows["strategy"]
            ),
            "fits": rows["fits"].where(
                (rows["status"] == OK) & (rows["kind"] != REFERENCE), style.UNKNOWN
            ),
            "peak": style.sizes(peak),
            "needs": style.sizes(peak.map(lambda p: minimum_ram(int(p)) if pd.notna(p) else None)),
            "wall": rows["wall_s"].map(style.seconds),
            "ready": rows.get("ready_s", nan).map(style.seconds),
            "ratio": rows["peak_ratio"].map(style.ratio),
            "over": style.sizes(rows["peak_over_baseline_bytes"]),
            "floor": rows.get("floor_ratio", nan).map(style.ratio),
            "ceiling": x_ceiling(rows).map(style.ratio),
            "throughput": rows["throughput_bytes_per_s"].map(style.rate),
            "received": style.sizes(rows.get("bytes_received", nan)),
            "reason": rows["reason"],
        }
    )
    empty = [
        c for c in table if c not in ("strategy", "reason") and (table[c] == style.UNKNOWN).all()
    ]
    table = table.drop(columns=empty)
    return table.rename(columns={**COLUMNS, "fits": f"fits {style.size(ram)}?"})
