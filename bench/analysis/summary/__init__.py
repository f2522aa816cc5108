"""What `bench run` prints at the end: a table per configuration that leads with the answer for
this host (`tables`: the judge's decision, `bench.analysis.judge`, ends each block in its one
sentence, `bench.analysis.decision_words`), or (`--json`) one object per strategy and the
decisions (`json_decisions`).

Both come from `bench.records.results.summarize` over the run's own file, so the terminal, the JSON
and the dashboard agree. Medians are over the ok repeats. Rows are grouped by configuration: shapes,
the file's dtype, the model's dtype (`--model-dtype`, when it differs), devices, the page-cache
state where rows carry one, and for a remote load its source, link and concurrency (each value of
`--remote-concurrency` is its own configuration, never a repeat of another). A strategy that
bounds its host bytes in flight (`budget=`) reports its high-water mark; the table shows it
against the budget. A multi-process strategy is named with its process count (each count of
`--processes 2,4` its own row); over a remote source its block adds each process's bytes received
against its share and the aggregate throughput (`bench.analysis.shares`).

Three modules, one role each: `frame` (the summary's rows per configuration, and the judge's
decision over each), `records` (the JSON objects: `json_summary`, `json_decisions`) and `words`
(the text tables, `tables`).
"""

from __future__ import annotations

from bench.analysis.summary.frame import summary_frame
from bench.analysis.summary.records import json_decisions, json_summary
from bench.analysis.summary.words import tables

__all__ = ["json_decisions", "json_summary", "summary_frame", "tables"]
