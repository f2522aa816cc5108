"""The machine's ceiling each row is held against: a probe taken once per machine and disk.

`bench run` probes the disk that holds the checkpoint cache (`loadbench probe`, in a child, inside
`--cpus` if given) the first time it runs on a machine, and keeps the record in the results folder,
`<out>/<machine>/probe-<MAJ-MIN>[-cpusN]-<probe id>.json`; later runs reuse the newest, and
`--probe` takes a new one.
A cached probe whose file was smaller than the checkpoint (up to `MAX_PROBE_BYTES`) is taken again
with a file that large. Each row then gets `ceiling_s`: its checkpoint's bytes over the probe's
best bandwidth for its situation (warm copy for a warm run, the disk for a cold one, the cap for a
capped one, where that is the slower), and `ceiling_ratio` = wall_s / ceiling_s, and
`ceiling_cpu_s`: the CPU-seconds the probe's warm copy spends on that many bytes (threads copying
the page cache into fresh memory in C: page faults and copies, no Python per byte), the cost per
byte a row's own `cpu_s` is held against. Where the probe fails, the run goes on without a ceiling
and says why. Never imports jax.

A warm run whose files were not all cached when its child started (`resident_fraction` below 1:
a checkpoint that, with the model, does not fit in RAM, so each load evicts part of it) is held
against what its situation allows: every byte copied at the warm rate, and the bytes that were
not cached read from the disk, whichever takes longer:
`max(bytes / warm_copy, (1 - resident_fraction) * bytes / cold_read)`. A cold run's few cached
pages are not counted (its ceiling stays the disk's).

Where the probe saw an accelerator and measured host -> device puts, each row also gets a
**device ceiling** (`device_ceiling_s`): the larger of the read limit for its bytes
(`device_read_s`: the page cache read into reused, already-touched buffers for a warm run, as a
staged load reads, else the warm copy; the disk for a cold one, the same way as above) and the
transfer limit (`device_transfer_s`: its bytes at the best host -> device rate of any piece size,
`ProbeRecord.h2d_best_bytes_per_s`): a load onto the device can overlap its reads and its
transfers, never beat the slower of the two. `bench.run.rows.with_ratios` keeps it, with
`device_ceiling_ratio` = wall_s / device_ceiling_s, on rows loaded onto an accelerator only.
Beside it, the host memory of the compiler's first use in a process, as the probe measured it
(`first_compile_host_bytes`): not a time limit but a host cost no budget bounds, which a row that
compiled device programs carries in its host peak (the summary says so under its table).

The probe's copy passes fault their fresh pages in with `MADV_POPULATE_WRITE`, or, where the
kernel refuses it (gVisor, older kernels), by touching one byte per page; the probe records which
(`ProbeRecord.prefault`) and a run that takes a probe says so when it touched.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError
from bench.limits.disk_read import whole_disk
from bench.machine.accelerator import NONE
from bench.machine.bandwidth import TOUCH
from bench.machine.child import ProbePlan
from bench.machine.facts import machine_id
from bench.machine.record import ProbeRecord, read_probe, write_probe
from bench.machine.run import ProbeOptions, probe_host
from bench.run.config import RunConfig, checkpoints_dir
from bench.vocabulary import COLD

MIN_PROBE_BYTES, MAX_PROBE_BYTES = 32 << 20, 2 << 30


def probe_bytes_for(checkpoint_bytes: int) -> int:
    """The probe file a checkpoint's ceiling wants: its size, within `MIN_PROBE_BYTES` and
    `MAX_PROBE_BYTES` (a kept probe with a file at least that large serves it)."""
    return max(MIN_PROBE_BYTES, min(MAX_PROBE_BYTES, checkpoint_bytes))


def probe_stem(out: Path, cpus: int | None, disk: Path) -> Path:
    """`<out>/<machine>/probe-<MAJ-MIN>[-cpusN]`: what every probe of `disk` (inside `cpus`
    CPUs) on this machine is named after, in the results folder `out`."""
    device = whole_disk(os.stat(disk).st_dev) or "nodisk"
    limit = f"-cpus{cpus}" if cpus is not None else ""
    return Path(out) / machine_id() / f"probe-{device.replace(':', '-')}{limit}"


def probe_file(out: Path, cpus: int | None, disk: Path, probe_id: str) -> Path:
    """Where one probe of `disk` is kept in the results folder `out`: named by machine, disk,
    CPU limit and its own id, so results folders merged by hand (two runs' folders copied into
    one) never overwrite one another's probe. `bench run --out` reuses the newest
    (`loadbench probe --results` writes one there)."""
    stem = probe_stem(out, cpus, disk)
    return stem.with_name(f"{stem.name}-{probe_id}.json")


def cached_probes(out: Path, cpus: int | None, disk: Path) -> list[Path]:
    """The probes of `disk` kept for this machine, newest last (files of older loadbench were
    named without their id: `probe-<MAJ-MIN>[-cpusN].json`)."""
    stem = probe_stem(out, cpus, disk)
    legacy = stem.with_suffix(".json")
    found = [
        p
        for p in stem.parent.glob(f"{stem.name}-*.json")
        if "-cpus" in stem.name or ("-cpus" not in p.name)
    ]
    found += [legacy] if legacy.is_file() else []
    return sorted(found, key=lambda p: p.stat().st_mtime)


@dataclass
class Ceiling:
    """The run's probe, taken or read once, then asked per checkpoint."""

    config: RunConfig
    probed: bool = False  # taken during this run (so `--probe` re-probes once)
    record: ProbeRecord | None = None
    tried: set[int] = field(default_factory=set)

    def probe(self, checkpoint_bytes: int) -> ProbeRecord | None:
        """The probe for a checkpoint of `checkpoint_bytes` (cached, or taken now)."""
        size = probe_bytes_for(checkpoint_bytes)
        if self.record is not None and (self.probed or self.record.probe_file_bytes >= size):
            return self.record
        disk = checkpoints_dir()
        disk.mkdir(parents=True, exist_ok=True)
        cached_paths = cached_probes(self.config.out, self.config.cpus, disk)
        if not (self.config.reprobe and not self.probed) and cached_paths:
            try:
                cached = read_probe(cached_paths[-1])
            except BenchError as exc:
                print(f"loadbench: {exc}; probing again", file=sys.stderr)
            else:
                if cached.probe_file_bytes >= size:
                    self.record = cached
                    return cached
        return self._take(disk, size)

    @property
    def onto_device(self) -> bool:
        """Whether the children load onto an accelerator: the probe saw one, and the run does
        not keep jax on the CPU (`JAX_PLATFORMS=cpu`)."""
        if self.record is None or self.record.accelerator == NONE:
            return False
        return os.environ.get("JAX_PLATFORMS", "").strip().lower() != "cpu"

    def fields(self, checkpoint_bytes: int, cache: str, resident: float | None = None) -> dict:
        """The row fields of the ceiling for a checkpoint loaded from `cache` (probing first if
        need be), `resident` the fraction of it cached as the child started; a cold run under
        `--disk-read-speed` is held against the cap where slower."""
        cap = self.config.disk_read_bytes_per_s if cache == COLD else None
        probe = self.probe(checkpoint_bytes)
        return (
            ceiling_fields(probe, checkpoint_bytes, cache, cap, resident)
            | device_ceiling_fields(probe, checkpoint_bytes, cache, cap, resident)
            | first_compile_fields(probe)
        )

    def _take(self, disk: Path, size: int) -> ProbeRecord | None:
        if size in self.tried:
            return self.record
        self.tried.add(size)
        plan = ProbePlan(disk=str(disk), file_bytes=size)
        try:
            self.record = probe_host(ProbeOptions(plan, cpus=self.config.cpus))
            path = probe_file(self.config.out, self.config.cpus, disk, self.record.probe_id)
            write_probe(self.record, path)
        except BenchError as exc:
            print(f"loadbench: no ceiling for these rows: {exc}", file=sys.stderr)
            return self.record
        self.probed = True
        if self.record.prefault == TOUCH:
            print(
                "loadbench: the probe touched fresh pages one byte per page (prefault: touch; "
                "madvise(MADV_POPULATE_WRITE) is refused here)",
                file=sys.stderr,
            )
        return self.record


