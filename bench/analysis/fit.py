"""The fit of one strategy's measured runs: `FitModel`, by non-negative least squares.

    peak - baseline ~= a * checkpoint_bytes + b * largest_tensor_bytes + e + h * small_tensor_bytes
    wall            ~= c * checkpoint_bytes + d

fitted on each checkpoint's median peak and time over its repeats (one slow cold read among them
does not tilt the fit), with as many terms as distinct checkpoint sizes allow (one size: a only;
two: a and e; three or more: a, b and e). The constant e absorbs per-process overhead (compiled
code, allocator arenas) that dominates tiny shape sets and would otherwise inflate a.

h is fitted first, on its own measurement: the free bytes the load left in glibc's heaps
(`heap_retained_bytes`) per byte of tensors under its mmap threshold (`small_tensor_bytes`,
`bench.machine.allocator`), through the origin. Only those tensors can stay in the heap, and their
share of a checkpoint's bytes differs (gpt2 72%, sa3 70%, sa3-medium 31%), so a per-checkpoint-byte
term fitted on two sizes would charge a checkpoint of large tensors for holes it does not leave.
a, b and e are then fitted on what remains. h is 0 where a measured shape set lacks either
figure (older files, no glibc), where the target's small bytes are unknown, and under
`MIN_HEAP_TERM` (a strategy reading into its own mappings keeps next to nothing there). No jax.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.intervals import interval


@dataclass(frozen=True)
class FitModel:
    """One strategy's fitted model: peak over baseline ~= a*ckpt + b*largest + e and
    wall ~= c*ckpt + d, what it was fitted on, and how well. `disk_read_bytes_per_s` is set where
    the predicted time adds a read of the checkpoint at that speed to a warm fit (`recommend
    --disk-read-speed`)."""

    peak_bytes_per_checkpoint_byte: float  # a
    peak_bytes_per_largest_tensor_byte: float  # b
    peak_constant_bytes: float  # e
    wall_s_per_checkpoint_byte: float  # c
    wall_constant_s: float  # d
    baseline_rss_bytes: int
    runs: int
    shapes: tuple[str, ...]
    devices: tuple[int, ...]
    largest_measured_checkpoint_bytes: int
    extrapolation: float  # the target's checkpoint over the largest measured one
    peak_error: float  # in-sample, relative (a floor on the error, not evidence of it)
    wall_error: float
    wall_repeat_spread: float
    disk_read_bytes_per_s: float | None = None
    # leave one shape set out: the largest relative error predicting each measured shape set from
    # the others (None: fewer than MIN_OUT_OF_SAMPLE shape sets, so there is no such evidence)
    peak_error_out_of_sample: float | None = None
    wall_error_out_of_sample: float | None = None
    most_repeats: int = 1  # the most repeats of one shape set (1: no spread was measured)
    # h: glibc's retained heap (bench.machine.allocator)
    peak_bytes_per_small_tensor_byte: float = 0.0
    wall_repeat_typical_spread: float = 0.0  # a typical repeat's deviation
    # the 95% interval of the time on the largest measured shape set, relative to its estimate
    # (its paired ratios where the rows carry them, else its walls; `bench.intervals`):
    # what a prediction's interval is widened by (`bench.analysis.judge`). 1.0 and 1 repeat: none.
    wall_interval_low: float = 1.0
    wall_interval_high: float = 1.0
    wall_interval_repeats: int = 1

    def peak_over_baseline(self, ckpt: float, largest: float, small: float) -> float:
        """The predicted peak over the baseline of a checkpoint of these sizes."""
        a, b = self.peak_bytes_per_checkpoint_byte, self.peak_bytes_per_largest_tensor_byte
        coef = (a, b, self.peak_constant_bytes, self.peak_bytes_per_small_tensor_byte)
        return float(_peak_over(coef, ckpt, largest, small))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `recommend --json` prints under `model` (lists, no unset read speed)."""
        out = asdict(self)
        out["shapes"], out["devices"] = list(self.shapes), list(self.devices)
        if self.disk_read_bytes_per_s is None:
            del out["disk_read_bytes_per_s"]
        return out


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


