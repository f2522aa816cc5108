"""Time on a host you are not on, from its probe (`loadbench recommend --probe TARGET.json`).

Each strategy's ok runs here without limits (warm, and cold where measured) are fitted into terms a
probe can scale, with the child's CPU time (all threads) split the way the work is:

    cpu_s ~= k_tensor * tensors              the model build (its phase's CPU time, one core)
           + touch_here(checkpoint_bytes)    faulting in the model's fresh memory (the probe's
                                             first-touch curve: one thread, by mapping size)
           + k_byte * checkpoint_bytes       the rest: copying from the page cache, casting, ...
    parallelism P = cpu_s / wall_s on the largest warm checkpoint (the threads it keeps busy)
    overlap O: how much of a cold load's disk time hid behind its CPU work here (cold runs)

The build is fitted on its own phase, and the copying on what is left, so checkpoints whose bytes
per tensor are alike (gpt2 and sa3 are) cannot trade one term for the other. On the target, the
build scales with one core's interpreter speed (`single_core_ops_per_s`, here over there), the
copying with one thread's warm copy (the best warm copy over the threads that reached it), and the
fresh memory is charged along the target's own first-touch curve (a large checkpoint pays what a
mapping that large costs there); the sum is spread over min(P, the target's CPUs): `cpu_wall =
cpu_s' / min(P, cpus)`. A warm load takes `cpu_wall`; a cold one also reads the checkpoint at
the target's disk speed, `disk_s = bytes / cold_read_bytes_per_s`, overlapped as here:
`wall = max(cpu_wall, disk_s) + (1 - O) * min(cpu_wall, disk_s)` (O = 0 where no cold run was
measured: an upper bound). "Here" is this machine's probe, the one its runs were held against
(`ceiling_probe_id`, cached in the results folder). Peaks do not depend on bandwidth: they come
from `bench.analysis.recommend`'s fits. `on_target` puts the times into `recommend`'s advice, and
`target_ram` is the RAM the target's probe gives: the CLI (`bench.commands.target`) and the
dashboard's Target host page both use them. No jax.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis.advice import Advice
from bench.analysis.recommend import MIN_FIT_BYTES, Recommendation, TargetCheckpoint, rank
from bench.errors import BenchError
from bench.host.record import ProbeRecord, read_probe
from bench.records.results import Results, headline
from bench.vocabulary import COLD, WARM
from loader.vocabulary import BUILD, OK, REFERENCE, TOTAL

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


@dataclass(frozen=True)
class TargetTime:
    """A strategy's predicted time on the target, and its parts."""

    strategy: str
    predicted_wall_s: float
    cpu_wall_s: float
    disk_s: float | None
    model: TimeModel


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


def _cpu_s(k: tuple[float, float], ckpt: float, tensors: float, probe: ProbeRecord) -> float:
    return k[0] * ckpt + k[1] * tensors + touch_seconds(probe, ckpt)


def _overlap(cold: pd.DataFrame, build: pd.Series, k: tuple[float, float], par: float, here):
    """O from the largest cold checkpoint here (None without cold runs or a disk figure)."""
    if cold.empty or not here.cold_read_bytes_per_s:
        return None
    big = _medians(cold, build).sort_values("ckpt").iloc[-1]
    cpu_wall = _cpu_s(k, big["ckpt"], big["tensors"], here) / par
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
    cpu = _cpu_s(k, target.checkpoint_bytes, target.tensors, there)
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
    adv = replace(adv, rec=retime(adv.rec, times), inputs=inputs)
    return adv, times, describe(here, there, times, adv.target.checkpoint_bytes)


def _host(p: ProbeRecord) -> str:
    disk = f"{p.cold_read_bytes_per_s / 1e9:.2f} GB/s" if p.cold_read_bytes_per_s else "no disk"
    return (
        f"{p.machine} (probe {p.probe_id}: {target_cpus(p):g} CPUs, warm copy "
        f"{p.warm_copy_bytes_per_s / 1e9:.2f} GB/s, disk {disk})"
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
    return f"{nbytes / touch_seconds(probe, nbytes) / 1e9:.2f} GB/s"
