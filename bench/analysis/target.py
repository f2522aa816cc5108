"""Time on a host you are not on, from its probe (`loadbench recommend --probe TARGET.json`).

`bench.analysis.time_model` fits each strategy's runs here into terms a probe can scale (the
model build per tensor, the fresh memory along the probe's first-touch curve, the copying per
byte, the parallelism P and the cold overlap O). On the target, the build scales with one core's
interpreter speed (`single_core_ops_per_s`, here over there), the copying with one thread's warm
copy (the best warm copy over the threads that reached it), and the fresh memory is charged along
the target's own first-touch curve (a large checkpoint pays what a mapping that large costs
there); the sum is spread over min(P, the target's CPUs): `cpu_wall = cpu_s' / min(P, cpus)`. A
warm load takes `cpu_wall`; a cold one also reads the checkpoint at the target's disk speed,
`disk_s = bytes / cold_read_bytes_per_s`, overlapped as here: `wall = max(cpu_wall, disk_s) +
(1 - O) * min(cpu_wall, disk_s)` (O = 0 where no cold run was measured: an upper bound). "Here"
is this machine's probe, the one its runs were held against (`ceiling_probe_id`, cached in the
results folder). Peaks do not depend on bandwidth: they come from `bench.analysis.recommend`'s
fits. No jax.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from bench.analysis.advice import Advice
from bench.analysis.recommend import Recommendation, TargetCheckpoint, rank
from bench.analysis.time_model import (
    TimeModel,
    build_cpu,
    cpu_seconds,
    fit_time,
    touch_seconds,
    unlimited_runs,
)
from bench.errors import BenchError
from bench.machine.record import ProbeRecord, read_probe
from bench.records.results import Results
from bench.units import format_rate
from bench.vocabulary import COLD


@dataclass(frozen=True)
class TargetTime:
    """A strategy's predicted time on the target, and its parts."""

    strategy: str
    predicted_wall_s: float
    cpu_wall_s: float
    disk_s: float | None
    model: TimeModel


def target_cpus(probe: ProbeRecord) -> float:
    """The CPUs' worth of time the target gives: its affinity, cut by a fractional quota."""
    quota = probe.cpu_quota_cpus
    return float(min(probe.affinity_cpus, quota) if quota else probe.effective_cpus)


def target_ram(probe: ProbeRecord) -> int:
    """The RAM a load may use on the target: the `--host-ram` it was probed under, else the
    tightest memory.max over its cgroups, else its RAM."""
    return probe.host_ram_bytes or probe.memory_max_bytes or probe.ram_bytes


def copy_per_thread(probe: ProbeRecord) -> float:
    """One thread's warm copy: the best warm copy over the threads (CPUs) that reached it, a
    steadier figure than the single-thread pass alone."""
    threads = min(probe.warm_copy_threads, max(target_cpus(probe), 1.0))
    return probe.warm_copy_bytes_per_s / threads


def scales(here: ProbeRecord, there: ProbeRecord) -> tuple[float, float]:
    """(per-byte, per-tensor) CPU time there over here: one thread's warm copy, one core's loop."""
    per_byte = copy_per_thread(here) / copy_per_thread(there)
    return per_byte, here.single_core_ops_per_s / there.single_core_ops_per_s


def predict_time(
    model: TimeModel, here: ProbeRecord, there: ProbeRecord, target: TargetCheckpoint, cache: str
) -> TargetTime:
    """The model's time for the `target` checkpoint on the host that wrote `there`."""
    per_byte, per_tensor = scales(here, there)
    k = (model.cpu_s_per_byte * per_byte, model.cpu_s_per_tensor * per_tensor)
    cpu = cpu_seconds(k, target.checkpoint_bytes, target.tensors, there)
    cpu_wall = cpu / min(model.parallelism, target_cpus(there))
    if cache != COLD:
        return TargetTime(model.strategy, cpu_wall, cpu_wall, None, model)
    if not there.cold_read_bytes_per_s:
        raise BenchError(
            f"the target's probe {there.probe_id} has no disk figure (cold_read_bytes_per_s), so "
            "a cold load cannot be predicted: probe the target with `loadbench probe --disk PATH` "
            "(PATH on the disk its checkpoints are read from), or predict --cache warm"
        )
    disk = target.checkpoint_bytes / there.cold_read_bytes_per_s
    hidden = (model.overlap or 0.0) * min(cpu_wall, disk)
    return TargetTime(model.strategy, cpu_wall + disk - hidden, cpu_wall, disk, model)