#: A heap that kept less than this per small byte is left to the other terms (pipelined and
#: zerocopy read into their own mappings: their heaps keep ~0.01%, noise beside the model).
MIN_HEAP_TERM = 0.01


def _heap_term(medians: pd.DataFrame) -> float:
    """h: retained heap bytes per small-tensor byte, through the origin (0: not measured, or
    under MIN_HEAP_TERM)."""
    small, kept = medians["small"], medians["retained"]
    if small.isna().any() or kept.isna().any() or not (small > 0).any():
        return 0.0
    h = _nnls([small.to_numpy(float)], kept.to_numpy(float))[0]
    return h if h >= MIN_HEAP_TERM else 0.0


def _fit_peaks(medians: pd.DataFrame, heap: bool) -> tuple[float, float, float, float]:
    """(a, b, e, h) on `medians`: h first (with `heap`), then a, b, e on the rest of the peak."""
    h = _heap_term(medians) if heap else 0.0
    rest = medians["over"].to_numpy(float) - h * medians["small"].fillna(0).to_numpy(float)
    a, b, e = _fit_peak(medians["ckpt"].to_numpy(float), medians["largest"].to_numpy(float), rest)
    return a, b, e, h


def _peak_over(coef: tuple[float, float, float, float], ckpt: Any, largest: Any, small: Any) -> Any:
    """a*ckpt + b*largest + e + h*small, for numbers or arrays."""
    a, b, e, h = coef
    return a * ckpt + b * largest + e + h * small


def _predicted_over(medians: pd.DataFrame, coef: tuple[float, float, float, float]) -> np.ndarray:
    columns = (medians[c].fillna(0).to_numpy(float) for c in ("ckpt", "largest", "small"))
    return _peak_over(coef, *columns)


