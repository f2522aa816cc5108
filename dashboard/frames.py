"""Pure views of results frames (no Streamlit, no jax): runs, whole-run rows, phase medians, bands.

The dashboard pages (through `dashboard.data`) and the static report (`dashboard.report`) share
them. Runs: a run is labelled with its machine, date, shape sets, id, its status (complete,
interrupted, failed, running) and its limits (a memory limit, a disk read cap, fewer CPUs, made by
`recommend --check`). By default a page shows, per shape set, the newest run that is complete and
unconstrained: an interrupted run lacks strategies, a run under a limit answers another question.
Every run stays selectable.

Routes: a local load and loads over s3 at concurrency 1 and 64 are different configurations
(`bench.records.results.route`, the one definition of the key): every view here keeps them
apart, and names a remote strategy with its route (`pipelined · s3 · 1Gbit · c16`,
`route_labelled`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bench.link import UNSHAPED
from bench.link.shaping import Link
from bench.records.configuration import run_limits
from bench.records.results import LOCAL, ROUTE, headline, routed, with_route
from bench.vocabulary import COMPLETE, OK
from loader.vocabulary import DEQUANTIZE, TOTAL

NEWEST = "newest"  # the run pickers' first choice: the default run of each shape set
NEWEST_LABEL = "Newest complete, unconstrained run of each shape set"


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def limits(run: Mapping[Any, Any], rows: pd.DataFrame) -> list[str]:
    """The limits a run ran under, in words (empty: unconstrained): the one definition,
    `bench.records.configuration.run_limits` (its record, else its rows)."""
    return run_limits(run, rows)


def run_facts(runs: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """One row per run with phase rows, newest first: machine, started_utc, status, shapes (list),
    limits (list of words), usual (complete and unconstrained) and label."""
    records = {r["run_id"]: r for r in runs.to_dict("records")} if len(runs) else {}
    out = []
    for run_id, rows in phases.groupby("run_id", sort=False):
        run = records.get(run_id, {"run_id": run_id, "machine": "?", "started_utc": ""})
        status = run.get("status") if _known(run.get("status")) else COMPLETE
        said = limits(run, rows)
        shapes = sorted(rows["shapes"].unique())
        out.append(
            {
                "run_id": run_id,
                "machine": run.get("machine", "?"),
                "started_utc": str(run.get("started_utc") or ""),
                "status": status,
                "shapes": shapes,
                "limits": said,
                "usual": status == COMPLETE and not said,
                "label": run_label(run, shapes, status, said),
            }
        )
    facts = pd.DataFrame(out, columns=["run_id", "machine", "started_utc", "status", "shapes"])
    if not out:
        return facts
    facts = pd.DataFrame(out).sort_values("started_utc", ascending=False, kind="stable")
    return facts.set_index("run_id", drop=False)


def run_label(
    run: Any,
    shapes: list[str] | None = None,
    status: str | None = None,
    said: Sequence[str] = (),
) -> str:
    """`machine · date · shapes · run id`, then the status and limits when it is not the usual
    complete, unconstrained run (`· interrupted`, `· memory limit 1.00 GiB`)."""
    date = str(run.get("started_utc", ""))[:16].replace("T", " ")
    named = f" · {', '.join(shapes)}" if shapes else ""
    label = f"{run.get('machine', '?')} · {date}{named} · {run.get('run_id', '?')}"
    notes = ([status] if status and status != COMPLETE else []) + list(said)
    return label + "".join(f" · {n}" for n in notes)


def run_labels(runs: pd.DataFrame, phases: pd.DataFrame) -> dict[str, str]:
    """Run id -> label (see `run_label`), newest first."""
    facts = run_facts(runs, phases)
    return dict(zip(facts["run_id"], facts.get("label", []), strict=False))


def default_run(runs: pd.DataFrame, phases: pd.DataFrame) -> str | None:
    """The newest complete, unconstrained run (else the newest complete, else the newest)."""
    facts = run_facts(runs, phases)
    if facts.empty:
        return None
    for pick in (facts["usual"], facts["status"] == COMPLETE):
        if pick.any():
            return str(facts[pick].index[0])
    return str(facts.index[0])


def default_runs(runs: pd.DataFrame, phases: pd.DataFrame) -> dict[str, str]:
    """Shape set -> the run shown for it by default: the newest complete, unconstrained run that
    measured it (else the newest complete one, else the newest)."""
    out = {}
    for shapes in sorted(phases["shapes"].unique()):
        mine = phases[phases["shapes"] == shapes]
        run_id = default_run(runs, mine)
        if run_id is not None:
            out[shapes] = run_id
    return out


def newest_label(runs: pd.DataFrame, phases: pd.DataFrame) -> str:
    """The label of the run pickers' first choice (`NEWEST`): `NEWEST_LABEL` where each shape
    set's default run is complete and unconstrained; else what the defaults ran under, by shape
    set, for where none was (`Newest run of each shape set (gpt2: 1 CPU, budget 32.0 MiB)`).

    Example:
        >>> newest_label(results.runs, results.phases)
        'Newest complete, unconstrained run of each shape set'
    """
    facts = run_facts(runs, phases)
    notes = []
    for shapes, run_id in default_runs(runs, phases).items():
        fact = facts.loc[run_id]
        if not fact["usual"]:
            status = str(fact["status"])
            said = [status] if status != COMPLETE else []
            notes.append(f"{shapes}: {', '.join([*said, *fact['limits']])}")
    return f"Newest run of each shape set ({'; '.join(notes)})" if notes else NEWEST_LABEL


def default_phases(runs: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """The phase rows of each shape set's default run (`default_runs`)."""
    chosen = default_runs(runs, phases)
    keep = phases["shapes"].map(chosen) == phases["run_id"]
    return phases[keep]


