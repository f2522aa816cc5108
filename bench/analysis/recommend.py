"""Which strategy to use on a host you do not have: fit measured runs, predict, rank.

Per strategy, over its ok runs (every shape set measured, this machine or any), a model is fitted
(`bench.analysis.fit`):

    peak - baseline ~= a * checkpoint_bytes + b * largest_tensor_bytes + e + h * small_tensor_bytes
    wall            ~= c * checkpoint_bytes + d

(h: the allocator's retained heap per byte of tensors under its mmap threshold, where the rows
measured it and the target's small_tensor_bytes is known; else 0.) Each prediction
(`StrategyPrediction`) carries that fitted model (`FitModel`) under `model`, with named fields:
a is `peak_bytes_per_checkpoint_byte`, b `peak_bytes_per_largest_tensor_byte`, e
`peak_constant_bytes`, h `peak_bytes_per_small_tensor_byte`, c `wall_s_per_checkpoint_byte`, d
`wall_constant_s`, plus
`baseline_rss_bytes`, the `runs`, `shapes` and `devices` it was fitted on,
`largest_measured_checkpoint_bytes`, `extrapolation` (the target's checkpoint over that largest
one), the fit's in-sample `peak_error` and `wall_error`, `wall_repeat_spread` (how far the
fitted runs' repeats strayed from their median time, at worst) and `wall_repeat_typical_spread`
(how far a typical repeat strayed: how far apart two times must be to be told apart).

The predicted peak on the target is the strategy's median baseline plus that; the verdict compares
it with the host's RAM: "fits", "tight" (less than 10% of the RAM to spare) or "does not fit". The
recommendation is the judge's pick (`bench.analysis.judge`): the fastest strategy that fits, and
among those too close to call on time with it, the lightest. `bench.analysis.accelerator`
replaces peaks and verdicts for a host whose weights land in device memory (`--accelerator`).
Rows of kind `reference` (the `floor` line) load no model and are never recommended. One
implementation for the CLI and the dashboard; no jax.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from bench.analysis.fit import fit
from bench.analysis.judge import TIGHT_FRACTION, TargetHost, judge_predictions, verdict
from bench.analysis.predictions import (  # the types live there; callers may import them here
    DevicePrediction,
    Recommendation,
    StrategyPrediction,
    TargetCheckpoint,
)
from bench.errors import NoResultsError
from bench.link import FILE_SOURCE
from bench.machine.allocator import small_tensor_bytes
from bench.records.results import Results, headline
from bench.units import format_bytes
from bench.vocabulary import (  # the verdicts: the dashboard reads them here
    COLD,
    DOES_NOT_FIT,
    FITS,
    OK,
    TIGHT,
    VERDICTS,
    WARM,
)
from loader.vocabulary import REFERENCE, TOTAL

#: Runs on smaller checkpoints are not extrapolated from: their peak is mostly fixed per-process
#: overhead (tiny-gpt2's 0.4 MB loads show 4x-160x "the checkpoint"), which says nothing of slope.
MIN_FIT_BYTES = 64 << 20


__all__ = [
    "DOES_NOT_FIT",
    "FITS",
    "TIGHT",
    "TIGHT_FRACTION",
    "DevicePrediction",
    "Recommendation",
    "StrategyPrediction",
    "TargetCheckpoint",
    "recommend",
    "rank",
    "verdict",
]


def rank(predictions: list[StrategyPrediction], unmeasured: list[str]) -> Recommendation:
    """The recommended first (`bench.analysis.judge`'s pick over those that fit: the fastest,
    and among ties on time the lightest), then fits first, then faster."""
    ordered = sorted(predictions, key=lambda s: (VERDICTS.index(s.verdict), s.predicted_wall_s))
    chosen = judge_predictions(ordered, TargetHost(None)).pick
    best = next((s for s in ordered if s.strategy == chosen), None)
    if best is not None:
        ordered = [best, *(s for s in ordered if s is not best)]
    return Recommendation(best.strategy if best else None, ordered, sorted(unmeasured))


def ok_runs(
    results: Results,
    devices: int | None = None,
    cache: str | None = None,
    disk_speed: int | None = None,
    staged: bool | None = False,
) -> pd.DataFrame:
    """The ok whole-run rows the model is fitted on: per strategy, its runs on `devices` devices
    where it has any, else all its runs (a multi-process strategy needs a device per process);
    only runs from a `cache` ("warm" or "cold") page cache when given. Runs under a memory limit
    (`--host-ram`) are left out: a cgroup's reclaim changes the peak and time they measure; so are
    runs whose model was built in another dtype than the file's (`--model-dtype`): the prediction
    is for a checkpoint loaded in its own dtype; and so are `--model port|transposed` runs and
    remote loads (`--source`: `bench.analysis.remote` predicts over a link). Runs
    whose disk reads were capped (`bench run --disk-read-speed`) are taken only when `disk_speed`
    asks for exactly that cap, and then alone. Staged runs (`bench run --staging`: a ring of host
    buffers forced on the CPU backend, `staging_memory` set) are left out by default, as a CPU host
    never stages; `staged=True` takes only them (`bench.analysis.accelerator`), None both."""
    rows = headline(results.phases)
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK)]
    rows = rows[rows["host_ram_bytes"].isna()]
    if "source" in rows:  # a remote load's time is its link's: `bench.analysis.remote` answers it
        rows = rows[rows["source"].fillna(FILE_SOURCE) == FILE_SOURCE]
    if "cpus" in rows:  # a CPU limit (`--cpus`) changes the time: another host's runs
        rows = rows[rows["cpus"].isna()]
    if "model_dtype" in rows:
        rows = rows[rows["model_dtype"].isna()]
    if "model" in rows:  # a port's transforms and a compile are not the plain load predicted
        rows = rows[rows["model"].fillna("spec") == "spec"]
    if cache is not None:
        rows = rows[rows["cache"] == cache]
    capped = rows["disk_read_bytes_per_s"] if "disk_read_bytes_per_s" in rows else None
    if capped is not None:
        rows = rows[capped == disk_speed] if disk_speed else rows[capped.isna()]
    rows = rows[pd.to_numeric(rows["checkpoint_bytes"]) > 0]
    if staged is not None and "staging_memory" in rows:
        rows = rows[rows["staging_memory"].notna() == staged]
    if devices is None or rows.empty:
        return rows
    on_target = rows["devices"] == devices
    has_target = on_target.groupby(rows["strategy"]).transform("any")
    return rows[on_target | ~has_target]


def _predict(
    strategy: str, rows: pd.DataFrame, target: TargetCheckpoint, host_ram: int
) -> StrategyPrediction:
    """One strategy's fit, its prediction on `target` and its verdict on a host of `host_ram`."""
    m = fit(rows, target.checkpoint_bytes, heap=target.small_tensor_bytes is not None)
    peak = int(
        float(pd.to_numeric(rows["baseline_rss_bytes"]).median())
        + m.peak_over_baseline(
            target.checkpoint_bytes, target.largest_tensor_bytes, target.small_tensor_bytes or 0
        )
    )
    return StrategyPrediction(
        strategy=strategy,
        predicted_peak_bytes=peak,
        predicted_wall_s=m.wall_s_per_checkpoint_byte * target.checkpoint_bytes + m.wall_constant_s,
        model=m,
        verdict=verdict(peak, host_ram),
        headroom_bytes=host_ram - peak,
    )


