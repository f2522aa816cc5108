"""Host -> device bandwidth (pageable: one buffer and in pieces; pinned) and the checkpoint's read
speed, as JSON.

Used by `scripts/device-check.sh` when `loadbench probe` is not there:
`python scripts/device_check_probe.py OUT.json CHECKPOINT_FILE [MiB [MACHINE_PROBE.json]]` (the
last: a `loadbench probe --out` record, embedded as "loadbench_probe"). Each figure is the best of
three timed copies of one buffer (MiB, default 1024) after a warm-up, and of the same bytes in
4, 16, 64 and 256 MiB pieces (one by one, and as one list); a route the backend refuses
(pinned_host on the CPU backend) is recorded with its error instead of a figure. The disk figure
reads the checkpoint file once warm (page cache) and once after `posix_fadvise(DONTNEED)`.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _best(fn, repeats: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


#: the piece sizes host -> device is timed in (issue 53: the link carries pieces better than one
#: 1 GiB array on a TPU v5e host)
PIECES_MIB = (4, 16, 64, 256)


def h2d(nbytes: int) -> dict[str, object]:
    """GB/s of `jax.device_put` from pageable host memory (one buffer, the same bytes in pieces
    one by one and as one list), and from the device's pinned_host memory."""
    import jax
    import numpy as np
    from jax.sharding import SingleDeviceSharding

    device = jax.devices()[0]
    host = np.ones(nbytes // 4, np.float32)
    out: dict[str, object] = {"device": str(device), "platform": device.platform, "bytes": nbytes}
    out["pageable_gb_s"] = (
        nbytes / _best(lambda: jax.device_put(host, device).block_until_ready()) / 1e9
    )
    pieces: dict[str, float] = {}
    for mib in (m for m in PIECES_MIB if m << 20 <= nbytes):
        n = (mib << 20) // 4
        parts = [host[i : i + n] for i in range(0, host.size - n + 1, n)]
        moved = len(parts) * n * 4

        def one_by_one(parts=parts) -> None:
            for part in parts:
                jax.device_put(part, device).block_until_ready()

        def as_list(parts=parts) -> None:
            jax.block_until_ready(jax.device_put(parts, device))

        pieces[f"{mib}MiB"] = moved / _best(one_by_one) / 1e9
        pieces[f"{mib}MiB_list"] = moved / _best(as_list) / 1e9
    out["pageable_pieces_gb_s"] = pieces
    try:
        # a pinned_host array made where it lives (not filled from numpy through device_put, a
        # slow route), moved to the device's own memory kind
        pinned_sharding = SingleDeviceSharding(device, memory_kind="pinned_host")
        pinned = jax.jit(
            lambda: jax.numpy.ones(nbytes // 4, jax.numpy.float32), out_shardings=pinned_sharding
        )()
        pinned.block_until_ready()
        to_device = SingleDeviceSharding(device, memory_kind="device")
        secs = _best(lambda: jax.device_put(pinned, to_device).block_until_ready())
        out["pinned_gb_s"] = nbytes / secs / 1e9
    except Exception as exc:  # noqa: BLE001 - a backend without the route: say why
        out["pinned_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def disk(path: str) -> dict[str, object]:
    """GB/s reading `path` whole: from the page cache, then evicted first (a cold read)."""
    size = os.path.getsize(path)
    buf = bytearray(min(size, 64 << 20))

    def read() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            off = 0
            while off < size and (n := os.preadv(fd, [buf], off)):
                off += n
        finally:
            os.close(fd)

    read()  # into the page cache
    t0 = time.perf_counter()
    read()
    warm = time.perf_counter() - t0
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    t0 = time.perf_counter()
    read()
    cold = time.perf_counter() - t0
    return {
        "file": path,
        "bytes": size,
        "warm_gb_s": size / warm / 1e9,
        "cold_gb_s": size / cold / 1e9,
    }


def main(argv: list[str]) -> int:
    out, checkpoint = argv[0], argv[1]
    mib = int(argv[2]) if len(argv) > 2 else 1024
    result: dict[str, object] = {"host_to_device": h2d(mib << 20), "disk": disk(checkpoint)}
    if len(argv) > 3:
        with open(argv[3], encoding="utf-8") as fh:
            result["loadbench_probe"] = json.load(fh)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
