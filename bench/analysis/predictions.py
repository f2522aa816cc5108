"""What `recommend` predicts, as types: the target checkpoint, each strategy's prediction (its
peak, time, verdict and fitted model), and the recommendation.

`StrategyPrediction.candidate` is how a prediction meets the one tie rule
(`bench.analysis.verdicts`): its seconds with the 95% interval its fit measured on its largest
shape set, relative to that estimate (`FitModel.wall_interval_low`, `_high`); a fit with one run
per shape set has no interval, so it ties with every other. `choice` is the rule's pick among the
predictions that fit, and `Recommendation.to_dict` carries it (`choice`, `ties`). No jax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.analysis.fit import FitModel
from bench.analysis.verdicts import SECONDS, Candidate, Choice, choose
from bench.intervals import Interval
from bench.vocabulary import FITS


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

    def candidate(self) -> Candidate:
        """The prediction as the tie rule sees it: its seconds with its fit's relative
        interval."""
        m, wall = self.model, self.predicted_wall_s
        time = Interval(
            wall, wall * m.wall_interval_low, wall * m.wall_interval_high, m.wall_interval_repeats
        )
        return Candidate(self.strategy, wall, time, float(self.predicted_peak_bytes), unit=SECONDS)


@dataclass(frozen=True)
class Recommendation:
    """`recommended`: the fastest strategy that fits (the lightest among ties), or None;
    `strategies`: one prediction each, the recommended first, then fits first, then faster;
    `unmeasured`: strategies measured only on checkpoints too small to
    extrapolate from."""

    recommended: str | None
    strategies: list[StrategyPrediction] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """`recommend --json`'s body: the recommended strategy, the rule's `choice` (its
        sentence and the strategies tied with it on time), `ties` (their names), every
        prediction, and the strategies too small to fit on."""
        chosen = choice(self.strategies)
        return {
            "recommended": self.recommended,
            "choice": chosen.to_dict() if chosen else None,
            "ties": [t.strategy for t in chosen.ties] if chosen else [],
            "strategies": [s.to_dict() for s in self.strategies],
            "unmeasured": self.unmeasured,
        }


def choice(predictions: list[StrategyPrediction]) -> Choice | None:
    """The rule's choice among the predictions that fit (None: none fits)."""
    return choose([s.candidate() for s in predictions if s.verdict == FITS])
