"""`loadbench report RESULTS --out report.html`: one self-contained HTML file to attach to a PR.

It holds what the dashboard's pages show: the Overview, Phases and Timeline (the answer per shape
set with the backend its runs were on, the cost chart and the table that leads with the answer,
the phase charts, one RSS timeline panel per strategy) and every run's status, by default for
each shape set's newest complete, unconstrained run in RESULTS (`--run ID` picks one); the
Target host (`loadbench recommend`'s answer for each shape set on the host RAM answered for,
`--host-ram`, default the measuring machine's); Compare (each run shown against the run it is
compared with by default, in `loadbench compare`'s words); and History (every run in the
folder: the time against its reference, the steps and the changes of configuration).

A straight line: the results (`bench.records.results.read_results`) -> the frames
(`dashboard.sections.report_frames`, computed once) -> the charts (`charts.report_figures`, the
dashboard's own) -> one HTML page (here). The charts' data is inlined, and the
Vega/Vega-Lite/vega-embed JavaScript is inlined from vl-convert-python's bundle: the file opens
offline and links to no CDN. No Streamlit, no jax.
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
from bench.records.results import Results, read_results
from bench.units import parse_size
from dashboard import answer, charts, comparison, style
from dashboard.sections import ReportFrames, report_frames
from shapes.sizes import format_bytes

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
        self.parts.append(df.to_html(index=False, na_rep=style.UNKNOWN, border=0, escape=True))

    def chart(self, chart: alt.TopLevelMixin) -> None:
        with alt.data_transformers.disable_max_rows():
            spec = chart.to_dict()
        self.charts += 1
        div = f"chart{self.charts}"
        embed = f'vegaEmbed("#{div}", {json.dumps(spec)}, {{"actions": false}})'
        self.parts.append(
            f'<div class="chart" id="{div}"></div><script>{embed}.catch(console.error);</script>'
        )


def _render(report: ReportFrames, source: str) -> str:
    """The report's HTML: each shape set's answer, cost chart and table, phase charts and
    timeline panels (its frames drawn once by `charts.report_figures`), then every child run."""
    doc = _Doc()
    doc.add("h1", "loadbench report")
    doc.add(
        "p",
        f"Results folder {source}; run {report.run}. Peaks are peak RSS (the answer's number), "
        "beside the peak over each child's baseline; times are medians of the ok repeats.",
    )
    for shape_set in report.shape_sets:
        figures = charts.report_figures(shape_set, report.ram)
        for cost, chart in zip(shape_set.costs, figures.costs, strict=True):
            doc.add("h2", cost.title)
            doc.add("p", cost.headline.sentence.replace("`", ""), "answer")
            if cost.note:
                doc.add("p", cost.note, "warn")
            if chart is not None:
                doc.chart(chart)
            doc.table(cost.table)
            doc.add("p", answer.LEGEND, "legend")
        if figures.phases:
            doc.add("h3", PHASES_TITLE)
            for chart in figures.phases:
                doc.chart(chart)
        if figures.timeline is not None:
            doc.add("h3", TIMELINE_TITLE.format(shapes=shape_set.shapes))
            doc.chart(figures.timeline)
    doc.add("h2", "Every run (failed ones included)")
    doc.table(report.every_run)
    _targets(doc, report)
    _compared(doc, report)
    _history(doc, report)
    return _page("\n".join(doc.parts))


def _targets(doc: _Doc, report: ReportFrames) -> None:
    """The Target host view: `loadbench recommend`'s answer for each shape set, on this host."""
    for target in report.targets:
        doc.add(
            "h2",
            f"Target host: {target.shapes} on {style.size(target.ram)} of RAM, "
            f"{target.devices} device(s)",
        )
        first, *rest = target.sentences
        doc.add("p", first.replace("`", ""), "answer")
        for sentence in rest:
            doc.add("p", sentence.replace("`", ""))
        if not target.predicted.empty:
            doc.chart(charts.target_bars(target.predicted, target.ram).properties(width=800))
            doc.table(target.table)
        doc.add(
            "p",
            f"The same in a terminal: loadbench recommend --shapes {target.shapes} --host-ram "
            f"{target.ram / (1 << 30):g}GiB --devices {target.devices} --results RESULTS",
        )


def _compared(doc: _Doc, report: ReportFrames) -> None:
    """The Compare view: each run shown against the run it is compared with by default."""
    for shown in report.compared:
        doc.add("h2", f"Compare: {shown.new} (new) against {shown.base} (base)")
        for _, sentence in shown.said:
            doc.add("p", sentence.replace("`", ""))
        for shapes, rows in shown.shape_sets.items():
            doc.add("h3", f"Shape set {shapes}")
            doc.chart(charts.compare_bars(rows).properties(width=800))
            doc.table(comparison.table(rows))
        doc.add("h3", "Machine facts")
        doc.table(shown.facts.reset_index(names="fact"))
        doc.add(
            "p",
            f"The gate in a terminal or CI: {comparison.command('BASE', 'NEW', shown.threshold)}",
        )


def _history(doc: _Doc, report: ReportFrames) -> None:
    """The History view across every run in the folder: each shape set's time against its
    reference, run by run, with its steps and changes of configuration."""
    found = report.history
    if found is None:
        return
    doc.add("h2", "History: every run in the folder, by start time")
    for shapes in sorted(found.points["shapes"].unique()):
        rows = found.points[found.points["shapes"] == shapes]
        frame = charts.history_frame(rows, found.steps, history.TIME)
        doc.add("h3", f"Shape set {shapes}: {charts.HISTORY_METRICS[history.TIME]}")
        doc.chart(charts.history_chart(frame, history.TIME, found.boundaries).properties(width=800))
    doc.add("h3", "History: where a metric stepped")
    if found.steps_table.empty:
        doc.add("p", "No steps: no metric moved beyond its intervals and its least step.")
    else:
        doc.table(found.steps_table)
    if not found.boundaries_table.empty:
        doc.add("h3", "Where a configuration changed (a boundary, never a step)")
        doc.table(found.boundaries_table)


PHASES_TITLE = (
    "Phases: each one's own high-water mark, what it keeps (anonymous / file-backed), and when it "
    "ran (phases that ran at the same time overlap, never stacked)"
)
TIMELINE_TITLE = (
    "Timeline on {shapes}: RSS over baseline from 0, one panel per strategy (its first ok "
    "repeat), its phases behind it; a load on several processes shows process 0's own RSS beside "
    "the sum over its processes"
)


def build(results: Results, source: str, run_id: str | None = None, ram: int | None = None) -> str:
    """The report's HTML for run `run_id` (default: each shape set's newest complete,
    unconstrained run), every child run's status included: results -> frames -> charts -> HTML."""
    frames = report_frames(results, run_id, ram, source)
    return _render(frames, source)


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
    ram = getattr(args, "host_ram", None)
    ram = parse_size(ram, what="--host-ram") if ram else None
    text = build(results, str(args.results), getattr(args, "run", None), ram)
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)  # never a half-written report
    print(f"report: {out} ({format_bytes(len(text.encode()))}, opens offline)")
    for file, message in results.errors:
        print(f"report: skipped part of {file}: {message}", file=sys.stderr)
    return 0
