"""Which strategy to use on a host you do not have: fit measured runs, predict, rank.

Per strategy, over its ok runs (every shape set measured, this machine or any):

    peak - baseline ~= a * checkpoint_bytes + b * largest_tensor_bytes + e
    wall            ~= c * checkpoint_bytes + d

fitted by non-negative least squares on each checkpoint's median peak and time over its repeats
(one slow cold read among them does not tilt the fit), with as many terms as distinct checkpoint
sizes allow (one size: a only; two: a and e; three or more: a, b and e). The constant e absorbs
per-process overhead (compiled code, allocator arenas) that dominates tiny shape sets and would
otherwise inflate a.

Each prediction carries the fitted model under `model`, with named fields: a is
`peak_bytes_per_checkpoint_byte`, b `peak_bytes_per_largest_tensor_byte`, e `peak_constant_bytes`,
c `wall_s_per_checkpoint_byte`, d `wall_constant_s`, plus `baseline_rss_bytes`, the `runs`, `shapes`
and `devices` it was fitted on, `largest_measured_checkpoint_bytes`, `extrapolation` (the
target's checkpoint over that largest one), the fit's in-sample `peak_error` and `wall_error`, and
`wall_repeat_spread` (how far the fitted runs' repeats strayed from their median time).

The predicted peak on the target is the strategy's median baseline plus that; the verdict compares
it with the host's RAM: "fits", "tight" (less than 10% of the RAM to spare) or "does not fit". The
recommendation is the fastest strategy that fits. Rows of kind `reference` (the `floor` line) load no
model and are never recommended. One implementation for the CLI and the dashboard; no jax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import NoResultsError
from bench.records.results import Results, headline
from bench.units import format_bytes
from loader.vocabulary import OK, REFERENCE, TOTAL

TIGHT_FRACTION = 0.10
FITS, TIGHT, DOES_NOT_FIT = "fits", "tight", "does not fit"
VERDICTS = (FITS, TIGHT, DOES_NOT_FIT)  # best first
#: Runs on smaller checkpoints are not extrapolated from: their peak is mostly fixed per-process
#: overhead (tiny-gpt2's 0.4 MB loads show 4x-160x "the checkpoint"), which says nothing of slope.
MIN_FIT_BYTES = 64 << 20


@dataclass
class Recommendation:
    """`recommended`: the fastest strategy that fits, or None; `strategies`: one dict each;
    `unmeasured`: strategies measured only on checkpoints too small to extrapolate from."""

    recommended: str | None
    strategies: list[dict[str, Any]] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommended": self.recommended,
            "strategies": self.strategies,
            "unmeasured": self.unmeasured,
        }


def _nnls(columns: list[np.ndarray], y: np.ndarray) -> list[float]:
    """Non-negative least squares on scaled columns (sizes span 1e5..1e10 bytes)."""
    from scipy.optimize import nnls

    scale = [float(np.abs(c).max()) or 1.0 for c in columns]
    coef, _ = nnls(np.column_stack([c / s for c, s in zip(columns, scale, strict=True)]), y)
    return [float(k / s) for k, s in zip(coef, scale, strict=True)]


def _fit_peak(x1: np.ndarray, x2: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(a, b, e): peak over baseline ~= a*ckpt + b*largest + e, as many terms as the data allow.

    One checkpoint size: a only. Two: a and a constant e (per-process overhead such as compiled
    code, which dominates tiny shape sets). Three or more: a, b and e.
    """
    sizes = len({(p, q) for p, q in zip(x1, x2, strict=True)})
    if sizes >= 3:
        return tuple(_nnls([x1, x2, np.ones_like(x1)], y))  # type: ignore[return-value]
    if sizes == 2:
        a, e = _nnls([x1, np.ones_like(x1)], y)
        return a, 0.0, e
    return _nnls([x1], y)[0], 0.0, 0.0