def bandwidth(probe: ProbeRecord, cache: str, cap: int | None) -> float | None:
    """The probe's best bytes/s for a run in this situation (None: the probe has no such figure)."""
    if cache != COLD:
        return probe.warm_copy_bytes_per_s
    if cap is not None:
        return min(cap, probe.cold_read_bytes_per_s or cap)
    return probe.cold_read_bytes_per_s


def _read_seconds(
    probe: ProbeRecord, rate: float, checkpoint_bytes: int, cache: str, resident: float | None
) -> float:
    """`checkpoint_bytes` at `rate`; a warm run not all cached also pays its uncached bytes at
    the disk's speed, whichever takes longer."""
    seconds = checkpoint_bytes / rate
    uncached = 1.0 - resident if cache != COLD and resident is not None else 0.0
    if uncached > 0 and probe.cold_read_bytes_per_s:  # partly cold: those bytes come off the disk
        seconds = max(seconds, uncached * checkpoint_bytes / probe.cold_read_bytes_per_s)
    return seconds


def ceiling_fields(
    probe: ProbeRecord | None,
    checkpoint_bytes: int,
    cache: str,
    cap: int | None,
    resident: float | None = None,
) -> dict:
    """The row fields `ceiling_s`, `ceiling_probe_id` and `ceiling_cpu_s` for a checkpoint in
    this situation (`resident`: the fraction of its pages cached as the child started, None where
    unknown)."""
    rate = bandwidth(probe, cache, cap) if probe is not None else None
    if probe is None or not rate:
        return {}
    seconds = _read_seconds(probe, rate, checkpoint_bytes, cache, resident)
    per_byte = probe.warm_copy_cpu_s_per_byte
    cpu = {} if per_byte is None else {"ceiling_cpu_s": checkpoint_bytes * per_byte}
    return {"ceiling_s": seconds, "ceiling_probe_id": probe.probe_id} | cpu


