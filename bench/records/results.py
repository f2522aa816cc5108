"""The one reader of bench results (schema v2, see `bench.records.schema`), and what is computed
from them.

A run appends to `results/<machine>/<run-id>.jsonl` through the one writer (`bench.records.writer`);
`export_parquet` adds `<run-id>.<type>.parquet` at the end. `read_results(folder)` reads every
`*.jsonl` under `folder` (all machines, all runs): a truncated last line is skipped and reported
in `.errors` (a line its live writer is still appending, quietly), v1 lines are upgraded to v2,
and an unknown schema version skips that file and is reported in `.errors` naming it.
`summarize` gives one row per result over its repeats. Never import jax here: the dashboard
uses this module.

Example:
    >>> res = read_results("results")
    >>> summarize(res.phases)[["strategy", "peak_ratio", "wall_s"]]
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.errors import SchemaVersionError
from bench.intervals import instability, interval
from bench.link import FILE_SOURCE, UNSHAPED
from bench.records.schema import (
    READABLE_VERSIONS,
    RECORD_TYPES,
    PhaseRecord,
    RunRecord,
    SampleRecord,
    field_names,
    upgrade,
)
from bench.records.writer import writer_alive
from bench.vocabulary import COMPLETE, CRASHED, INTERRUPTED, OK, RUNNING, SPEC, STATUS_SEVERITY
from loader.vocabulary import REFERENCE, TOTAL

LOCAL = "local"  # the route of a load from the local disk (`source` file)
ROUTE = "route"  # the derived column: where a row's bytes came from (`route`)
GROUP_KEYS = [
    "run_id",
    "shapes",
    "strategy",
    "dtype",
    "devices",
    "processes",
    "cache",
    "model",
    ROUTE,
]
REMOTE = ("source", "link", "concurrency")  # what a route is made of (`route`)
FLOOR_KEYS = ["run_id", "shapes", "cache"]  # what a row shares with the floor it is held against


@dataclass
class Results:
    """Every record read from a folder: one DataFrame per record type, plus what could not be read.

    `phases` has the derived columns `peak_ratio` and `phase_peak_ratio`
    ((peak - baseline) / checkpoint bytes); `runs`, `phases` and `samples` always have the schema's
    columns, even when empty.
    """

    runs: pd.DataFrame
    phases: pd.DataFrame
    samples: pd.DataFrame
    errors: list[tuple[str, str]] = field(default_factory=list)


def read_jsonl(path: str | os.PathLike) -> tuple[dict[str, list[dict]], list[tuple[str, str]]]:
    """Read one results file: records by type and (file, message) for each unreadable line.

    Lines of an older readable version come back as the current version (`schema.upgrade`).

    Raises:
        SchemaVersionError: the file holds a schema version this reader cannot read.
    """
    path = Path(path)
    records: dict[str, list[dict]] = {name: [] for name in RECORD_TYPES}
    errors: list[tuple[str, str]] = []
    lines = path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = _current(json.loads(raw), path, number)
        except ValueError as exc:
            if number == len(lines) and writer_alive(path):
                continue  # a line its writer is appending right now: read it next time
            errors.append((str(path), _unreadable(path, number, len(lines), exc)))
            continue
        kind = obj.get("record")
        if kind not in records:
            errors.append((str(path), f"line {number}: unknown record type {kind!r}; skipped"))
            continue
        records[kind].append(obj)
    return records, errors


def _defaults(record_type: type) -> dict[str, Any]:
    """Fields added to the schema with a default: what a file written before them holds."""
    return {
        f.name: f.default
        for f in dataclasses.fields(record_type)
        if f.default is not dataclasses.MISSING and f.default is not None
    }


def _current(obj: Any, path: Path, number: int) -> dict[str, Any]:
    """A parsed line as a record of the current schema version; SchemaVersionError otherwise."""
    version = obj.get("schema_version") if isinstance(obj, dict) else None
    if version not in READABLE_VERSIONS:
        raise SchemaVersionError(
            f"{path}: line {number} has schema_version {version!r}, this loadbench reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}; read it with the loadbench that "
            "wrote it, or move it out of the results folder"
        )
    return upgrade(obj)


def _unreadable(path: Path, number: int, count: int, exc: ValueError) -> str:
    if number == count:  # no newline after it: a write cut short by a kill
        return f"line {number}: truncated last line skipped (a killed run?)"
    return f"line {number}: not JSON ({exc}); line skipped"


def _frame(rows: list[dict], record_type: type) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=field_names(record_type))
    for name, value in _defaults(record_type).items():
        if len(frame):
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            column = frame[name] if numeric else frame[name].astype(object)
            frame[name] = column.fillna(value)
    return frame


def route(source: Any, link: Any, concurrency: Any) -> str:
    """Where a load's bytes came from, as one key: `local` (the local disk), else the source,
    the link and the concurrency, `s3 · 1Gbit · c16` (`unshaped` over plain loopback; no `c`
    part where no concurrency was recorded). Rows of different routes are different
    configurations: never one median, one point or one series.

    Example:
        >>> route("s3", "1Gbit", 16), route("file", None, None)
        ('s3 · 1Gbit · c16', 'local')
    """
    if not isinstance(source, str) or source in ("", FILE_SOURCE):
        return LOCAL
    parts = [source, link if isinstance(link, str) and link else UNSHAPED]
    known = concurrency is not None and not (
        isinstance(concurrency, float) and concurrency != concurrency
    )
    return " · ".join(parts + ([f"c{int(concurrency)}"] if known else []))


def routed(strategy: Any, where: Any, *, local_too: bool = False) -> str:
    """A strategy's label with its route: `pipelined · s3 · 1Gbit · c16`; a local load's is the
    name alone (`local_too`: `pipelined · local`, beside remote ones)."""
    return str(strategy) if where == LOCAL and not local_too else f"{strategy} · {where}"


def with_route(phases: pd.DataFrame) -> pd.DataFrame:
    """`phases` with the `route` column (`route`), computed where it is missing."""
    if ROUTE in phases.columns:
        return phases
    fields = [phases.get(c, pd.Series(None, index=phases.index, dtype=object)) for c in REMOTE]
    return phases.assign(
        **{ROUTE: [route(*values) for values in zip(*fields, strict=True)] if len(phases) else []}
    )


def _ratio(peak: pd.Series, baseline: pd.Series, checkpoint: pd.Series) -> pd.Series:
    ckpt = pd.to_numeric(checkpoint, errors="coerce").where(lambda s: s > 0)
    return (pd.to_numeric(peak) - pd.to_numeric(baseline)) / ckpt


def _run_status(runs: list[dict], path: Path) -> list[dict]:
    """The last run record of each run in one file, a "running" one read as "interrupted" once
    no writer holds the file (the run was killed before it wrote its end record)."""
    last = {r.get("run_id"): r for r in runs}
    out = []
    for record in last.values():
        if record.get("status") == RUNNING and not writer_alive(path):
            record = {**record, "status": INTERRUPTED}
        out.append(record)
    return out


def read_results(folder: str | os.PathLike) -> Results:
    """Read every `*.jsonl` under `folder` (or one file). A missing folder gives empty frames."""
    folder = Path(folder)
    files = [folder] if folder.is_file() else sorted(folder.rglob("*.jsonl"))
    merged: dict[str, list[dict]] = {name: [] for name in RECORD_TYPES}
    errors: list[tuple[str, str]] = []
    for path in files:
        try:
            records, file_errors = read_jsonl(path)
        except (SchemaVersionError, OSError) as exc:
            errors.append((str(path), str(exc)))
            continue
        errors += file_errors
        records["run"] = _run_status(records["run"], path)
        for kind, rows in records.items():
            merged[kind] += rows
    phases = _frame(merged["phase"], PhaseRecord)
    phases["peak_ratio"] = _ratio(
        phases["peak_rss_bytes"], phases["baseline_rss_bytes"], phases["checkpoint_bytes"]
    )
    phases["phase_peak_ratio"] = _ratio(
        phases["phase_peak_rss_bytes"], phases["baseline_rss_bytes"], phases["checkpoint_bytes"]
    )
    phases = with_route(phases)
    runs = _frame(merged["run"], RunRecord).drop_duplicates("run_id", keep="last")
    return Results(
        runs=runs.reset_index(drop=True),
        phases=phases,
        samples=_frame(merged["sample"], SampleRecord),
        errors=errors,
    )


def read_folders(folders: list[str | os.PathLike]) -> Results:
    """Every results file under each of `folders`, read as one (`read_results` each)."""
    parts = [read_results(f) for f in folders]
    return Results(
        runs=pd.concat([p.runs for p in parts], ignore_index=True).drop_duplicates(
            "run_id", keep="last"
        ),
        phases=pd.concat([p.phases for p in parts], ignore_index=True),
        samples=pd.concat([p.samples for p in parts], ignore_index=True),
        errors=[e for p in parts for e in p.errors],
    )


def partial_runs(results: Results) -> list[str]:
    """One line per run that lost strategies it was asked to run (interrupted or failed before
    reaching them, or their lines lost) where no other run in `results` measured them either:
    an answer from such a folder would name the best of what is left, not of what was asked."""
    said = []
    phases = results.phases
    for _, run in results.runs.iterrows():
        mine = phases["run_id"] == run["run_id"]
        asked = run["strategies"] if isinstance(run["strategies"], list) else []
        lost = set(asked) - set(phases.loc[mine, "strategy"])
        lost -= set(phases.loc[~mine & (phases["status"] == OK), "strategy"])
        if lost:
            how = f"it is {run['status']}; " if run["status"] not in (COMPLETE, RUNNING) else ""
            said.append(
                f"run {run['run_id']}: {how}{len(lost)} of its {len(asked)} strategies have no "
                f"row there or in another run ({', '.join(sorted(lost))})"
            )
    return said


def headline(phases: pd.DataFrame) -> pd.DataFrame:
    """The rows that speak for a result: single-process rows, or the summed row (index -1)."""
    return phases[(phases["processes"] <= 1) | (phases["process_index"] == -1)]


def worst_status(statuses: pd.Series) -> str:
    """The most severe status among repeats (crashed > oom > timeout > wrong > skipped > ok)."""
    return max(statuses, key=lambda s: STATUS_SEVERITY.get(s, 99))


def _summary_row(group: pd.DataFrame) -> dict[str, Any]:
    totals = group[group["phase"] == TOTAL]
    ok = totals[totals["status"] == OK]
    wall = pd.to_numeric(ok["wall_s"])
    ckpt = int(totals["checkpoint_bytes"].iloc[0]) if len(totals) else 0
    row: dict[str, Any] = {
        "kind": group["kind"].iloc[0],
        "status": worst_status(totals["status"]) if len(totals) else CRASHED,
        "repeats": int(totals["result_id"].nunique()),
        "ok_repeats": int(len(ok)),
        "checkpoint_bytes": ckpt,
        "largest_tensor_bytes": int(totals["largest_tensor_bytes"].iloc[0]) if len(totals) else 0,
        "tensors": int(totals["tensors"].iloc[0]) if len(totals) else 0,
        "baseline_rss_bytes": pd.to_numeric(ok["baseline_rss_bytes"]).median(),
        "peak_rss_bytes": pd.to_numeric(ok["peak_rss_bytes"]).median(),
        "peak_ratio": pd.to_numeric(ok["peak_ratio"]).median(),
        "wall_s": wall.median(),
        "wall_s_min": wall.min(),
        "wall_s_max": wall.max(),
        "peak_source": ok["peak_source"].iloc[0] if len(ok) else None,
        "resident_fraction": pd.to_numeric(totals["resident_fraction"]).median(),
        "pagecache_growth_bytes": pd.to_numeric(totals["pagecache_growth_bytes"]).median(),
        "memory_limit": next((m for m in totals["memory_limit"] if isinstance(m, str)), None),
        "backend": next((b for b in totals.get("backend", ()) if isinstance(b, str)), None),
        "disk_read_limit_enforced": _every(totals.get("disk_read_limit_enforced")),
        "error": next((e for e in totals["error"] if isinstance(e, str) and e), None),
        **{k: _median(ok, k) for k in ("load_s", "ready_s")},
        **{k: _median(ok, k) for k in ("device_ceiling_s", "device_ceiling_ratio")},
        "ceiling_s": pd.to_numeric(ok["ceiling_s"]).median(),
        "ceiling_ratio": pd.to_numeric(ok["ceiling_ratio"]).median(),
        **{k: _first(totals, k) for k in REMOTE},
        **{
            k: _median(ok, k)
            for k in ("ceiling_bytes", "received_bytes_per_s", "requests", "bytes_received")
        },
    }
    row["throughput_bytes_per_s"] = ckpt / row["wall_s"] if row["wall_s"] > 0 else float("nan")
    row |= _paired(ok)
    ok_ids = set(ok["result_id"])
    steps = group[(group["phase"] != TOTAL) & group["result_id"].isin(ok_ids)]
    for phase, rows in steps.sort_values("phase_order").groupby("phase", sort=False):
        row[f"{phase}_wall_s"] = pd.to_numeric(rows["phase_wall_s"]).median()
        row[f"{phase}_peak_rss_bytes"] = pd.to_numeric(rows["phase_peak_rss_bytes"]).median()
        row[f"{phase}_peak_ratio"] = pd.to_numeric(rows["phase_peak_ratio"]).median()
    return row


def _paired(ok: pd.DataFrame) -> dict[str, Any]:
    """The paired ratio's estimate and 95% interval over the ok repeats (`bench.
    intervals`), the median reference, the peaks' repeat range, and why the time is unstable
    (None: it is not, or no repeat carried a reference)."""
    ordered = ok.sort_values("repeat", kind="stable")
    ratios = pd.to_numeric(ordered.get("paired_ratio", pd.Series(dtype=float))).dropna()
    drifts = pd.to_numeric(ordered.get("reference_drift", pd.Series(dtype=float)))
    others = pd.to_numeric(ordered.get("others_cpu_fraction", pd.Series(dtype=float)))
    iv = interval(ratios.tolist())
    walls = interval(pd.to_numeric(ordered["wall_s"]).dropna().tolist())
    peaks = pd.to_numeric(ok["peak_rss_bytes"])
    peak_iv = interval(peaks.dropna().tolist())
    why = instability(
        ratios.tolist(),
        [None if d != d else float(d) for d in drifts],
        [None if o != o else float(o) for o in others],
    )
    return {
        "paired_ratio": iv.estimate if iv else float("nan"),
        "paired_low": iv.low if iv and iv.n > 1 else float("nan"),
        "paired_high": iv.high if iv and iv.n > 1 else float("nan"),
        "paired_n": iv.n if iv else 0,
        "wall_low": walls.low if walls and walls.n > 1 else float("nan"),  # t on log walls
        "wall_high": walls.high if walls and walls.n > 1 else float("nan"),
        "reference_s": _median(ok, "reference_s"),
        "peak_rss_min": peaks.min(),
        "peak_rss_max": peaks.max(),
        "peak_low": peak_iv.low if peak_iv and peak_iv.n > 1 else float("nan"),  # t on logs
        "peak_high": peak_iv.high if peak_iv and peak_iv.n > 1 else float("nan"),
        "unstable": why.text if why else None,
    }


def _median(frame: pd.DataFrame, column: str) -> float:
    return pd.to_numeric(frame[column]).median() if column in frame else float("nan")


def _first(frame: pd.DataFrame, column: str) -> Any:
    """The first recorded value of `column` (a route's source, link or concurrency), else None."""
    if column not in frame:
        return None
    known = frame[column].dropna()
    return known.iloc[0] if len(known) else None


def _every(flags: pd.Series | None) -> bool | None:
    """True if every recorded flag is true, False if one is not, None where none was recorded."""
    known = flags.dropna() if flags is not None else pd.Series(dtype=object)
    return None if known.empty else bool(known.astype(bool).all())


def summarize(phases: pd.DataFrame, *, floor_ratio: bool = True) -> pd.DataFrame:
    """One row per (run_id, shapes, strategy, dtype, devices, processes, cache, model, route)
    over the repeats (a spec, port and transposed load of one strategy are three rows, and so are
    a local load and loads over s3 at concurrency 1 and 64: `route`).

    Columns: the group keys, kind, status (worst), repeats, ok_repeats, checkpoint_bytes,
    largest_tensor_bytes, tensors, baseline_rss_bytes, peak_rss_bytes, peak_ratio, wall_s (median
    over ok repeats), wall_s_min, wall_s_max, throughput_bytes_per_s, peak_source, error (first),
    backend (the first recorded; None in older files), source, link and concurrency (the
    route's), requests and bytes_received (medians; NaN for a local load),
    ceiling_s and ceiling_ratio (medians; NaN where no probe stood behind the rows), over a shaped
    link ceiling_bytes and a remote load's received_bytes_per_s (medians), floor_ratio
    (`with_floor_ratio`; left out with `floor_ratio=False`, for a caller that adds it over several
    summaries at once), and per phase P: P_wall_s, P_peak_rss_bytes, P_peak_ratio (medians).
    """
    if phases.empty:
        return pd.DataFrame(
            columns=[*GROUP_KEYS, "kind", "status", "repeats", "peak_ratio", "wall_s"]
        )
    if "model" not in phases:  # frames from before the model was recorded
        phases = phases.assign(model=SPEC)
    phases = with_route(phases)
    rows = []
    for keys, group in headline(phases).groupby(GROUP_KEYS, sort=False, dropna=False):
        rows.append({**dict(zip(GROUP_KEYS, keys, strict=True)), **_summary_row(group)})
    return with_floor_ratio(pd.DataFrame(rows)) if floor_ratio else pd.DataFrame(rows)


def with_floor_ratio(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with `floor_ratio`: each row's time over the same run's reference line (`floor`,
    one Python read of the bytes) on the same shape set and page cache; NaN where there is none.
    Both sides are paired ratios where the rows carry them (each repeat over its own moment's
    reference: a ratio of the same moment, whatever the machine did between them), else the
    median walls."""
    if summary.empty or "kind" not in summary:
        return summary
    keys = [k for k in FLOOR_KEYS if k in summary]
    floors = summary[summary["kind"] == REFERENCE]
    paired = pd.to_numeric(summary.get("paired_ratio", pd.Series(index=summary.index)))
    walls = pd.to_numeric(summary["wall_s"])
    floor_wall = summary.join(floors.groupby(keys)["wall_s"].median().rename("f"), on=keys)["f"]
    out = walls / floor_wall
    if paired.notna().any():
        floor_paired = (
            pd.to_numeric(floors["paired_ratio"]).groupby([floors[k] for k in keys]).median()
        )
        mine = summary.join(floor_paired.rename("f"), on=keys)["f"]
        out = (paired / mine).where(paired.notna() & mine.notna(), out)
    return summary.assign(floor_ratio=out)


#: The two ratios every surface prints, each defined once (`x_ceiling`, `with_floor_ratio`), in
#: the words a legend gives them.
X_CEILING = "x ceiling"
X_FLOOR = "x floor"
MEANINGS = {
    X_CEILING: "wall / a bare copy of the checkpoint timed right before and after each repeat "
    "(geometric mean over the repeats; older files without that copy: wall / the machine's best "
    "read from its probe)",
    X_FLOOR: "x ceiling / the floor line's x ceiling (the same run, shape set and page cache; "
    "older files: wall / the floor line's wall)",
}


def x_ceiling(summary: pd.DataFrame) -> pd.Series:
    """Each summary row's `x ceiling` (`MEANINGS`): its `paired_ratio`, else (older rows, with no
    reference beside their repeats) its median `ceiling_ratio`; NaN where neither is known."""
    paired = pd.to_numeric(summary.get("paired_ratio", pd.Series(index=summary.index)))
    probe = pd.to_numeric(summary.get("ceiling_ratio", pd.Series(index=summary.index)))
    return paired.where(paired.notna(), probe)


def _parquet_ready(df: pd.DataFrame) -> pd.DataFrame:
    """Dict and list cells (substeps_s, allocator_env, command) become JSON strings for Parquet."""
    out = df.copy()
    for col in out.columns:
        if out[col].map(lambda v: isinstance(v, dict | list)).any():
            out[col] = out[col].map(lambda v: json.dumps(v) if isinstance(v, dict | list) else v)
    return out


def export_parquet(jsonl_path: str | os.PathLike) -> list[Path]:
    """Write `<run-id>.{runs,phases,samples}.parquet` beside a results file (atomically).

    Dict/list fields are stored as JSON strings; each file gets the `.jsonl`'s permissions (the
    atomic write's temporary file is private). Returns the paths written.
    """
    from loader.format.atomic import atomic_write_bytes

    jsonl_path = Path(jsonl_path)
    res = read_results(jsonl_path)
    written = []
    for name in ("runs", "phases", "samples"):
        buf = io.BytesIO()
        _parquet_ready(getattr(res, name)).to_parquet(buf, index=False)
        target = jsonl_path.with_suffix(f".{name}.parquet")
        atomic_write_bytes(target, buf.getvalue())
        os.chmod(target, os.stat(jsonl_path).st_mode & 0o777)  # as readable as the .jsonl
        written.append(target)
    return written
