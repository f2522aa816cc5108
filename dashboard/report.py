"""`loadbench report RESULTS --out report.html`: one self-contained HTML file to attach to a PR.

It holds what the dashboard's Overview, Phases and Timeline pages show (the answer per shape set,
the cost chart and table, the phase charts, one RSS timeline per strategy) and every run's
status; by default for each shape set's newest complete, unconstrained run in RESULTS (`--run ID`
picks one). The charts are the dashboard's own (`answer`, `scatter`,
`charts`, `timeline`), their data inlined, and the Vega/Vega-Lite/vega-embed JavaScript is inlined
from vl-convert-python's bundle: the file opens offline and links to no CDN. No Streamlit, no jax.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from pathlib import Path

import altair as alt
import pandas as pd

from bench.analysis import history
from bench.errors import BenchError
from bench.records.results import Results, read_results, summarize
from dashboard import answer, charts, frames, scatter, style, timeline
from loader.vocabulary import OK, TOTAL

CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}
.answer{background:#edf7ee;padding:.6em 1em;border-radius:6px}
.warn{background:#fff4e5;padding:.3em .8em;border-radius:6px;display:inline-block}
.chart{margin:1em 0}"""


class _Doc:
    """An HTML body being written: headings, text, tables and charts (each chart's spec inlined)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.charts = 0

    def add(self, tag: str, text: str, cls: str = "") -> None:
        attr = f' class="{cls}"' if cls else ""
        self.parts.append(f"<{tag}{attr}>{html.escape(text)}</{tag}>")

    def table(self, df: pd.DataFrame) -> None:
        self.parts.append(df.to_html(index=False, na_rep="–", border=0, escape=True))

    def chart(self, chart: alt.TopLevelMixin) -> None:
        with alt.data_transformers.disable_max_rows():
            spec = chart.to_dict()
        self.charts += 1
        div = f"chart{self.charts}"
        embed = f'vegaEmbed("#{div}", {json.dumps(spec)}, {{"actions": false}})'
        self.parts.append(
            f'<div class="chart" id="{div}"></div><script>{embed}.catch(console.error);</script>'
        )


def _overview(
    doc: _Doc, phases: pd.DataFrame, summary: pd.DataFrame, shapes: str, ram: int
) -> None:
    """Each configuration of the shape set (dtype, devices, model): its answer, chart, table."""
    configs = answer.configurations(summary[summary["shapes"] == shapes])
    shape_set = phases[phases["shapes"] == shapes]
    for _, config in configs.iterrows():
        rows = answer.shape_set_rows(summary, shapes, config)
        ckpt = rows["checkpoint_bytes"].iloc[0]
        tensors = int(rows["tensors"].iloc[0])
        which = f" ({answer.config_label(config)})" if len(configs) > 1 else ""
        doc.add(
            "h2", f"Shape set {shapes}{which}: checkpoint {style.size(ckpt)}, {tensors} tensors"
        )
        doc.add("p", answer.headline(rows, ram).text.replace("`", ""), "answer")
        note = answer.small_checkpoint_note(ckpt)
        if note:
            doc.add("p", note, "warn")
        if rows[["wall_s", "peak_ratio"]].notna().all(axis=1).any():
            chart = scatter.overview_scatter(
                rows,
                "peak_ratio",
                "peak over baseline (× checkpoint)",
                ".2f",
                ceiling=scatter.ceiling_line(frames.ceiling_rows(shape_set, rows)),
            )
            doc.chart(chart.properties(width=800))
        doc.table(_cost_table(rows))
    _phases(doc, shape_set)


def _cost_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The configuration's cost per strategy, its ready time where compiled (`--compile`)."""
    nan = pd.Series(index=rows.index, dtype=float)
    ready = rows.get("ready_s", nan)
    table = pd.DataFrame(
        {
            "strategy": rows["strategy"],
            "kind": rows["kind"],
            "status": rows["status"],
            "repeats": rows["repeats"],
            "× checkpoint": rows["peak_ratio"].map(style.ratio),
            "peak over baseline": rows["peak_over_baseline_bytes"].map(style.size),
            "wall (median)": rows["wall_s"].map(style.seconds),
            "ready (compiled)": ready.map(style.seconds),
            "throughput": rows["throughput_bytes_per_s"].map(style.rate),
            "× floor": rows.get("floor_ratio", nan).map(style.ratio),
            "× ceiling": rows.get("ceiling_ratio", nan).map(style.ratio),
            "Pareto": rows["pareto"].map({True: "on the front", False: ""}),
        }
    )
    if ready.isna().all():
        table = table.drop(columns="ready (compiled)")
    return table.sort_values(["kind", "× checkpoint"])


def _phases(doc: _Doc, phases: pd.DataFrame) -> None:
    med = frames.phase_medians(phases)
    if med.empty:
        return
    doc.add(
        "h3",
        "Phases: each one's own high-water mark, what it keeps (anonymous / file-backed), and "
        "when it ran (phases that ran at the same time overlap, never stacked)",
    )
    doc.chart(charts.phase_peak_bars(med).properties(width=800))
    doc.chart(charts.anon_file_bars(med))
    doc.chart(charts.phase_time_bars(med).properties(width=800))