def _fit_wall(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(c, d): wall ~= c*ckpt + d (c only with one checkpoint size)."""
    if len(set(x)) >= 2:
        c, d = _nnls([x, np.ones_like(x)], y)
        return c, d
    return _nnls([x], y)[0], 0.0


def ok_runs(
    results: Results,
    devices: int | None = None,
    cache: str | None = None,
    disk_speed: int | None = None,
) -> pd.DataFrame:
    """The ok whole-run rows the model is fitted on: per strategy, its runs on `devices` devices
    where it has any, else all its runs (a multi-process strategy needs a device per process);
    only runs from a `cache` ("warm" or "cold") page cache when given. Runs under a memory limit
    (`--host-ram`) are left out: a cgroup's reclaim changes the peak and time they measure; so are
    runs whose model was built in another dtype than the file's (`--model-dtype`): the prediction
    is for a checkpoint loaded in its own dtype; and so are `--model port|transposed` runs. Runs
    whose disk reads were capped (`bench run --disk-read-speed`) are taken only when `disk_speed`
    asks for exactly that cap, and then alone."""
    rows = headline(results.phases)
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK)]
    rows = rows[rows["host_ram_bytes"].isna()]
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
    if devices is None or rows.empty:
        return rows
    on_target = rows["devices"] == devices
    has_target = on_target.groupby(rows["strategy"]).transform("any")
    return rows[on_target | ~has_target]


def shape_medians(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per measured checkpoint: the median peak over baseline and the median wall of its
    repeats (the bench's figure is a median; one slow cold read must not tilt the fit)."""
    over = pd.to_numeric(rows["peak_rss_bytes"]) - pd.to_numeric(rows["baseline_rss_bytes"])
    frame = pd.DataFrame(
        {
            "ckpt": pd.to_numeric(rows["checkpoint_bytes"]),
            "largest": pd.to_numeric(rows["largest_tensor_bytes"]),
            "over": over,
            "wall": pd.to_numeric(rows["wall_s"]),
        }
    )
    return frame.groupby(["ckpt", "largest"], as_index=False)[["over", "wall"]].median()


def _predict(rows: pd.DataFrame, target: dict[str, int]) -> dict[str, Any]:
    medians = shape_medians(rows)
    x1, x2 = medians["ckpt"].to_numpy(float), medians["largest"].to_numpy(float)
    over, wall = medians["over"].to_numpy(float), medians["wall"].to_numpy(float)
    a, b, e = _fit_peak(x1, x2, over)
    c, d = _fit_wall(x1, wall)
    baseline = float(pd.to_numeric(rows["baseline_rss_bytes"]).median())
    ckpt, largest = target["checkpoint_bytes"], target["largest_tensor_bytes"]
    return {
        "predicted_peak_bytes": int(baseline + a * ckpt + b * largest + e),
        "predicted_wall_s": c * ckpt + d,
        "model": {
            "peak_bytes_per_checkpoint_byte": a,
            "peak_bytes_per_largest_tensor_byte": b,
            "peak_constant_bytes": e,
            "wall_s_per_checkpoint_byte": c,
            "wall_constant_s": d,
            "baseline_rss_bytes": int(baseline),
            "runs": len(rows),
            "shapes": sorted(set(rows["shapes"])),
            "devices": sorted(int(n) for n in set(rows["devices"])),
            "largest_measured_checkpoint_bytes": int(x1.max()),
            "extrapolation": ckpt / float(x1.max()),
            "peak_error": _rel_error(a * x1 + b * x2 + e, over),
            "wall_error": _rel_error(c * x1 + d, wall),
            "wall_repeat_spread": repeat_spread(rows),
        },
    }


def _rel_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """The fit's largest relative error on the medians it was fitted on (in-sample: a floor on the
    error of an extrapolation, not a bound). Peaks are compared over the baseline."""
    ok = measured > 0
    return float(np.max(np.abs(predicted[ok] - measured[ok]) / measured[ok])) if ok.any() else 0.0


def repeat_spread(rows: pd.DataFrame) -> float:
    """How far the fitted runs' own repeats strayed from their shape set's median time (the largest
    relative deviation): a prediction cannot be closer than this machine repeats itself. Cold
    runs on a virtual disk whose host caches the image can differ several-fold."""
    wall = pd.to_numeric(rows["wall_s"])
    median = wall.groupby(rows["shapes"]).transform("median")
    deviation = ((wall - median).abs() / median)[median > 0]
    return float(deviation.max()) if len(deviation) else 0.0


def verdict(peak: int, host_ram: int) -> str:
    """`fits`, `tight` (under 10% of `host_ram` to spare) or `does not fit`, for a peak RSS."""
    headroom = host_ram - peak
    if headroom < 0:
        return DOES_NOT_FIT
    return TIGHT if headroom < TIGHT_FRACTION * host_ram else FITS


def _predict_each(rows: pd.DataFrame, target: dict[str, int], host_ram: int) -> tuple[list, list]:
    """(one prediction per strategy measured large enough, the strategies that were not)."""
    out, unmeasured = [], []
    for strategy, group in rows.groupby("strategy"):
        group = group[pd.to_numeric(group["checkpoint_bytes"]) >= MIN_FIT_BYTES]
        if group.empty:
            unmeasured.append(str(strategy))
            continue
        pred = _predict(group, target)
        outcome = verdict(pred["predicted_peak_bytes"], host_ram)
        headroom = host_ram - pred["predicted_peak_bytes"]
        out.append({"strategy": strategy, **pred, "verdict": outcome, "headroom_bytes": headroom})
    return out, unmeasured


def recommend(
    results: Results,
    spec_summary: dict[str, int],
    host_ram_bytes: int,
    devices: int | None = None,
    cache: str | None = "warm",
    disk_speed: int | None = None,
) -> Recommendation:
    """Predict each measured strategy's peak and time on the target and pick the fastest that fits.

    Args:
        results: measured runs (`read_results`).
        spec_summary: the target checkpoint: checkpoint_bytes, largest_tensor_bytes, tensors.
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
    out, unmeasured = _predict_each(rows, spec_summary, host_ram_bytes)
    out.sort(key=lambda s: (VERDICTS.index(s["verdict"]), s["predicted_wall_s"]))
    if not out:
        raise NoResultsError(
            f"only checkpoints under {format_bytes(MIN_FIT_BYTES)} were measured; their peaks are "
            "per-process overhead. Run `make bench SHAPES=gpt2` (548 MB) or larger first"
        )
    best = next((s["strategy"] for s in out if s["verdict"] == FITS), None)
    return Recommendation(best, out, sorted(unmeasured))


def spec_summary(name: str) -> dict[str, int]:
    """checkpoint_bytes, largest_tensor_bytes, tensors of a preset, fetched name, path or repo id."""
    import shapes

    try:
        spec = shapes.load_spec(name)
    except shapes.UnknownSpecError:
        if name.count("/") != 1:
            raise
        spec = shapes.fetch_spec(name)
    sizes = [t.nbytes for t in spec.tensors]
    return {
        "checkpoint_bytes": sum(sizes),
        "largest_tensor_bytes": max(sizes, default=0),
        "tensors": len(sizes),
    }
