"""The time model of one strategy, fitted on its runs here (what `recommend --probe` scales).

Each strategy's ok runs here without limits (warm, and cold where measured) are fitted into terms a
probe can scale, with the child's CPU time (all threads) split the way the work is:

    cpu_s ~= k_tensor * tensors              the model build (its phase's CPU time, one core)
           + touch_here(checkpoint_bytes)    faulting in the model's fresh memory (the probe's
                                             first-touch curve: one thread, by mapping size)
           + k_byte * checkpoint_bytes       the rest: copying from the page cache, casting, ...
    parallelism P = cpu_s / wall_s on the largest warm checkpoint (the threads it keeps busy)
    overlap O: how much of a cold load's disk time hid behind its CPU work here (cold runs)

The build is fitted on its own phase, and the copying on what is left, so checkpoints whose bytes
per tensor are alike (gpt2 and sa3 are) cannot trade one term for the other. `bench.analysis.target`
scales the terms to the target. No jax.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.analysis.recommend import MIN_FIT_BYTES
from bench.machine.record import ProbeRecord
from bench.records.results import Results, headline
from bench.vocabulary import COLD, OK, WARM
from loader.vocabulary import BUILD, REFERENCE, TOTAL

UNLIMITED = ("host_ram_bytes", "disk_read_bytes_per_s", "cpus", "model_dtype")


@dataclass(frozen=True)
class TimeModel:
    """One strategy's time here, in terms a probe can scale (module docstring)."""

    strategy: str
    cpu_s_per_byte: float  # k_byte
    cpu_s_per_tensor: float  # k_tensor
    parallelism: float  # P
    overlap: float | None  # O; None: no cold run here
    runs: int
    shapes: tuple[str, ...]


def unlimited_runs(results: Results) -> pd.DataFrame:
    """The ok whole-run rows of model strategies measured here without limits, with a CPU time."""
    rows = headline(results.phases)
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK) & (rows["kind"] != REFERENCE)]
    for col in UNLIMITED:
        if col in rows:
            rows = rows[rows[col].isna()]
    rows = rows[pd.to_numeric(rows["checkpoint_bytes"]) >= MIN_FIT_BYTES]
    return rows[pd.to_numeric(rows["cpu_s"]).notna()] if "cpu_s" in rows else rows.iloc[0:0]


def _medians(rows: pd.DataFrame, build: pd.Series) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "ckpt": pd.to_numeric(rows["checkpoint_bytes"]),
            "tensors": pd.to_numeric(rows["tensors"]),
            "cpu": pd.to_numeric(rows["cpu_s"]),
            "wall": pd.to_numeric(rows["wall_s"]),
            "build": build.reindex(rows["result_id"]).fillna(0.0).to_numpy(),
        }
    )
    columns = ["cpu", "wall", "build"]
    return frame.groupby(["ckpt", "tensors"], as_index=False)[columns].median()


def build_cpu(phases: pd.DataFrame) -> pd.Series:
    """result_id -> the CPU seconds of its model build phase (the per-tensor work)."""
    rows = phases[phases["phase"] == BUILD]
    return pd.to_numeric(rows["phase_cpu_s"]).groupby(rows["result_id"]).max()


def touch_seconds(probe: ProbeRecord, nbytes: float) -> float:
    """Seconds one thread takes to fault in `nbytes` of fresh memory on the probed host: the
    cumulative time along its first-touch figures by mapping size, linear between them from 0,
    and past the largest at the rate of its last stretch."""
    points = sorted((int(n), rate) for n, rate in probe.first_touch.items())
    points = points or [(probe.probe_file_bytes, probe.first_touch_bytes_per_s)]
    sizes = [0.0, *(float(n) for n, _ in points)]
    seconds = [0.0, *(n / rate for n, rate in points)]
    if nbytes <= sizes[-1]:
        return float(np.interp(nbytes, sizes, seconds))
    slope = (seconds[-1] - seconds[-2]) / (sizes[-1] - sizes[-2])
    return seconds[-1] + (nbytes - sizes[-1]) * max(slope, 0.0)


def _through_origin(x: np.ndarray, y: np.ndarray) -> float:
    """The non-negative slope of y ~ k * x by least squares (the largest x weighs most)."""
    return max(float((x * y).sum() / (x * x).sum()), 0.0) if (x * x).sum() > 0 else 0.0


def _fit_cpu(medians: pd.DataFrame, here: ProbeRecord) -> tuple[float, float]:
    """(k_byte, k_tensor): the build phase per tensor, the rest less the first touch per byte."""
    ckpt, tensors = medians["ckpt"].to_numpy(float), medians["tensors"].to_numpy(float)
    build = medians["build"].to_numpy(float)
    touch = np.array([touch_seconds(here, n) for n in ckpt])
    rest = medians["cpu"].to_numpy(float) - build - touch
    return _through_origin(ckpt, rest), _through_origin(tensors, build)


def cpu_seconds(k: tuple[float, float], ckpt: float, tensors: float, probe: ProbeRecord) -> float:
    return k[0] * ckpt + k[1] * tensors + touch_seconds(probe, ckpt)


def _overlap(cold: pd.DataFrame, build: pd.Series, k: tuple[float, float], par: float, here):
    """O from the largest cold checkpoint here (None without cold runs or a disk figure)."""
    if cold.empty or not here.cold_read_bytes_per_s:
        return None
    big = _medians(cold, build).sort_values("ckpt").iloc[-1]
    cpu_wall = cpu_seconds(k, big["ckpt"], big["tensors"], here) / par
    disk = big["ckpt"] / here.cold_read_bytes_per_s
    shortest = min(cpu_wall, disk)
    if shortest <= 0:
        return None
    return float(np.clip((cpu_wall + disk - big["wall"]) / shortest, 0.0, 1.0))


def fit_time(strategy: str, rows: pd.DataFrame, here: ProbeRecord, build: pd.Series) -> TimeModel:
    """The time model of one strategy's unlimited runs (warm rows for CPU; cold for overlap);
    `build` is `build_cpu` of the results."""
    warm, cold = rows[rows["cache"] == WARM], rows[rows["cache"] == COLD]
    medians = _medians(warm if not warm.empty else cold, build)
    k = _fit_cpu(medians, here)
    big = medians.sort_values("ckpt").iloc[-1]
    par = float(np.clip(big["cpu"] / big["wall"], 0.05, float(here.effective_cpus)))
    return TimeModel(
        strategy=strategy,
        cpu_s_per_byte=k[0],
        cpu_s_per_tensor=k[1],
        parallelism=par,
        overlap=_overlap(cold, build, k, par, here),
        runs=len(rows),
        shapes=tuple(sorted(set(rows["shapes"]))),
    )
