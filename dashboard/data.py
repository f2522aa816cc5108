"""Loading and shaping results for the dashboard: the bench's one reader, cached, plus small views.

Results come only through `bench.results.read_results` (and `summarize`), recommendations only
through `bench.advice` (the wording `loadbench recommend` prints). Nothing here imports jax, and nothing reads outside the results
folder named by the `LOADBENCH_RESULTS` environment variable (default `results`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from bench import results as _results
from bench import strategies as _strategies
from dashboard import RESULTS_ENV
from dashboard.frames import phase_medians, run_label, run_labels, whole_run  # noqa: F401 (the pages' API)
from loader.errors import CheckpointError

ENV_VAR = RESULTS_ENV


def results_folder() -> Path:
    """The folder the dashboard shows: `$LOADBENCH_RESULTS`, else `results` (never the URL)."""
    return Path(os.environ.get(ENV_VAR) or "results")


def _fingerprint(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when results change (path, mtime, size of each results file), for the cache."""
    if not folder.is_dir():
        return ()
    out = []
    for path in sorted(folder.glob("*/*")):
        if path.suffix in (".jsonl", ".parquet") and path.is_file():
            stat = path.stat()
            out.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(out)


@st.cache_data(show_spinner="Reading results…")
def _load_cached(folder: str, stamp: tuple) -> Any:
    return _results.read_results(folder)


def load_results(folder: Path) -> Any | None:
    """Read `folder` through the bench's reader (cached until a results file changes).

    Args:
        folder: the results folder.

    Returns:
        The reader's `Results`, or None when the folder does not exist.
    """
    if not folder.is_dir():
        return None
    return _load_cached(str(folder.resolve()), _fingerprint(folder))


def summarize(phases: pd.DataFrame) -> pd.DataFrame:
    """The bench's `summarize` (one row per run, shapes, strategy, dtype, devices, processes)."""
    if phases.empty:
        return pd.DataFrame()
    return _results.summarize(phases)


def strategy_descriptions() -> tuple[dict[str, str], str | None]:
    """Each registered strategy's description (its docstring's first line), and any problem.

    Read with `ast` from the registry (and `LOADBENCH_EXTRA_STRATEGIES`), so no jax. A strategy
    measured but no longer registered has no description; its name stands alone.
    """
    return _descriptions(os.environ.get(_strategies.EXTRA_ENV, ""))


@st.cache_data(show_spinner=False)
def _descriptions(extra: str) -> tuple[dict[str, str], str | None]:
    """Cached per value of the extra-strategies variable (the registry it reads depends on it)."""
    try:
        return {n: info.description for n, info in _strategies.catalog().items()}, None
    except CheckpointError as e:  # a broken extra strategy module: say so, draw the rest
        return {}, str(e)
<<<<<<< HEAD
=======


def legend_order(rows: pd.DataFrame) -> list[str]:
    """The strategies of `rows` as the legend lists them: reference lines, ours, then peers."""
    rank = rows["kind"].map({k: i for i, k in enumerate(LEGEND_KINDS)}).fillna(len(LEGEND_KINDS))
    ordered = rows.assign(_rank=rank).sort_values(["_rank", "strategy"])
    return list(dict.fromkeys(ordered["strategy"]))


def run_label(run: pd.Series) -> str:
    """A short human label for a run record: `machine · date · run id`."""
    date = str(run.get("started_utc", ""))[:16].replace("T", " ")
    return f"{run.get('machine', '?')} · {date} · {run.get('run_id', '?')}"


def run_labels(runs: pd.DataFrame) -> dict[str, str]:
    """Run id -> label, newest first."""
    if runs.empty:
        return {}
    ordered = runs.sort_values("started_utc", ascending=False)
    return {r["run_id"]: run_label(r) for _, r in ordered.iterrows()}


def pareto_front(df: pd.DataFrame, x: str = "wall_s", y: str = "peak_ratio") -> pd.Series:
    """Which rows no other row beats on both `x` and `y` (lower is better for both).

    Reference lines (kind `reference`) and rows without numbers are never on the front.

    Args:
        df: one row per strategy.
        x: first cost column.
        y: second cost column.

    Returns:
        A boolean Series aligned with `df`.
    """
    eligible = df[(df["kind"] != REFERENCE) & df[x].notna() & df[y].notna()]
    front = pd.Series(False, index=df.index)
    for i, row in eligible.iterrows():
        others = eligible.drop(index=i)
        dominated = (
            (others[x] <= row[x])
            & (others[y] <= row[y])
            & ((others[x] < row[x]) | (others[y] < row[y]))
        )
        front[i] = not dominated.any()
    return front


def phase_medians(phases: pd.DataFrame) -> pd.DataFrame:
    """Median per (strategy, phase) over the ok repeats, with what each phase adds to the peak.

    `adds_bytes` is the phase's peak minus the RSS when it started (the previous phase's end, or
    the baseline for the first phase); `peak_over_baseline_bytes` is the phase peak minus baseline.
    """
    ok = whole_run(phases)
    ok = ok[(ok["status"] == OK) & (ok["phase"] != TOTAL)].sort_values("phase_order")
    if ok.empty:
        return pd.DataFrame()
    start = ok.groupby("result_id")["phase_end_rss_bytes"].shift(1)
    ok = ok.assign(start_rss=start.fillna(ok["baseline_rss_bytes"]))
    ok = ok.assign(
        adds_bytes=ok["phase_peak_rss_bytes"] - ok["start_rss"],
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
    ]
    return ok.groupby(["strategy", "phase"], as_index=False)[cols].median()


def gib(n: float | None) -> str:
    """Bytes as a short GiB/MiB string."""
    if n is None or pd.isna(n):
        return "–"
    if abs(n) >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    return f"{n / (1 << 20):.1f} MiB"


def overlapping_phases(rows: pd.DataFrame) -> dict[str, list[str]]:
    """strategy -> `"a ∥ b"` for each pair of its phases that ran at the same time.

    Such phases are not disjoint slices of the run (a pipelined load builds while it reads): their
    times and peaks each include the shared span, so they must not be added up.
    """
    if "phase_overlaps" not in rows.columns:
        return {}
    out: dict[str, list[str]] = {}
    for strategy, phase, others in rows[["strategy", "phase", "phase_overlaps"]].itertuples(
        index=False
    ):
        listed = hasattr(others, "__iter__") and not isinstance(others, str)  # NaN in old runs
        for other in list(others) if listed else []:
            pair = " ∥ ".join(sorted((str(phase), str(other))))
            if pair not in out.setdefault(strategy, []):
                out[strategy].append(pair)
    return {k: v for k, v in out.items() if v}
>>>>>>> main