def _fit_wall(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(c, d): wall ~= c*ckpt + d (c only with one checkpoint size)."""
    if len(set(x)) >= 2:
        c, d = _nnls([x, np.ones_like(x)], y)
        return c, d
    return _nnls([x], y)[0], 0.0


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
            "small": _column(rows, "small_tensor_bytes"),
            "retained": _column(rows, "heap_retained_bytes"),
        }
    )
    columns = ["over", "wall", "small", "retained"]
    return frame.groupby(["ckpt", "largest"], as_index=False)[columns].median()


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, NaN where absent (files older than the field)."""
    if name not in rows:
        return pd.Series(np.nan, index=rows.index)
    return pd.to_numeric(rows[name]).astype(float)


MIN_OUT_OF_SAMPLE = 3  # shape sets needed to leave one out and still fit on two


def out_of_sample(medians: pd.DataFrame, heap: bool = True) -> tuple[float | None, float | None]:
    """Leave one shape set out: fit on the others, predict it; the largest relative error of the
    peak and of the time (None, None with fewer than MIN_OUT_OF_SAMPLE shape sets)."""
    if len(medians) < MIN_OUT_OF_SAMPLE:
        return None, None
    peak, wall = [], []
    for i in range(len(medians)):
        rest, one = medians.drop(index=medians.index[i]), medians.iloc[[i]]
        c, d = _fit_wall(rest["ckpt"].to_numpy(float), rest["wall"].to_numpy(float))
        over, time = float(one["over"].iloc[0]), float(one["wall"].iloc[0])
        if over > 0:
            predicted = _predicted_over(one, _fit_peaks(rest, heap))[0]
            peak.append(abs(predicted - over) / over)
        if time > 0:
            wall.append(abs(c * float(one["ckpt"].iloc[0]) + d - time) / time)
    return (max(peak) if peak else None), (max(wall) if wall else None)


def fit(rows: pd.DataFrame, target_checkpoint_bytes: int, heap: bool = True) -> FitModel:
    """The model of one strategy's runs, for a target checkpoint of that many bytes (`heap`:
    with the allocator's term, for a target whose small-tensor bytes are known)."""
    medians = shape_medians(rows)
    x1 = medians["ckpt"].to_numpy(float)
    over, wall = medians["over"].to_numpy(float), medians["wall"].to_numpy(float)
    a, b, e, h = _fit_peaks(medians, heap)
    c, d = _fit_wall(x1, wall)
    peak_out, wall_out = out_of_sample(medians, heap)
    return FitModel(
        peak_bytes_per_checkpoint_byte=a,
        peak_bytes_per_largest_tensor_byte=b,
        peak_constant_bytes=e,
        wall_s_per_checkpoint_byte=c,
        wall_constant_s=d,
        baseline_rss_bytes=int(float(pd.to_numeric(rows["baseline_rss_bytes"]).median())),
        runs=len(rows),
        shapes=tuple(sorted(set(rows["shapes"]))),
        devices=tuple(sorted(int(n) for n in set(rows["devices"]))),
        largest_measured_checkpoint_bytes=int(x1.max()),
        extrapolation=target_checkpoint_bytes / float(x1.max()),
        peak_error=_rel_error(_predicted_over(medians, (a, b, e, h)), over),
        wall_error=_rel_error(c * x1 + d, wall),
        wall_repeat_spread=repeat_spread(rows),
        peak_error_out_of_sample=peak_out,
        wall_error_out_of_sample=wall_out,
        most_repeats=int(rows.groupby("shapes").size().max()),
        peak_bytes_per_small_tensor_byte=h,
        wall_repeat_typical_spread=typical_repeat_spread(rows),
        **relative_interval(rows),
    )


def relative_interval(rows: pd.DataFrame) -> dict[str, Any]:
    """The time's 95% interval on the largest measured checkpoint, relative to its estimate: its
    repeats' paired ratios where every one carries a reference, else their walls."""
    ckpt = pd.to_numeric(rows["checkpoint_bytes"])
    largest = rows[ckpt == ckpt.max()]
    paired = _column(largest, "paired_ratio")
    values = paired if paired.notna().all() else pd.to_numeric(largest["wall_s"])
    iv = interval(values.dropna().tolist())
    if iv is None or iv.n < 2:
        return {}
    return {
        "wall_interval_low": iv.low / iv.estimate,
        "wall_interval_high": iv.high / iv.estimate,
        "wall_interval_repeats": iv.n,
    }


def _rel_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """The fit's largest relative error on the medians it was fitted on (in-sample: a floor on the
    error of an extrapolation, not a bound). Peaks are compared over the baseline."""
    ok = measured > 0
    return float(np.max(np.abs(predicted[ok] - measured[ok]) / measured[ok])) if ok.any() else 0.0


def _deviations(rows: pd.DataFrame) -> pd.Series:
    """Each run's relative deviation from its shape set's median time."""
    wall = pd.to_numeric(rows["wall_s"])
    median = wall.groupby(rows["shapes"]).transform("median")
    return ((wall - median).abs() / median)[median > 0]


def repeat_spread(rows: pd.DataFrame) -> float:
    """How far the fitted runs' own repeats strayed from their shape set's median time (the largest
    relative deviation): a prediction cannot be closer than this machine repeats itself. Cold
    runs on a virtual disk whose host caches the image can differ several-fold."""
    deviation = _deviations(rows)
    return float(deviation.max()) if len(deviation) else 0.0


def typical_repeat_spread(rows: pd.DataFrame) -> float:
    """How far a typical repeat strayed: per shape set the median relative deviation from its median
    time, the largest over shape sets. One outlying run of three does not move it (it moves
    `repeat_spread`), so it says how close two strategies' times can be told apart."""
    deviation = _deviations(rows)
    if not len(deviation):
        return 0.0
    return float(deviation.groupby(rows.loc[deviation.index, "shapes"]).median().max())
