"""A device's shard of a leaf, assembled on the device from the chunks the staging ring sent it.

A device region of one chunk is the transferred array itself; a larger one is assembled on its
device by in-place updates of one buffer (`update`: `dynamic_update_slice` with the buffer
donated, jitted once per shape), so the device holds the shard and the chunks in flight, never a
second copy of the shard. A chunk of a leaf transposed on the device is transposed by its update
(a transpose in device memory runs near the speed of a plain device copy). `fold` moves the
transfers that have completed into the shard; the token it returns is ready once the update has
run, so the ring reuses a slot a device array borrows (the CPU backend) only after that.

A device that runs out of memory mid-load raises one error naming the tensor, the device and its
free memory (`oom_error`, `DeviceOutOfMemoryError`; the bench records it as an `oom` row of kind
`device`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import jax

from loader.errors import DeviceOutOfMemoryError
from loader.pipeline.regions import Region, region_shape
from loader.pipeline.ring_chunks import DevicePiece


@contextlib.contextmanager
def _no_mesh() -> Iterator[None]:
    """Outside any `jax.set_mesh` context: the updates run on one device, not the model's mesh
    (where this jax has no `set_mesh(None)`, as it is)."""
    try:
        context: AbstractContextManager[object] = jax.set_mesh(None)
        context.__enter__()
    except Exception:  # noqa: BLE001 - an older or newer jax without it: no mesh to leave
        yield
        return
    try:
        yield
    finally:
        context.__exit__(None, None, None)


def update(
    buffer: Any, chunk: Any, starts: tuple[int, ...], perm: tuple[int, ...] = ()
) -> tuple[Any, Any]:
    with _no_mesh():
        updated: tuple[Any, Any] = _jit_update(buffer, chunk, starts, perm)
    return updated


@partial(jax.jit, donate_argnums=0, static_argnums=3)
def _jit_update(
    buffer: Any, chunk: Any, starts: tuple[int, ...], perm: tuple[int, ...]
) -> tuple[Any, Any]:
    """`buffer` (donated: updated in place) with `chunk` at `starts`, transposed by `perm` first
    if given (on the device), and a token (one element of the chunk) that is ready once the
    update has run."""
    token = chunk[(0,) * chunk.ndim]
    placed = jax.numpy.transpose(chunk, perm) if perm else chunk
    return jax.lax.dynamic_update_slice(buffer, placed, starts), token


def compile_updates(
    piece: DevicePiece, chunks: list[Region], compiled: set[tuple[object, ...]]
) -> None:
    """Compile the piece's in-place updates now, once per shape (`compiled`: the shapes done so
    far in this load), before any read: compiling needs host memory for a while, and no ring
    slot is in use yet."""
    import jax.numpy as jnp

    for region in {region_shape(r): r for r in chunks}.values():
        shape = region_shape(region)
        _, perm = piece.placement(region)
        key = (region_shape(piece.region), shape, piece.dtype.str, str(piece.device), perm)
        if key not in compiled:
            compiled.add(key)
            with _no_mesh():
                zero = jnp.zeros(shape, piece.dtype, device=piece.device)
            piece.array, _ = update(piece.array, zero, (0,) * len(shape), perm)


def fold(piece: DevicePiece, where: str, *, ready_only: bool) -> object | None:
    """Move transferred chunks into the piece's device array (lock held); the token of the last
    update made (ready once it, and every update before it on that buffer, has run)."""
    keep, token = [], None
    for handle, region in piece.pending:
        if ready_only and not _is_ready(handle):
            keep.append((handle, region))
            continue
        array = _as_array(handle)
        target, perm = piece.placement(region)
        if target == piece.region and not perm:
            piece.array = array
            continue
        if piece.array is None:
            allocate(piece, where)
        starts = tuple(r.start - p.start for r, p in zip(target, piece.region))
        piece.array, token = update(piece.array, array, starts, perm)
    piece.pending = keep
    return token


def _zeros(piece: DevicePiece) -> jax.Array:
    """The shard's buffer, made on its device (owned by XLA, so the updates may donate it; an
    adopted host buffer cannot be donated: each update would copy the shard)."""
    import jax.numpy as jnp

    with _no_mesh():
        return jnp.zeros(region_shape(piece.region), piece.dtype, device=piece.device)


def allocate(piece: DevicePiece, where: str) -> None:
    """Make the shard's buffer on its device; out of device memory, one error naming the tensor,
    the device and its free memory."""
    try:
        piece.array = _zeros(piece)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise oom_error(where, piece.device, _nbytes(piece)) from exc
        raise


def _nbytes(piece: DevicePiece) -> int:
    return math.prod(region_shape(piece.region)) * piece.dtype.itemsize


def _is_ready(handle: object) -> bool:
    is_ready = getattr(handle, "is_ready", None)
    return bool(is_ready()) if is_ready is not None else True


def _as_array(handle: object) -> Any:
    """The device array of a transfer (a fake transfer's `result()`, else the handle itself)."""
    result = getattr(handle, "result", None)
    return result() if callable(result) and not isinstance(handle, jax.Array) else handle


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def free_memory(device: object) -> str:
    """The device's free memory, as its allocator reports it ("unknown" where it does not)."""
    memory_stats = getattr(device, "memory_stats", None)
    try:
        stats = (memory_stats() if memory_stats is not None else None) or {}
    except Exception:  # noqa: BLE001 - a backend that cannot report it
        stats = {}
    if "bytes_limit" not in stats:
        return "unknown free memory"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return f"{free} bytes free of {int(stats['bytes_limit'])}"


def oom_error(where: str, device: object, nbytes: int) -> DeviceOutOfMemoryError:
    """A device out of memory, as one error naming the tensor, the device and its free memory."""
    return DeviceOutOfMemoryError(
        f"{where}: device {device} ran out of memory receiving {nbytes} bytes "
        f"({free_memory(device)})"
    )
