"""The answer for a host whose weights land in device memory (`recommend --accelerator`).

On JAX's CPU backend, where every run here is measured, the model lives in host RAM, so each peak
holds it whole. On a GPU or TPU host the weights land in device memory, and a strategy with a staged
path (`pipelined`, which stages there by default) needs in host RAM only its process's baseline
plus its staging ring: the ring's bytes are bounded by the load's budget, and each staged run
records their high-water mark (`inflight_peak_bytes`, with `staging_memory` set). So:

- host peak: a staged strategy's median baseline plus its ring (the larger of the measured
  high-water mark and the budget in force, since a larger checkpoint fills the ring up to its
  bound); a strategy without a staged path reads the model into host RAM before it moves, so its
  CPU-fitted peak stands.
- device peak: measured where runs on a device reported one (the median device peak per checkpoint
  byte); else predicted as the model's bytes plus the largest transient, its largest tensor (a
  leaf's second copy while it is cast or assembled).
- both verdicts: host RAM and, where given, device RAM; a strategy fits when both do.

Where no device run backs a figure it is said to be "predicted from CPU staged runs, not measured
on a device". No jax.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from bench.analysis.backend import row_backends
from bench.analysis.recommend import (
    DevicePrediction,
    Recommendation,
    TargetCheckpoint,
    rank,
    verdict,
)
from bench.records.results import Results
from bench.units import format_bytes
from bench.vocabulary import CPU, OK, VERDICTS
from loader.vocabulary import TOTAL

STAGED_RING = "staged ring"
CPU_RUNS = "CPU runs"
MEASURED = "measured on a device"
PREDICTED = "predicted"
NOT_MEASURED = "predicted from CPU staged runs, not measured on a device"


@dataclass(frozen=True)
class Accelerator:
    """A target host whose weights land in device memory, and its device RAM (None: not given,
    so no device verdict)."""

    device_ram_bytes: int | None = None


@dataclass(frozen=True)
class Ring:
    """A staged strategy's host side: its median baseline, the ring's bytes (the larger of its
    measured high-water mark and its budget), that high-water mark, and the budget."""

    baseline_bytes: int
    ring_bytes: int
    measured_bytes: int
    budget_bytes: int | None


def staged_rings(rows: pd.DataFrame) -> dict[str, Ring]:
    """strategy -> its staged runs' `Ring`, over the ok total rows with `staging_memory` set."""
    if "staging_memory" not in rows or "inflight_peak_bytes" not in rows:
        return {}
    staged = rows[rows["staging_memory"].notna() & rows["inflight_peak_bytes"].notna()]
    out = {}
    for strategy, group in staged.groupby("strategy"):
        measured = int(pd.to_numeric(group["inflight_peak_bytes"]).max())
        budgets = pd.to_numeric(group["budget_bytes"]).dropna()
        budget = int(budgets.max()) if len(budgets) else None
        out[str(strategy)] = Ring(
            baseline_bytes=int(pd.to_numeric(group["baseline_rss_bytes"]).median()),
            ring_bytes=max(measured, budget or 0),
            measured_bytes=measured,
            budget_bytes=budget,
        )
    return out


def device_ratios(results: Results) -> dict[str, float]:
    """strategy -> median device peak per checkpoint byte, over ok runs on a device backend that
    reported one (empty: no such run)."""
    phases = results.phases
    rows = phases[(phases["phase"] == TOTAL) & (phases["status"] == OK)]
    rows = rows[rows["phase_device_peak_bytes"].notna()]
    rows = rows[row_backends(rows) != CPU]
    if rows.empty:
        return {}
    ratio = pd.to_numeric(rows["phase_device_peak_bytes"]) / pd.to_numeric(rows["checkpoint_bytes"])
    return {str(k): float(v) for k, v in ratio.groupby(rows["strategy"]).median().items()}


def _worse(a: str, b: str | None) -> str:
    return a if b is None else max(a, b, key=VERDICTS.index)


def on_accelerator(
    rec: Recommendation,
    results: Results,
    rows: pd.DataFrame,
    target: TargetCheckpoint,
    host_ram: int,
    device_ram: int | None,
) -> Recommendation:
    """`rec` (fitted on CPU runs) for a host whose weights land in device memory: each strategy's
    host peak from its staged ring where it has one, its device peak, both verdicts; ranked again.

    Args:
        rec: the CPU recommendation (`bench.analysis.recommend.recommend`).
        results: every run read (for device-backed device peaks).
        rows: the ok total rows of staged runs (`ok_runs(..., staged=True)`).
        target: the checkpoint to load.
        host_ram: the host's RAM in bytes.
        device_ram: the device memory in bytes, or None (no device verdict).
    """
    rings, ratios = staged_rings(rows), device_ratios(results)
    out = []
    for s in rec.strategies:
        ring = rings.get(s.strategy)
        host = ring.baseline_bytes + ring.ring_bytes if ring else s.predicted_peak_bytes
        ratio = ratios.get(s.strategy)
        device = (
            int(ratio * target.checkpoint_bytes)
            if ratio
            else target.checkpoint_bytes + target.largest_tensor_bytes
        )
        host_verdict = verdict(host, host_ram)
        device_verdict = verdict(device, device_ram) if device_ram else None
        side = DevicePrediction(
            host_basis=STAGED_RING if ring else CPU_RUNS,
            ring_bytes=ring.ring_bytes if ring else None,
            ring_measured_bytes=ring.measured_bytes if ring else None,
            budget_bytes=ring.budget_bytes if ring else None,
            host_verdict=host_verdict,
            device_peak_bytes=device,
            device_basis=MEASURED if ratio else PREDICTED,
            device_verdict=device_verdict,
            measured_on_device=bool(ratio),
        )
        out.append(
            replace(
                s,
                predicted_peak_bytes=host,
                verdict=_worse(host_verdict, device_verdict),
                headroom_bytes=host_ram - host,
                device=side,
            )
        )
    return rank(out, rec.unmeasured)


def accelerator_sentences(rec: Recommendation, device_ram: int | None) -> list[str]:
    """What the accelerator answer rests on, one short sentence each."""
    sides = [(s.strategy, s.device) for s in rec.strategies if s.device is not None]
    staged = [(name, d) for name, d in sides if d.host_basis == STAGED_RING]
    out = ["Accelerator host: the weights land in device memory, not in host RAM."]
    if staged:
        rings = ", ".join(
            f"{name}: {format_bytes(d.ring_bytes)}, {format_bytes(d.ring_measured_bytes)} measured"
            for name, d in staged
        )
        out.append(f"Host peaks of staged strategies are baseline plus ring ({rings}).")
        out.append(f"These host peaks are {NOT_MEASURED}; times are from CPU runs.")
    else:
        out.append(
            "No staged runs here: run `bench run --staging --strategies pipelined` for a host "
            "peak from the staging ring."
        )
    if any(d.host_basis == CPU_RUNS for _, d in sides):
        out.append("Strategies without a staged path keep their CPU peak: they read into host RAM.")
    if any(not d.measured_on_device for _, d in sides):
        out.append(
            "Device peaks are the model plus its largest tensor: predicted, not measured on a "
            "device."
        )
    if device_ram is None:
        out.append("Give --device-ram (e.g. 24GiB) for a device-memory verdict.")
    return out