def _timeline(doc: _Doc, results: Results, phases: pd.DataFrame, shapes: str) -> None:
    """The first ok repeat of each strategy on `shapes`, overlaid, with each one's phase bands."""
    totals = frames.whole_run(phases)
    totals = totals[
        (totals["phase"] == TOTAL) & (totals["status"] == OK) & (totals["shapes"] == shapes)
    ]
    firsts = totals.sort_values("repeat").drop_duplicates("strategy").sort_values("strategy")
    chosen = [r for r in firsts["result_id"] if r in set(results.samples["result_id"])]
    if not chosen:
        return
    labels = {
        str(r.result_id): f"{r.strategy} · {r.shapes} · r{r.repeat} · {r.status}"
        for r in firsts.itertuples()
    }
    samples = results.samples[
        results.samples["result_id"].isin(chosen) & results.samples["process_index"].isin([0, -1])
    ]
    samples = samples.assign(label=samples["result_id"].map(labels))
    base = {str(k): float(v) for k, v in zip(firsts["result_id"], firsts["baseline_rss_bytes"])}
    doc.add("h3", f"Timeline on {shapes}: RSS over baseline, one repeat per strategy")
    doc.chart(
        timeline.timeline(
            samples,
            frames.phase_bands(phases, chosen, labels),
            base,
            split=False,
            over_baseline=True,
        )
    )


EVERY_RUN = {
    "shapes": "shape set",
    "strategy": "strategy",
    "repeat": "repeat",
    "status": "status",
    "peak_ratio": "× checkpoint",
    "wall_s": "wall",
    "error": "error",
}


def _every_run(doc: _Doc, phases: pd.DataFrame) -> None:
    doc.add("h2", "Every run (failed ones included)")
    totals = frames.whole_run(phases)
    totals = totals[totals["phase"] == TOTAL].sort_values(["shapes", "strategy", "repeat"])
    table = totals.assign(
        peak_ratio=totals["peak_ratio"].map(style.ratio),
        wall_s=totals["wall_s"].map(style.seconds),
        error=totals["error"].fillna(""),
    )[list(EVERY_RUN)]
    doc.table(table.rename(columns=EVERY_RUN))


def _chosen(results: Results, run_id: str | None) -> pd.DataFrame:
    """The phase rows the report shows: run `run_id`, or each shape set's default run (the
    newest complete, unconstrained one; `dashboard.frames.default_phases`)."""
    if run_id is None:
        return frames.default_phases(results.runs, results.phases)
    known = set(results.phases["run_id"])
    if run_id not in known:
        raise BenchError(
            f"--run {run_id}: no such run in the results; runs there: {', '.join(sorted(known))}"
        )
    return results.phases[results.phases["run_id"] == run_id]


def build(results: Results, source: str, run_id: str | None = None) -> str:
    """The report's HTML for run `run_id` (default: each shape set's newest complete,
    unconstrained run), every child run's status included."""
    phases = _chosen(results, run_id)
    shown = results.runs[results.runs["run_id"].isin(set(phases["run_id"]))]
    known = shown.dropna(subset=["ram_bytes"]).sort_values("started_utc", ascending=False)
    ram = int(known["ram_bytes"].iloc[0]) if len(known) else 16 << 30
    labels = frames.run_labels(results.runs, results.phases)
    doc = _Doc()
    doc.add("h1", "loadbench report")
    named = "; ".join(labels.get(r, r) for r in phases["run_id"].unique())
    doc.add(
        "p",
        f"Results folder {source}; run {named}. Peaks are over each child's baseline; times "
        "are medians of the ok repeats.",
    )
    summary = summarize(phases)
    order = summary.groupby("shapes")["checkpoint_bytes"].max().sort_values(ascending=False).index
    for shapes in order:
        _overview(doc, phases, summary, shapes, ram)
        _timeline(doc, results, phases, shapes)
    _every_run(doc, phases)
    if found := history.steps(results):  # across every run in the folder (`loadbench history`)
        doc.add("h2", "History: where a metric stepped")
        doc.table(history.steps_table(found))
    return _page("\n".join(doc.parts))


def _page(body: str) -> str:
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    # vl-convert's stub marks `snippet` required; at runtime it is optional (the default snippet)
    bundle = vl_convert.javascript_bundle(vl_version=vl_version_for_vl_convert())  # type: ignore[call-arg]
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>loadbench report</title>'
        f"<style>{CSS}</style><script>{bundle}</script></head>\n<body>\n{body}\n</body></html>\n"
    )


def run(args: argparse.Namespace) -> int:
    """Write the report; refuse an empty results folder with the command that fills it."""
    results = read_results(args.results)
    if results.phases.empty:
        raise BenchError(
            f"no results in {args.results}; make some with "
            f"`loadbench bench run --shapes gpt2 --out {args.results}`"
        )
    out = Path(args.out)
    text = build(results, str(args.results), getattr(args, "run", None))
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)  # never a half-written report
    print(f"report: {out} ({len(text.encode()) / (1 << 20):.1f} MiB, opens offline)")
    for file, message in results.errors:
        print(f"report: skipped part of {file}: {message}", file=sys.stderr)
    return 0