def _predict_each(
    rows: pd.DataFrame, target: TargetCheckpoint, host_ram: int
) -> tuple[list[StrategyPrediction], list[str]]:
    """(one prediction per strategy measured large enough, the strategies that were not)."""
    out: list[StrategyPrediction] = []
    unmeasured: list[str] = []
    for strategy, group in rows.groupby("strategy"):
        group = group[pd.to_numeric(group["checkpoint_bytes"]) >= MIN_FIT_BYTES]
        if group.empty:
            unmeasured.append(str(strategy))
            continue
        out.append(_predict(str(strategy), group, target, host_ram))
    return out, unmeasured


def recommend(
    results: Results,
    target: TargetCheckpoint,
    host_ram_bytes: int,
    devices: int | None = None,
    cache: str | None = WARM,
    disk_speed: int | None = None,
) -> Recommendation:
    """Predict each measured strategy's peak and time on the target and pick the fastest that fits.

    Args:
        results: measured runs (`read_results`).
        target: the checkpoint to predict for (`spec_summary`).
        host_ram_bytes: the target host's RAM.
        devices: prefer runs measured with this many devices, where there are any.
        cache: fit on runs from a "warm" (default) or "cold" page cache; None: every run.
        disk_speed: fit on runs measured with disk reads capped at this many bytes/s (`bench run
            --disk-read-speed`); None: on uncapped runs only.

    Raises:
        NoResultsError: no ok runs of any model strategy to fit.
    """
    rows = ok_runs(results, devices, cache, disk_speed)
    rows = rows[rows["kind"] != REFERENCE]
    if rows.empty:
        raise NoResultsError(f"no measured {cache or ''} runs to fit")
    out, unmeasured = _predict_each(rows, target, host_ram_bytes)
    if not out:
        raise NoResultsError(
            f"only checkpoints under {format_bytes(MIN_FIT_BYTES)} were measured; their peaks are "
            "per-process overhead. Run `make bench SHAPES=gpt2` (548 MB) or larger first"
        )
    return rank(out, unmeasured)