def here_probe(results: Results, folder: str | Path, rows: pd.DataFrame) -> ProbeRecord:
    """This machine's probe: the one most of `rows` were held against, from the results folder."""
    ids = Counter(i for i in rows.get("ceiling_probe_id", []) if isinstance(i, str))
    probes = {}
    for path in sorted(Path(folder).rglob("probe-*.json")):
        try:
            record = read_probe(path)
        except BenchError:
            continue
        probes[record.probe_id] = record
    for probe_id, _ in ids.most_common():
        if probe_id in probes:
            return probes[probe_id]
    raise BenchError(
        f"no probe of the machine these runs were measured on in {folder}/ (rows name "
        f"{', '.join(ids) or 'none'}): run `loadbench bench run` there again (it probes once per "
        "machine and disk) or with --probe"
    )


def predict_all(
    results: Results, folder: str | Path, there: ProbeRecord, target: TargetCheckpoint, cache: str
) -> tuple[dict[str, TargetTime], ProbeRecord]:
    """strategy -> its time on the target, and the probe of here it was scaled from."""
    rows = unlimited_runs(results)
    if rows.empty:
        raise BenchError(
            f"no ok runs without limits and with a CPU time (cpu_s) in {folder}/ to fit: run "
            f"`make bench SHAPES=gpt2,sa3 RESULTS={folder}` with this loadbench first"
        )
    here = here_probe(results, folder, rows)
    build, out = build_cpu(results.phases), {}
    for strategy, group in rows.groupby("strategy"):
        model = fit_time(str(strategy), group, here, build)
        out[str(strategy)] = predict_time(model, here, there, target, cache)
    return out, here


def retime(rec: Recommendation, times: dict[str, TargetTime]) -> Recommendation:
    """`rec` with each strategy's time on the target, ranked again; a strategy without a time
    model (no CPU time measured) moves to `unmeasured`."""
    timed = [
        replace(s, predicted_wall_s=times[s.strategy].predicted_wall_s)
        for s in rec.strategies
        if s.strategy in times
    ]
    missing = [s.strategy for s in rec.strategies if s.strategy not in times]
    return rank(timed, [*rec.unmeasured, *missing])


def on_target(
    results: Results, folder: str | Path, adv: Advice, there: ProbeRecord, probe_name: str
) -> tuple[Advice, dict[str, TargetTime], list[str]]:
    """`adv` (peaks and verdicts for the target's RAM, fitted from `adv.inputs.cache`) with each
    strategy's time on the host that wrote `there` (the file `probe_name`), ranked again; the
    times; and the sentences saying what was extrapolated from what (`describe`)."""
    cache = adv.inputs.cache
    times, here = predict_all(results, folder, there, adv.target, cache)
    inputs = replace(adv.inputs, probe=probe_name)
    adv = replace(adv, rec=retime(adv.rec, times), inputs=inputs, measured=None)
    return adv, times, describe(here, there, times, adv.target.checkpoint_bytes)


def _host(p: ProbeRecord) -> str:
    disk = format_rate(p.cold_read_bytes_per_s) if p.cold_read_bytes_per_s else "no disk"
    return (
        f"{p.machine} (probe {p.probe_id}: {target_cpus(p):g} CPUs, warm copy "
        f"{format_rate(p.warm_copy_bytes_per_s)}, disk {disk})"
    )


def describe(
    here: ProbeRecord, there: ProbeRecord, times: dict[str, TargetTime], ckpt: int
) -> list[str]:
    """What the times were extrapolated to, from what, and how (one sentence each)."""
    per_byte, per_tensor = scales(here, there)
    parts = ", ".join(
        f"{name} P={t.model.parallelism:.2f}"
        + (f" O={t.model.overlap:.0%}" if t.model.overlap is not None else "")
        for name, t in sorted(times.items())
    )
    return [
        f"Times extrapolated to {_host(there)} from the runs here on {_host(here)}.",
        f"CPU work scaled x{per_byte:.2f} per byte (one thread's warm copy) and "
        f"x{per_tensor:.2f} per tensor (one core's interpreter speed), the checkpoint's fresh "
        f"memory charged at {_touch(there, ckpt)} (the target's first touch for a mapping that "
        f"large; {_touch(here, ckpt)} here), spread over min(P, {target_cpus(there):g} CPUs); "
        "cold loads add the checkpoint at the target's disk speed, overlapped by O as here "
        f"(O=0 where no cold run was measured): {parts}.",
    ]


def _touch(probe: ProbeRecord, nbytes: int) -> str:
    return format_rate(nbytes / touch_seconds(probe, nbytes))
