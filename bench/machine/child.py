"""The machine probe's child: measures this machine from inside the limits its parent put it in.

`python -m bench.machine.child PLAN.json OUT.json` reads a `ProbePlan`, measures (the limits in
force, warm copy and cold read by thread count, the warm read into reused buffers, first touch,
memcpy, the accelerator; how fresh pages were faulted in: `prefault`) and writes
the figures as one JSON object, or `{"error": "..."}` when the disk cannot be probed (read-only,
full, or no such folder). The probe file it writes is removed whatever happens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.limits import pagecache
from bench.limits.disk_read import whole_disk
from bench.machine import accelerator, bandwidth
from bench.machine import limits as kernel_limits
from loader import host

EVICTED = 0.05  # a cold pass needs at most this fraction of the probe file left cached
ALIGN = 1 << 20  # the probe file's size is a multiple of this (O_DIRECT reads whole sectors)
LARGE_TOUCH_MAX = 8 << 30  # the largest first touch measured (8x the probe file, if RAM allows)


@dataclass(frozen=True)
class ProbePlan:
    """What to measure, and how much: sizes are injectable so tests stay small (`file_bytes` is
    rounded up to a whole MiB)."""

    disk: str | None  # the folder whose disk is probed cold; None: warm figures only
    file_bytes: int = 2 << 30
    repeats: int = 3
    accelerator_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        object.__setattr__(self, "file_bytes", -(-self.file_bytes // ALIGN) * ALIGN)


def thread_counts(cores: int) -> tuple[list[int], list[int]]:
    """Warm copy: 1, 2, 4, ... and the core count and twice it; cold read: 1, 2, 4, ... up to
    max(4, 2x cores). Powers of two, not every count: each count is `repeats` passes of the
    whole probe file, and on a 13-CPU host in gVisor (a TPU v5e's) every count from 1 to 26
    made the probe 224 s, 148 s of it the warm copy."""
    warm, n = [], 1
    while n < 2 * cores:
        warm.append(n)
        n *= 2
    warm = sorted({*warm, cores, 2 * cores})
    cold, n = [], 1
    while n <= max(4, 2 * cores):
        cold.append(n)
        n *= 2
    return warm, cold


def touch_sizes(file_bytes: int, room_bytes: int) -> list[int]:
    """The first-touch sizes: the probe file's, and up to 8x it within half of `room_bytes` (the
    memory this process may still take), where that is at least twice the file."""
    large = min(8 * file_bytes, room_bytes // 2, LARGE_TOUCH_MAX) // ALIGN * ALIGN
    return [file_bytes, large] if large >= 2 * file_bytes else [file_bytes]


def _best(by_threads: dict[int, float]) -> tuple[float | None, int | None]:
    if not by_threads:
        return None, None
    threads = max(by_threads, key=lambda n: by_threads[n])
    return by_threads[threads], threads


def _cold(path: Path, counts: list[int], repeats: int) -> dict:
    """The cold figures, or none and a note where the file's pages cannot be evicted."""
    left = pagecache.evict([path])
    if left is not None and left > EVICTED:
        note = f"{path.parent} keeps its pages cached when evicted ({left:.0%} stayed; tmpfs?)"
        return {"cold_read": {}, "cold_read_method": None, "notes": [note]}
    rates, method, nbytes = bandwidth.cold_read(path, counts, repeats)
    said = {"cold_read": rates, "cold_read_method": method, "cold_read_pass_bytes": nbytes}
    return said | {"notes": []}


def _disk_fields(plan: ProbePlan, folder: Path, warm: list[int], cold: list[int]) -> dict:
    """Write the probe file in `folder`, measure warm (and cold with a disk), remove it."""
    path = folder / f".loadbench-probe-{os.getpid()}.bin"
    try:
        path.touch(exist_ok=False)  # a read-only folder fails here, before anything is measured
        free = shutil.disk_usage(folder).free
        if free < plan.file_bytes * 2:
            raise OSError(f"only {free} bytes free; the probe needs {plan.file_bytes * 2}")
        bandwidth.write_probe_file(path, plan.file_bytes)
        out: dict = {"warm_copy": bandwidth.warm_copy(path, warm, plan.repeats)}
        out["warm_read_reused"] = bandwidth.warm_reused_read(path, cold, plan.repeats)
        _, threads = _best(out["warm_copy"])
        if threads is not None:
            cpu = bandwidth.copy_cpu(path, threads, plan.repeats)
            out["warm_copy_cpu_s_per_byte"] = cpu
        if plan.disk is not None:
            out |= _cold(path, cold, plan.repeats)
        out["disk_device"] = whole_disk(os.stat(path).st_dev)
        return out
    finally:
        path.unlink(missing_ok=True)


def measure(plan: ProbePlan) -> dict:
    """Every figure the probe child reports (ProbeRecord's measured fields)."""
    start = time.monotonic()
    limits = kernel_limits.read()
    warm, cold = thread_counts(limits.effective_cpus)
    folder = Path(plan.disk) if plan.disk is not None else Path(tempfile.gettempdir())
    out: dict = {"cold_read": {}, "cold_read_method": None, "notes": []}
    out |= _disk_fields(plan, folder, warm, cold)
    out["warm_copy_bytes_per_s"], out["warm_copy_threads"] = _best(out["warm_copy"])
    out["cold_read_bytes_per_s"], out["cold_read_threads"] = _best(out["cold_read"])
    reused = _best(out["warm_read_reused"])
    out["warm_read_reused_bytes_per_s"], out["warm_read_reused_threads"] = reused
    for key in ("warm_copy", "cold_read", "warm_read_reused"):
        out[key] = {str(n): v for n, v in out[key].items()}
    small = min(plan.file_bytes, 256 << 20)
    sizes = touch_sizes(plan.file_bytes, host.available_bytes() or 0)
    touch = bandwidth.first_touch_by_size(sizes, plan.repeats)
    out["first_touch_bytes_per_s"] = touch[plan.file_bytes]
    out["first_touch"] = {str(n): v for n, v in touch.items()}
    out["memcpy_bytes_per_s"] = bandwidth.memcpy(small, plan.repeats)
    out["single_core_ops_per_s"] = bandwidth.single_core(max(3, plan.repeats))
    out["prefault"] = bandwidth.prefault_method()
    out["notes"] += [n for n in [bandwidth.prefault_note()] if n]
    out |= {
        "cpu_count": os.cpu_count() or 1,
        "affinity_cpus": limits.affinity_cpus,
        "effective_cpus": limits.effective_cpus,
        "cpu_quota_cpus": limits.cpu_quota_cpus,
        "memory_max_bytes": limits.memory_max_bytes,
        "io_read_bytes_per_s": limits.io_read_bytes_per_s,
        "probe_file_bytes": plan.file_bytes,
    }
    facts = dataclasses.asdict(accelerator.probe(plan.accelerator_bytes, plan.repeats))
    out["notes"] += [n for n in [facts.pop("note")] if n and not n.startswith("JAX_PLATFORMS")]
    out |= facts
    out["measure_s"] = time.monotonic() - start
    return out


def main(argv: list[str]) -> int:
    plan = ProbePlan(**json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    try:
        result = measure(plan)
    except OSError as exc:
        where = plan.disk or tempfile.gettempdir()
        result = {"error": f"cannot probe the disk at {where}: {exc.strerror or exc}"}
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