def whole_run(phases: pd.DataFrame) -> pd.DataFrame:
    """The rows that describe a whole run: single-process rows and the summed multi-process row."""
    return phases if phases.empty else headline(phases)


#: the columns of `quantized_loads`, in the order the Phases page shows them
QUANTIZED_COLUMNS = [
    "strategy",
    "checkpoint_bytes",
    "device_bytes_moved",
    "dequantized_bytes",
    "dequantize_s",
    "wall_s",
]


def quantized_loads(phases: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, medians over the ok whole-run loads of a quantized checkpoint (one whose rows
    carry `dequantized_bytes`): the file's bytes, the bytes moved to the devices, the dequantized
    model's, the `dequantize` phase's seconds (NaN where the load had none) and the whole wall.
    Empty where no row is of a quantized checkpoint (or the file predates the fields).

    Example:
        >>> quantized_loads(pd.DataFrame()).empty
        True
    """
    if "dequantized_bytes" not in phases.columns:
        return pd.DataFrame(columns=QUANTIZED_COLUMNS)
    rows = whole_run(phases)
    rows = rows[(rows["status"] == OK) & rows["dequantized_bytes"].notna()]
    totals = rows[rows["phase"] == TOTAL]
    if totals.empty:
        return pd.DataFrame(columns=QUANTIZED_COLUMNS)
    numbers = ["checkpoint_bytes", "device_bytes_moved", "dequantized_bytes", "wall_s"]
    out = totals[["strategy", *numbers]].assign(
        **{c: pd.to_numeric(totals[c], errors="coerce") for c in numbers}
    )
    med = out.groupby("strategy", as_index=False)[numbers].median()
    dequantize = rows[rows["phase"] == DEQUANTIZE]
    seconds = pd.to_numeric(dequantize["phase_wall_s"], errors="coerce").groupby(
        dequantize["strategy"]
    )
    med["dequantize_s"] = med["strategy"].map(seconds.median())
    return med[QUANTIZED_COLUMNS]


def ceiling_rows(phases: pd.DataFrame, shown: pd.DataFrame) -> pd.DataFrame:
    """The ok whole-run rows of `phases` behind the summary rows `shown` (their strategies,
    dtypes and, where recorded, models and routes): what the chart's ceiling line is the median
    of (a link's ceiling is never pooled with the disk's)."""
    totals = with_route(phases[(phases["phase"] == TOTAL) & (phases["status"] == OK)])
    picked = totals["strategy"].isin(shown["base_strategy"]) & totals["dtype"].isin(shown["dtype"])
    for column in ("model", ROUTE):
        if column in shown and column in totals:
            picked &= totals[column].isin(shown[column])
    return totals[picked]


STRATEGY_NAME = "strategy_name"  # `route_labelled`'s column: the registered name behind a label


def route_labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` (phase or summary rows) whose `strategy` names its route where it is remote
    (`pipelined · s3 · 1Gbit · c16`), and a local one's too beside remote ones (`pipelined ·
    local`), so that anything grouped, coloured or picked by strategy keeps the routes apart;
    the registered name is kept in `strategy_name`. Relabelled rows are returned as they are."""
    if STRATEGY_NAME in rows.columns or rows.empty:
        return rows
    rows = with_route(rows)
    mixed = rows[ROUTE].nunique() > 1
    labels = [routed(s, r, local_too=mixed) for s, r in zip(rows["strategy"], rows[ROUTE])]
    return rows.assign(**{STRATEGY_NAME: rows["strategy"]}).assign(strategy=labels)


def _bandwidth(link: Any) -> float:
    if not isinstance(link, str) or link == UNSHAPED:
        return 0.0
    try:
        return Link.parse(link).bits_per_s
    except Exception:  # noqa: BLE001 - an unreadable link only sorts first
        return 0.0


def route_order(rows: pd.DataFrame) -> list[str]:
    """The routes of `rows`, local first, then by source, link bandwidth and concurrency
    (`c4` before `c16`, `1Gbit` before `10Gbit`)."""
    rows = with_route(rows)
    if rows.empty:
        return []
    firsts = rows.drop_duplicates(ROUTE)
    nothing = pd.Series(None, index=firsts.index, dtype=object)
    keys = {
        str(r): (
            r != LOCAL,
            str(src) if isinstance(src, str) else "",
            _bandwidth(link),
            float(c) if _known(c) else 0.0,
            str(r),
        )
        for r, src, link, c in zip(
            firsts[ROUTE],
            firsts.get("source", nothing),
            firsts.get("link", nothing),
            firsts.get("concurrency", nothing),
            strict=True,
        )
    }
    return sorted(keys, key=keys.__getitem__)


def remote_figures(rows: pd.DataFrame) -> pd.DataFrame:
    """Per strategy and remote route of whole-run `rows`, over the ok repeats: the median wall,
    its ceiling (the checkpoint's bytes over the link's bandwidth) and wall ÷ ceiling, the bytes
    received against the checkpoint's, and the requests; empty where no row is remote."""
    totals = route_labelled(with_route(whole_run(rows)))
    totals = totals[(totals["phase"] == TOTAL) & (totals["status"] == OK)]
    totals = totals[totals[ROUTE] != LOCAL]
    columns = ["wall_s", "ceiling_s", "ceiling_ratio", "bytes_received", "requests"]
    if totals.empty:
        return pd.DataFrame(columns=["strategy", *columns, "checkpoint_bytes"])
    numbers = totals.reindex(columns=[*columns, "checkpoint_bytes"]).apply(
        pd.to_numeric, errors="coerce"
    )
    grouped = numbers.assign(strategy=totals["strategy"]).groupby("strategy", sort=False)
    return grouped.median().reset_index()


def _start_rss(rows: pd.DataFrame) -> pd.Series:
    """Per phase row of one result: the RSS when the phase began, where that is known without
    subtracting an overlapping phase: the end RSS of the last phase that ended before it began
    (by recorded times; by order where times were not recorded and nothing overlaps), else the
    baseline; NaN for a phase that overlaps another and has no recorded times."""
    out = []
    timed = rows["phase_start_s"].notna() & rows["phase_end_s"].notna()
    overlaps = rows["phase_overlaps"].map(lambda o: hasattr(o, "__len__") and len(o) > 0)
    for (_, row), is_timed, overlapping in zip(rows.iterrows(), timed, overlaps, strict=True):
        if is_timed:
            before = rows[timed & (rows["phase_end_s"] <= row["phase_start_s"])]
            before = before.sort_values("phase_end_s")
        elif not overlapping:
            before = rows[(rows["phase_order"] < row["phase_order"]) & ~overlaps]
            before = before.sort_values("phase_order")
        else:
            out.append(float("nan"))
            continue
        last = before["phase_end_rss_bytes"].iloc[-1] if len(before) else row["baseline_rss_bytes"]
        out.append(float(last))
    return pd.Series(out, index=rows.index, dtype=float)


#: each phase's highest anonymous and file-backed RSS (rows since the fields were added)
PEAK_SPLIT = ("phase_peak_anon_rss_bytes", "phase_peak_file_rss_bytes")


def phase_medians(phases: pd.DataFrame) -> pd.DataFrame:
    """Median per (strategy, route, phase) over the ok repeats, each strategy named with its
    route where it is remote (`route_labelled`): each phase's own high-water mark over
    the baseline (`peak_over_baseline_bytes`), and what it adds to the RSS it began at
    (`adds_bytes`, see `_start_rss`: NaN where an overlapping phase would have to be subtracted).
    """
    ok = route_labelled(whole_run(phases))
    ok = ok[(ok["status"] == OK) & (ok["phase"] != TOTAL)].sort_values("phase_order")
    if ok.empty:
        return pd.DataFrame()
    for col in ("phase_start_s", "phase_end_s"):
        if col not in ok.columns:
            ok = ok.assign(**{col: float("nan")})
    start = pd.concat([_start_rss(rows) for _, rows in ok.groupby("result_id")])
    ok = ok.assign(
        adds_bytes=ok["phase_peak_rss_bytes"] - start.reindex(ok.index),
        peak_over_baseline_bytes=ok["phase_peak_rss_bytes"] - ok["baseline_rss_bytes"],
    )
    cols = [
        "phase_wall_s",
        "adds_bytes",
        "peak_over_baseline_bytes",
        "phase_anon_rss_bytes",
        "phase_file_rss_bytes",
        "phase_peak_ratio",
        "checkpoint_bytes",
        "phase_order",
        "phase_start_s",
        "phase_end_s",
    ]
    cols += [c for c in PEAK_SPLIT if c in ok.columns]  # absent from older files
    ok[cols] = ok[cols].apply(pd.to_numeric, errors="coerce")
    return ok.groupby(["strategy", "phase"], as_index=False)[cols].median()


def overlapping_phases(rows: pd.DataFrame) -> dict[str, list[str]]:
    """strategy -> `"a ∥ b"` for each pair of its phases that ran at the same time.

    Such phases are not disjoint slices of the run (a pipelined load builds while it reads): their
    times and peaks each include the shared span, so they must not be added up.
    """
    if "phase_overlaps" not in rows.columns:
        return {}
    out: dict[str, list[str]] = {}
    rows = rows[rows["phase"] != TOTAL]  # the whole load spans every phase by definition
    for strategy, phase, others in rows[["strategy", "phase", "phase_overlaps"]].itertuples(
        index=False
    ):
        listed = hasattr(others, "__iter__") and not isinstance(others, str)  # NaN in old runs
        for other in list(others) if listed else []:
            pair = " ∥ ".join(sorted((str(phase), str(other))))
            if pair not in out.setdefault(strategy, []):
                out[strategy].append(pair)
    return {k: v for k, v in out.items() if v}


def phase_bands(
    phases: pd.DataFrame, result_ids: list[str], labels: dict[str, str]
) -> pd.DataFrame:
    """Phase start/end seconds of each result: the recorded times where there are any (phases
    that ran at the same time overlap there), else the phases laid end to end (older files).
    `lane` numbers the bands of a result so that overlapping ones get rows of their own."""
    out = [
        bands_of(whole_run(phases[phases["result_id"] == rid]), labels[rid]) for rid in result_ids
    ]
    columns = ["label", "phase", "start_s", "end_s", "lane"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)


def bands_of(rows: pd.DataFrame, label: str) -> pd.DataFrame:
    """One result's (or one strategy's median) phase rows as bands `label`, `phase`, `start_s`,
    `end_s`, `lane`."""
    rows = rows[rows["phase"] != TOTAL].sort_values("phase_order")
    wall = pd.to_numeric(rows["phase_wall_s"]).astype(float)
    nothing = pd.Series(float("nan"), index=rows.index)
    start = pd.to_numeric(rows.get("phase_start_s", nothing), errors="coerce")
    end = pd.to_numeric(rows.get("phase_end_s", nothing), errors="coerce")
    if start.isna().any() or end.isna().any():
        end = wall.cumsum()
        start = end - wall
    bands = pd.DataFrame({"label": label, "phase": rows["phase"], "start_s": start, "end_s": end})
    return bands.sort_values("start_s").assign(lane=_lanes(bands.sort_values("start_s")))


def _lanes(bands: pd.DataFrame) -> list[int]:
    """The first lane free at each band's start (bands sorted by start)."""
    ends: list[float] = []
    lanes = []
    for start, end in zip(bands["start_s"], bands["end_s"], strict=True):
        lane = next((i for i, e in enumerate(ends) if e <= start + 1e-9), len(ends))
        if lane < len(ends):
            ends[lane] = end
        else:
            ends.append(end)
        lanes.append(lane)
    return lanes


OWN, SUM = "process 0 (its own RSS)", "all {n} processes (sum)"


def group_traces(samples: pd.DataFrame, baselines: dict[tuple[str, int], float]) -> pd.DataFrame:
    """One result's RSS over baseline as named traces (`trace`, `t_s`, `rss_u` in bytes): the one
    process of a single-process load; for a load on N processes, process 0's own RSS and the
    group's total (each process's RSS over its own baseline, carried forward between its samples,
    summed), so a per-process curve is never read as the whole load's.

    Args:
        samples: the result's samples, every process (`process_index`, `t_s`, RSS columns).
        baselines: (result_id, process_index) -> that process's baseline RSS bytes.
    """
    s = samples.assign(
        over=samples["rss_anon_bytes"]
        + samples["rss_file_bytes"]
        - [
            baselines.get((r, p), 0.0)
            for r, p in zip(samples["result_id"], samples["process_index"])
        ]
    )
    processes = sorted(s["process_index"].unique())
    if len(processes) <= 1:
        return pd.DataFrame({"trace": "RSS over baseline", "t_s": s["t_s"], "rss": s["over"]})
    grid = s.pivot_table(index="t_s", columns="process_index", values="over").sort_index()
    total = grid.ffill().fillna(0.0).sum(axis=1)
    own = s[s["process_index"] == processes[0]]
    return pd.concat(
        [
            pd.DataFrame({"trace": OWN, "t_s": own["t_s"], "rss": own["over"]}),
            pd.DataFrame(
                {"trace": SUM.format(n=len(processes)), "t_s": total.index, "rss": total.values}
            ),
        ],
        ignore_index=True,
    )
