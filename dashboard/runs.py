"""Which runs a results folder holds, what each one is, and which the pages show by default.

A run is labelled with its machine, date, shape sets, id, its status (complete, interrupted,
failed, running) and its limits (a memory limit, a disk read cap, fewer CPUs, made by
`recommend --check`). By default a page shows, per shape set, the newest run that is complete
and unconstrained: an interrupted run lacks strategies, a run under a limit answers another
question. Every run stays selectable. Pure pandas (no Streamlit, no jax): the report uses it too.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.units import format_bytes
from bench.vocabulary import COMPLETE

NEWEST = "newest"  # the run pickers' first choice: the default run of each shape set
NEWEST_LABEL = "Newest complete, unconstrained run of each shape set"


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _row_limit(rows: pd.DataFrame, column: str) -> Any:
    """A limit the run's rows recorded (runs written before run records said so)."""
    if column not in rows.columns:
        return None
    known = pd.to_numeric(rows[column], errors="coerce").dropna()
    return known.max() if len(known) else None


def limits(run: dict[str, Any], rows: pd.DataFrame) -> list[str]:
    """The limits a run ran under, in words (empty: unconstrained)."""
    out = []
    ram = run.get("host_ram_bytes")
    ram = ram if _known(ram) else _row_limit(rows, "host_ram_bytes")
    if _known(ram):
        out.append(f"memory limit {format_bytes(float(ram))}")
    disk = run.get("disk_read_bytes_per_s")
    disk = disk if _known(disk) else _row_limit(rows, "disk_read_bytes_per_s")
    if _known(disk):
        out.append(f"disk reads {float(disk) / 1e6:.0f} MB/s")
    cpus = run.get("cpu_limit")
    if _known(cpus):
        out.append(f"{float(cpus):g} CPUs")
    if _known(run.get("check")) and bool(run.get("check")):
        out.append("recommend --check")
    return out


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
    run: Any, shapes: list[str] | None = None, status: str | None = None, said: list[str] = ()
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
    for pick in (facts.get("usual"), facts.get("status") == COMPLETE):
        if pick is not None and pick.any():
            return str(facts[pick].index[0])
    return str(facts.index[0]) if len(facts) else None


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


def default_phases(runs: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """The phase rows of each shape set's default run (`default_runs`)."""
    chosen = default_runs(runs, phases)
    keep = phases["shapes"].map(chosen) == phases["run_id"]
    return phases[keep]