def device_read_rate(probe: ProbeRecord, cache: str, cap: int | None) -> float | None:
    """The read limit of a load onto a device: the page cache into reused buffers (warm; the
    warm copy into fresh memory in probes without that figure), the disk (cold, capped)."""
    if cache != COLD:
        return probe.warm_read_reused_bytes_per_s or probe.warm_copy_bytes_per_s
    return bandwidth(probe, cache, cap)


def first_compile_fields(probe: ProbeRecord | None) -> dict:
    """The row field `first_compile_host_bytes`: the host bytes the probe's process grew by
    compiling its first program, where the probe saw an accelerator and measured it."""
    if probe is None or probe.accelerator == NONE or probe.first_compile_host_bytes is None:
        return {}
    return {"first_compile_host_bytes": probe.first_compile_host_bytes}


def device_ceiling_fields(
    probe: ProbeRecord | None,
    checkpoint_bytes: int,
    cache: str,
    cap: int | None,
    resident: float | None = None,
) -> dict:
    """The row fields `device_ceiling_s` (the larger of `device_read_s` and
    `device_transfer_s`), `device_read_s` and `device_transfer_s` for a checkpoint in this
    situation; none where the probe saw no accelerator or measured no transfer."""
    if probe is None or probe.accelerator == NONE or not probe.h2d_best_bytes_per_s:
        return {}
    transfer = checkpoint_bytes / probe.h2d_best_bytes_per_s
    rate = device_read_rate(probe, cache, cap)
    read = _read_seconds(probe, rate, checkpoint_bytes, cache, resident) if rate else None
    return {
        "device_ceiling_s": max(transfer, read or 0.0),
        "device_read_s": read,
        "device_transfer_s": transfer,
    }