def spec_summary(name: str) -> TargetCheckpoint:
    """The sizes of a preset, fetched name, spec path or HF repo id, as a prediction's target."""
    import shapes

    try:
        spec = shapes.load_spec(name)
    except shapes.UnknownSpecError:
        if name.count("/") != 1:
            raise
        spec = shapes.fetch_spec(name)
    sizes = [t.nbytes for t in spec.tensors]
    return TargetCheckpoint(
        checkpoint_bytes=sum(sizes),
        largest_tensor_bytes=max(sizes, default=0),
        tensors=len(sizes),
        small_tensor_bytes=small_tensor_bytes(sizes),
    )


def cold_adjust(rec: Recommendation, ckpt: int, speed: float) -> Recommendation:
    """`rec` with cold times for a disk of `speed` bytes/s: warm time + checkpoint / speed."""
    cold = [
        replace(
            s,
            predicted_wall_s=s.predicted_wall_s + ckpt / speed,
            model=replace(s.model, disk_read_bytes_per_s=speed),
        )
        for s in rec.strategies
    ]
    return rank(cold, rec.unmeasured)


def measured_cold_speed(results: Results) -> float | None:
    """This machine's cold read speed: checkpoint bytes / median cold wall of the reference line
    (`floor` reads every byte and loads nothing), on the largest checkpoint it read cold."""
    cold = ok_runs(results, cache=COLD)
    cold = cold[cold["kind"] == REFERENCE]
    if cold.empty:
        return None
    biggest = cold[cold["checkpoint_bytes"] == cold["checkpoint_bytes"].max()]
    wall = pd.to_numeric(biggest["wall_s"]).median()
    return float(biggest["checkpoint_bytes"].iloc[0]) / wall if wall > 0 else None


def device_peaks(results: Results, ckpt: int) -> dict[str, int] | None:
    """Predicted device peak per strategy (median device-peak / checkpoint ratio); None: no data."""
    phases = results.phases
    rows = phases[(phases["phase"] == TOTAL) & (phases["status"] == OK)]
    rows = rows[rows["phase_device_peak_bytes"].notna()]
    if rows.empty:
        return None
    ratio = pd.to_numeric(rows["phase_device_peak_bytes"]) / pd.to_numeric(rows["checkpoint_bytes"])
    return {str(k): int(v * ckpt) for k, v in ratio.groupby(rows["strategy"]).median().items()}
