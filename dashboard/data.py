"""Loading and shaping results for the dashboard: the bench's one reader, cached, and small views.

Results come only through `bench.records.results.read_results` (and `summarize`),
recommendations only through `bench.analysis.advice` (the wording `loadbench recommend` prints).
Nothing here imports jax, and nothing reads outside the results folder named by the
`LOADBENCH_RESULTS` environment variable (default `results`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from bench import strategies as _strategies
from bench.records import results as _results
from dashboard import RESULTS_ENV
from dashboard.frames import (  # noqa: F401 (the pages' API)
    overlapping_phases,
    phase_medians,
    run_labels,
    whole_run,
)
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
    for path in sorted(folder.rglob("*")):  # <machine>/<run>.* and checks/<machine>/<run>.*
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


def run_file(folder: Path, run_id: str) -> Path:
    """The results file of `run_id` in `folder` (`<machine>/<run>.jsonl`, `checks/...`), where
    `loadbench compare` reads one run alone; the folder itself where no file is named so."""
    return next(folder.rglob(f"{run_id}.jsonl"), folder)


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


@st.cache_data(show_spinner=False)
def multiprocess_strategies() -> set[str]:
    """The registered strategies that split a checkpoint across devices and processes
    (`MULTIPROCESS = True`: `sharded`, `sharded-dir`), read with `ast` (no jax)."""
    return {name for name, info in _strategies.catalog().items() if info.multiprocess}
