"""The probe's accelerator fields: what jax sees, and host -> device bandwidth where it sees one.

Runs in the probe child only (it imports jax). Where jax's backend is the CPU (or
`JAX_PLATFORMS=cpu`, which is then known without importing jax) every field says "none" / null.
Otherwise: the device count and memory (`memory_stats()["bytes_limit"]`), and the bandwidth of
`jax.device_put` onto device 0 from ordinary (pageable) numpy memory:

- one array of `nbytes` (`h2d_pageable_bytes_per_s`, the figure older probes carry);
- per piece size (`PIECES`: 4, 16, 64, 256 MiB), the same bytes cut in pieces and put one at a
  time (in flight "1": each put waited for before the next), from `IN_FLIGHT` threads at once
  ("4"), and as one list in one `device_put` call ("list") (`h2d`); the best of these
  (`h2d_best_bytes_per_s`, its piece size and mode) is the link's limit the device ceiling uses
  (`bench.run.ceiling`). A link carries small pieces best when several are in flight, and one
  large array at half its speed, so one figure for one size would misstate it.

And the `pinned_host` route: numpy -> `pinned_host` through `jax.device_put` (measured: on a TPU
v5e host it runs at about 1 GB/s, so it is no route for a loader), then `pinned_host` -> device,
tried the ways jax may accept (a sharding of memory kind "device", the device itself, its default
sharding); the first that works gives `h2d_pinned_bytes_per_s` and `h2d_pinned_route`, else
`h2d_pinned_reason` says why each failed ("Memory kind mismatch ..."): never an exception.

And the compiler's first use (`first_compile_s`, `first_compile_host_bytes`): one tiny program
compiled before anything else, its seconds and the host memory the process grew by. A load that
compiles device programs (`LoadReport.device_programs`: shards assembled or transposed on the
device) pays that first use in its process, once, and keeps the memory: on a TPU v5e host about
0.5 s and 0.2 GiB, a part of such a row's host peak that no budget bounds (docs/results.md,
"Eleventh session"). It is measured first, so that nothing compiled earlier hides it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

NONE = "none"
PIECES = (4 << 20, 16 << 20, 64 << 20, 256 << 20)
IN_FLIGHT = 4
ONE, MANY, LIST = "1", str(IN_FLIGHT), "list"  # the `h2d` modes


@dataclass(frozen=True)
class AcceleratorFacts:
    """What the probe records of the accelerator (NONE / None on a CPU-only host)."""

    accelerator: str = NONE  # the jax platform ("gpu", "tpu") or "none"
    device_kind: str = NONE
    device_count: int = 0
    device_memory_bytes: int | None = None
    h2d_pageable_bytes_per_s: float | None = None
    h2d_pinned_bytes_per_s: float | None = None
    h2d: dict[str, dict[str, float]] = field(default_factory=dict)
    h2d_best_bytes_per_s: float | None = None
    h2d_best_piece_bytes: int | None = None
    h2d_best_in_flight: str | None = None
    h2d_pinned_fill_bytes_per_s: float | None = None
    h2d_pinned_route: str | None = None
    h2d_pinned_reason: str | None = None
    first_compile_s: float | None = None
    first_compile_host_bytes: int | None = None
    note: str = ""


def _seconds(run: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `run()` (which must wait for its transfers) over `repeats`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
        del out
    return statistics.median(times)


def _put_rate(put: Callable[[], Any], nbytes: int, repeats: int) -> float:
    return nbytes / _seconds(lambda: put().block_until_ready(), repeats)


def _one_at_a_time(jax: Any, device: Any, pieces: list[np.ndarray]) -> list:
    return [jax.device_put(p, device).block_until_ready() for p in pieces]


def _in_flight(jax: Any, device: Any, pieces: list[np.ndarray], threads: int) -> list:
    """Every piece put, `threads` puts in flight at once (each thread waits for its own); the
    first failure is raised here."""
    with ThreadPoolExecutor(min(threads, len(pieces)) or 1) as pool:
        return list(pool.map(lambda p: jax.device_put(p, device).block_until_ready(), pieces))


def _as_list(jax: Any, device: Any, pieces: list[np.ndarray]) -> list:
    return jax.block_until_ready(jax.device_put(pieces, device))


def piece_rates(
    jax: Any,
    device: Any,
    nbytes: int,
    repeats: int,
    pieces: tuple[int, ...] = PIECES,
) -> dict[str, dict[str, float]]:
    """{mode: {piece bytes: bytes/s}} of `device_put` onto `device`, for each piece size: the
    larger of `nbytes` and `IN_FLIGHT` pieces, cut in pieces of that size (float32, in one
    already-touched host buffer), put one at a time (ONE), `IN_FLIGHT` at once (MANY) and as one
    list (LIST)."""
    out: dict[str, dict[str, float]] = {ONE: {}, MANY: {}, LIST: {}}
    for piece in pieces:
        total = max(nbytes, IN_FLIGHT * piece) // piece * piece
        host = np.ones(total // 4, np.float32)
        parts = [host[i : i + piece // 4] for i in range(0, host.size, piece // 4)]
        runs = {
            ONE: lambda parts=parts: _one_at_a_time(jax, device, parts),
            MANY: lambda parts=parts: _in_flight(jax, device, parts, IN_FLIGHT),
            LIST: lambda parts=parts: _as_list(jax, device, parts),
        }
        _one_at_a_time(jax, device, parts[:1])  # the first put's set-up is no transfer
        for mode, run in runs.items():
            out[mode][str(piece)] = total / _seconds(run, repeats)
        del host, parts
    return out


def best_rate(rates: dict[str, dict[str, float]]) -> tuple[float | None, int | None, str | None]:
    """(bytes/s, piece bytes, mode) of the fastest figure in `piece_rates`' output."""
    found = [(v, int(p), mode) for mode, by in rates.items() for p, v in by.items()]
    if not found:
        return None, None, None
    return max(found)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _putter(jax: Any, source: Any, where: Any) -> Callable[[], Any]:
    return lambda: jax.device_put(source, where)


