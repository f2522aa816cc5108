"""Host -> device routes the staged path could take on an accelerator host, one per fresh process:
the figures behind docs/results.md's "Seventh session" (TPU v5e).

    python scripts/dma_map_probe.py SHAPES CHECKPOINT_FILE MODE

One `.safetensors` file's tensors (as views of the file mapped whole, in file order) or its first
`ANON_BYTES` (read into an anonymous, page-aligned buffer, reused round after round) are put onto
the first device; the client's `dma_map` (a host range registered with the device for direct DMA)
is tried where the mode says so:

- `list`: one `jax.device_put` of every tensor as a list (the mapping's pages go straight to it);
- `before`: that put, then the shape set's model built abstractly (`abstract_build`), then the
  wait for the transfers: whether the puts go on while the build runs, and the floor of a load
  that builds abstractly, with no host bound (the whole file is mapped: RSS grows by it);
- `dma-file`: `dma_map` of the whole mapping, then as `list` (the error, where it is refused);
- `build`: the model's abstract build alone (the baseline of `thread`);
- `thread`: a thread puts every tensor of at most `CHUNK_BYTES` (those a staged load would send
  whole, as their leaves), one put each in file order, while the main thread builds the model:
  whether puts of that size return at once there and keep the link busy beside the build, and
  what the thread costs the build (put returns are summarised by size);
- `anon`, `dma-anon`: `ROUNDS` rounds of (read `ANON_BYTES` of the file into the buffer with
  `os.preadv`, put it in `PIECE_BYTES` pieces as one list, wait), without and with `dma_map` of the
  buffer: whether a registered, reused staging buffer puts faster or returns sooner.

Prints one JSON line: the seconds until each put returned and until its transfers completed, the
RSS growth, and a sample of the tensors read back and compared bit for bit.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
import time
import warnings
from typing import Any

import jax
import numpy as np
from one_load import rss_mib  # this folder: the same RSS reading
from overlap_build import tensor_views  # and the same views of a mapped file

import shapes
from loader.target.abstract import abstract_build
from shapes.catalog import load_spec

MODES = ("list", "before", "dma-file", "build", "thread", "anon", "dma-anon")
ANON_BYTES = 256 << 20
PIECE_BYTES = 16 << 20
ROUNDS = 4
CHUNK_BYTES = 64 << 20  # the staged path's largest chunk sent straight from mapped pages
SAMPLE_EVERY = 37  # every 37th tensor is read back and compared


def address(buffer: mmap.mmap) -> int:
    return int(np.frombuffer(buffer, np.uint8).ctypes.data)


def mismatched(hosts: list[np.ndarray], arrays: list[Any]) -> dict[str, int]:
    sample = range(0, len(hosts), SAMPLE_EVERY)
    bad = sum(np.asarray(arrays[i]).tobytes() != hosts[i].tobytes() for i in sample)
    return {"compared": len(sample), "mismatched": int(bad)}


def dma_map(client: Any, buffer: mmap.mmap, result: dict[str, Any]) -> bool:
    """Register the buffer for DMA; False (the error in `result`) where the client refuses."""
    began = time.perf_counter()
    try:
        client.dma_map(address(buffer), len(buffer))
    except Exception as exc:  # noqa: BLE001 - the refusal is the finding
        result["dma_map_error"] = f"{type(exc).__name__}: {exc}"[:400]
        return False
    result["dma_map_s"] = round(time.perf_counter() - began, 4)
    return True


def from_file(name: str, path: str, mode: str, device: Any, result: dict[str, Any]) -> None:
    with open(path, "rb") as fh:
        pages = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
    views = tensor_views(pages, path)
    if mode == "dma-file" and not dma_map(device.client, pages, result):
        return
    began = time.perf_counter()
    arrays = jax.device_put(views, [device] * len(views))
    result["put_return_s"] = round(time.perf_counter() - began, 4)
    if mode == "before":
        build = shapes.model_builder(load_spec(name))
        built = time.perf_counter()
        abstract_build(build)
        result["build_s"] = round(time.perf_counter() - built, 4)
    waited = time.perf_counter()
    jax.block_until_ready(arrays)
    result["wait_s"] = round(time.perf_counter() - waited, 4)
    result["wall_s"] = round(time.perf_counter() - began, 4)
    result.update(mismatched(views, arrays))
    if mode == "dma-file":
        device.client.dma_unmap(address(pages))


def size_class(nbytes: int) -> str:
    """`<1MiB`, else the power of two of MiB it is at most: `<=32MiB`."""
    if nbytes < 1 << 20:
        return "<1MiB"
    return f"<={(1 << (nbytes - 1).bit_length()) >> 20}MiB"


def during_build(name: str, path: str, mode: str, device: Any, result: dict[str, Any]) -> None:
    """`build` and `thread` (see the module docstring)."""
    with open(path, "rb") as fh:
        pages = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
    views = [v for v in tensor_views(pages, path) if v.nbytes <= CHUNK_BYTES]
    arrays: list[Any] = []
    returns: dict[str, list[float]] = {}

    def send() -> None:
        for view in views:
            began = time.perf_counter()
            arrays.append(jax.device_put(view, device))
            returns.setdefault(size_class(view.nbytes), []).append(time.perf_counter() - began)

    build = shapes.model_builder(load_spec(name))
    sender = threading.Thread(target=send) if mode == "thread" else None
    began = time.perf_counter()
    if sender is not None:
        sender.start()
    abstract_build(build)
    result["build_s"] = round(time.perf_counter() - began, 4)
    if sender is not None:
        sender.join()
        result["sent_s"] = round(time.perf_counter() - began, 4)
        jax.block_until_ready(arrays)
        result["tensors"] = len(views)
        result["bytes"] = sum(v.nbytes for v in views)
        result["put_return_ms"] = {
            size: {"n": len(t), "median": round(1e3 * sorted(t)[len(t) // 2], 3)}
            for size, t in sorted(returns.items())
        }
        result.update(mismatched(views, arrays))
    result["wall_s"] = round(time.perf_counter() - began, 4)


def from_anonymous(path: str, mode: str, device: Any, result: dict[str, Any]) -> None:
    staging = mmap.mmap(-1, ANON_BYTES)  # anonymous, page-aligned, reused every round
    if mode == "dma-anon" and not dma_map(device.client, staging, result):
        return
    flat = np.frombuffer(staging, np.uint8)
    pieces = [flat[i : i + PIECE_BYTES] for i in range(0, ANON_BYTES, PIECE_BYTES)]
    rounds = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(ROUNDS):
            began = time.perf_counter()
            os.preadv(fd, [staging], 0)
            read = time.perf_counter()
            arrays = jax.device_put(pieces, [device] * len(pieces))
            returned = time.perf_counter()
            jax.block_until_ready(arrays)
            done = time.perf_counter()
            rounds.append(
                {
                    "read_s": round(read - began, 4),
                    "put_return_s": round(returned - read, 4),
                    "put_done_s": round(done - read, 4),
                }
            )
    finally:
        os.close(fd)
    result["rounds"] = rounds
    result.update(mismatched(pieces, arrays))
    if mode == "dma-anon":
        device.client.dma_unmap(address(staging))


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    name, path, mode = argv[0], argv[1], argv[2]
    if mode not in MODES:
        raise SystemExit(f"dma_map_probe: mode {mode!r}: give one of {', '.join(MODES)}")
    device = jax.devices()[0]
    jax.block_until_ready(jax.device_put(np.zeros(4, np.float32), device))  # the runtime warm
    result: dict[str, Any] = {"mode": mode, "file": os.path.basename(path)}
    before = rss_mib()
    if mode in ("anon", "dma-anon"):
        from_anonymous(path, mode, device, result)
    elif mode in ("build", "thread"):
        during_build(name, path, mode, device, result)
    else:
        from_file(name, path, mode, device, result)
    result["rss_growth_mib"] = rss_mib() - before
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
