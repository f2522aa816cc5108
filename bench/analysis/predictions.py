"""What `recommend` predicts, as types: the target checkpoint, each strategy's prediction (its
peak, time, verdict and fitted model), and the recommendation.

A prediction meets the one judge (`bench.analysis.judge.prediction_candidate`) with its seconds
and the 95% interval its fit measured on its largest shape set, relative to that estimate
(`FitModel.wall_interval_low`, `_high`); the judge's pick is `Recommendation.recommended`. No jax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.analysis.fit import FitModel


@dataclass(frozen=True)
class TargetCheckpoint:
    """The checkpoint a prediction is for: its bytes, its largest tensor's bytes, its tensors,
    and the bytes of its tensors under glibc's mmap threshold (`bench.machine.allocator`; None:
    unknown, and the peak is fitted without the allocator's term)."""

    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int
    small_tensor_bytes: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        """The JSON object `recommend --json` prints under `target`."""
        return asdict(self)

    @classmethod
    def from_dict(cls, sizes: Mapping[str, Any]) -> TargetCheckpoint:
        """From `to_dict`'s keys (the dashboard's own summaries; small_tensor_bytes optional)."""
        small = sizes.get("small_tensor_bytes")
        return cls(
            int(sizes["checkpoint_bytes"]),
            int(sizes["largest_tensor_bytes"]),
            int(sizes["tensors"]),
            None if small is None else int(small),
        )


@dataclass(frozen=True)
class DevicePrediction:
    """A strategy on a host whose weights land in device memory (`recommend --accelerator`).

    `host_basis` says where the host peak came from: "staged ring" (the staged path's measured
    ring high-water mark over its baseline, `ring_bytes`) or "CPU runs" (a strategy without a
    staged path reads the model into host RAM first: its CPU peak). `device_basis`: "measured on
    a device" or "predicted" (the model's bytes plus its largest tensor as the transient).
    `device_verdict` is None where no device RAM was given.
    """

    host_basis: str
    ring_bytes: int | None
    ring_measured_bytes: int | None
    budget_bytes: int | None
    host_verdict: str
    device_peak_bytes: int
    device_basis: str
    device_verdict: str | None
    measured_on_device: bool


@dataclass(frozen=True)
class StrategyPrediction:
    """One strategy's predicted peak and time on the target, its verdict, and its fitted model;
    `device` under `--accelerator` (then the peak is the host's and the verdict the worse of the
    host's and the device's)."""

    strategy: str
    predicted_peak_bytes: int
    predicted_wall_s: float
    model: FitModel
    verdict: str  # one of VERDICTS
    headroom_bytes: int  # the host's RAM less the predicted peak
    device: DevicePrediction | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `recommend --json` prints per strategy (`device` only with one)."""
        out = {**asdict(self), "model": self.model.to_dict()}
        if self.device is None:
            del out["device"]
        return out


@dataclass(frozen=True)
class Recommendation:
    """`recommended`: the fastest strategy that fits (the lightest among ties), or None;
    `strategies`: one prediction each, the recommended first, then fits first, then faster;
    `unmeasured`: strategies measured only on checkpoints too small to
    extrapolate from."""

    recommended: str | None
    strategies: list[StrategyPrediction] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)