def pinned_route(
    jax: Any, device: Any, host: np.ndarray, repeats: int
) -> tuple[float | None, float | None, str | None, str | None]:
    """The `pinned_host` route: (numpy -> pinned_host bytes/s, pinned_host -> device bytes/s,
    how the second was done, why it could not be). Never raises: a backend without
    `pinned_host`, or one that refuses the put ("Memory kind mismatch"), gives a reason."""
    nbytes = host.nbytes
    try:
        pinned = jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host")
        fill = _put_rate(lambda: jax.device_put(host, pinned), nbytes, repeats)
        staged = jax.device_put(host, pinned).block_until_ready()
    except Exception as exc:  # noqa: BLE001 - a backend without pinned_host raises its own types
        return None, None, None, f"no pinned_host memory here ({_why(exc)})"
    routes: list[tuple[str, Callable[[], Any]]] = [
        (
            "memory_kind=device",
            lambda: jax.sharding.SingleDeviceSharding(device, memory_kind="device"),
        ),
        ("device", lambda: device),
        ("default sharding", lambda: jax.sharding.SingleDeviceSharding(device)),
    ]
    failed = []
    for name, target in routes:
        try:
            where = target()
            jax.device_put(staged, where).block_until_ready()  # once: refused here, or not
            rate = _put_rate(_putter(jax, staged, where), nbytes, repeats)
        except Exception as exc:  # noqa: BLE001 - each backend refuses in its own words
            failed.append(f"{name}: {_why(exc)}")
            continue
        return fill, rate, name, None
    reason = "pinned_host -> device refused every way tried (" + "; ".join(failed) + ")"
    return fill, None, None, reason


def facts_for(jax: Any, device: Any, count: int, nbytes: int, repeats: int) -> AcceleratorFacts:
    """The accelerator facts of `device` (one of `count`), its compiler's first use and its
    transfers measured."""
    compile_s, compile_bytes = first_compile(jax)
    stats = device.memory_stats() or {}
    host = np.ones(nbytes, np.uint8)
    pageable = _put_rate(lambda: jax.device_put(host, device), nbytes, repeats)
    rates = piece_rates(jax, device, nbytes, repeats)
    best, piece, mode = best_rate(rates)
    fill, pinned, route, reason = pinned_route(jax, device, host, repeats)
    note = f"host -> device from pinned_host: {reason}" if reason else ""
    return AcceleratorFacts(
        accelerator=device.platform,
        device_kind=device.device_kind,
        device_count=count,
        device_memory_bytes=stats.get("bytes_limit"),
        h2d_pageable_bytes_per_s=pageable,
        h2d_pinned_bytes_per_s=pinned,
        h2d=rates,
        h2d_best_bytes_per_s=best,
        h2d_best_piece_bytes=piece,
        h2d_best_in_flight=mode,
        h2d_pinned_fill_bytes_per_s=fill,
        h2d_pinned_route=route,
        h2d_pinned_reason=reason,
        first_compile_s=compile_s,
        first_compile_host_bytes=compile_bytes,
        note=note,
    )


def first_compile(jax: Any) -> tuple[float, int]:
    """Seconds to compile one tiny program (`x + 1` on 8 floats) on jax's default backend, and
    the bytes this process's resident memory grew by meanwhile (0 where it did not): the
    compiler's first use where nothing was compiled before in the process."""
    process = psutil.Process()
    before = process.memory_info().rss
    start = time.perf_counter()
    jax.jit(lambda x: x + 1).lower(jax.ShapeDtypeStruct((8,), np.float32)).compile()
    seconds = time.perf_counter() - start
    return seconds, max(0, process.memory_info().rss - before)


def probe(nbytes: int = 256 << 20, repeats: int = 3) -> AcceleratorFacts:
    """The accelerator jax sees (device 0's transfers measured with `nbytes`), or NONE. A
    transfer that fails leaves the figures it could take and says why (`note`)."""
    if os.environ.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return AcceleratorFacts(note="JAX_PLATFORMS=cpu")
    try:
        import jax
    except ImportError:
        return AcceleratorFacts(note="jax is not installed")
    devices = jax.devices()
    if devices[0].platform == "cpu":
        return AcceleratorFacts(note="jax sees only the CPU")
    device = devices[0]
    try:
        return facts_for(jax, device, len(devices), nbytes, repeats)
    except Exception as exc:  # noqa: BLE001 - the probe's other figures still stand
        stats = device.memory_stats() or {}
        return AcceleratorFacts(
            accelerator=device.platform,
            device_kind=device.device_kind,
            device_count=len(devices),
            device_memory_bytes=stats.get("bytes_limit"),
            note=f"host -> device not measured: {_why(exc)}",
        )
