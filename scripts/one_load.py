"""One load in this process, timed around `load_model` alone, with its host and device peaks: the
quick check behind docs/results.md's "The staged path on a TPU v5e host", for a host where the
bench's own passes cost more than the load (each row there spends most of its time probing).

    python scripts/one_load.py SHAPES CHECKPOINT MODEL [BUDGET_MIB]

MODEL: `spec` (the shape set's model as stored), `bf16` (the same in bfloat16, cast on load),
`port` (the shape set's real architecture with its key map), or `mmap-put` (the zoos' pattern, as
the peer strategy of that name). Prints one JSON line. The host peak is `VmRSS` sampled every
2 ms (gVisor has no `VmHWM`), over the value just before the load; the device peak is the first
device's `peak_bytes_in_use` where it reports one.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax

import loader
import shapes
from loader import strategies
from shapes.catalog import load_spec


def rss_mib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) >> 10
    return 0


def load_target(name: str, model: str) -> tuple[Callable[[], Any], dict[str, Any], str]:
    """(builder, load_model keywords, strategy) of MODEL for the shape set `name`, with the
    strategy's modules imported (before the clock, as the bench's child does)."""
    spec = load_spec(name)
    kw: dict[str, Any] = {}
    strategy = "mmap-put" if model == "mmap-put" else "pipelined"
    if model == "port":
        from shapes.architectures.port import port_for

        port = port_for(spec, dtype=None, seed=0, scanned=False)
        build, kw = port.builder, {"key_map": port.key_map}
    elif model == "bf16":
        build, kw = shapes.model_builder(spec, dtype="bfloat16"), {"casts": "allow"}
    else:
        build = shapes.model_builder(spec)
    strategies.get(strategy).strategy()
    return build, kw, strategy


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    name, checkpoint, model = argv[0], argv[1], argv[2]
    budget = int(argv[3]) << 20 if len(argv) > 3 else None
    jax.devices()  # the backend starts before the clock does
    build, kw, strategy = load_target(name, model)
    if budget and strategy == "pipelined":
        kw["budget"] = budget
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib())
            time.sleep(0.002)

    base = rss_mib()
    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    loaded, report = loader.load_model(build, checkpoint, strategy=strategy, **kw)
    jax.block_until_ready(jax.tree.leaves(loaded))
    wall = time.perf_counter() - t0
    stop.set()
    stats = jax.devices()[0].memory_stats() or {}
    print(
        json.dumps(
            {
                "shapes": name,
                "model": model,
                "budget_mib": budget and budget >> 20,
                "wall_s": round(wall, 3),
                "host_peak_over_baseline_mib": peak[0] - base,
                "device_peak_gib": round(stats.get("peak_bytes_in_use", 0) / 2**30, 3),
                "device_programs": getattr(report, "device_programs", None),
                "staging": report.staging_memory,
                "inflight_peak_mib": (report.inflight_peak_bytes or 0) >> 20,
                "loaded": len(report.loaded),
                "device_transposed": len(report.device_transposed),
                "transfer_transposed": len(report.transfer_transposed),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
