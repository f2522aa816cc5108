"""A device's shard of a leaf, assembled on the device from the chunks the staging ring sent it.

A device region of one chunk is the transferred array itself; a larger one is assembled on its
device by in-place updates of one buffer (`dynamic_update_slice` with the buffer donated), so the
device holds the shard and the chunks in flight, never a second copy of the shard. A chunk of a
leaf that a port transposes arrives transposed where it was sent as a strided view of mapped pages
(the device runtime arranges the bytes while it copies them: no program for it); one that came
through a ring slot is transposed on the device, by one program for a whole shard or by its
update. The programs are `loader.pipeline.programs.DevicePrograms`', compiled ahead, once per
shape (`ask_programs`). `fold` moves the
transfers that have completed into the shard; the token it returns is ready once the update has
run, so the ring reuses a slot a device array borrows (the CPU backend) only after that.

A device that runs out of memory mid-load raises one error naming the tensor, the device and its
free memory (`oom_error`, `DeviceOutOfMemoryError`; the bench records it as an `oom` row of kind
`device`).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from loader.errors import DeviceOutOfMemoryError
from loader.pipeline.programs import DevicePrograms
from loader.pipeline.regions import Region, region_shape
from loader.pipeline.ring_chunks import DevicePiece


def fold(
    piece: DevicePiece, where: str, programs: DevicePrograms, *, ready_only: bool
) -> object | None:
    """Move transferred chunks into the piece's device array (lock held); the token of the last
    update made (ready once it, and every update before it on that buffer, has run)."""
    keep, token = [], None
    for handle, region, on_host in piece.pending:
        if ready_only and not _is_ready(handle):
            keep.append((handle, region, on_host))
            continue
        array = _as_array(handle)
        target, perm = piece.placement(region, on_host=on_host)
        if target == piece.region:  # the whole shard in one chunk
            if perm:
                shape = region_shape(region)
                transpose = programs.transpose(shape, piece.dtype, piece.device, perm)
                array = transpose.result()(array)
            piece.array = array
            continue
        if piece.array is None:
            allocate(piece, where, programs)
        arriving = piece.arriving_shape(region, on_host=on_host)
        update = programs.update(
            region_shape(piece.region), arriving, piece.dtype, piece.device, perm
        )
        starts = tuple(np.int32(r.start - p.start) for r, p in zip(target, piece.region))
        piece.array, token = run_update(update.result(), piece.array, array, starts)
    piece.pending = keep
    return token


def run_update(program: Any, buffer: Any, chunk: Any, starts: tuple[Any, ...]) -> tuple[Any, Any]:
    """Run a compiled update (`DevicePrograms.update`): the updated buffer (the one given is
    donated) and a token that is ready once the update has run."""
    updated: tuple[Any, Any] = program(buffer, chunk, starts)
    return updated


def ask_programs(
    piece: DevicePiece, chunks: list[Region], programs: DevicePrograms, *, on_host: bool
) -> bool:
    """Start compiling, in the background, what assembling the piece from `chunks` needs: none
    for a shard sent whole (transposed by its transfer where `on_host`), a transpose for a whole
    shard transposed on the device, else its allocation and one update per chunk shape (one,
    from `even_chunks`). Whether it needs any."""
    if not chunks:
        return False
    shard = region_shape(piece.region)
    target, perm = piece.placement(chunks[0], on_host=on_host)
    if len(chunks) == 1 and target == piece.region:
        if perm:
            programs.transpose(region_shape(chunks[0]), piece.dtype, piece.device, perm)
        return bool(perm)
    programs.allocation(shard, piece.dtype, piece.device)
    for region in {region_shape(r): r for r in chunks}.values():
        _, perm = piece.placement(region, on_host=on_host)
        arriving = piece.arriving_shape(region, on_host=on_host)
        programs.update(shard, arriving, piece.dtype, piece.device, perm)
    return True


def allocate(piece: DevicePiece, where: str, programs: DevicePrograms) -> None:
    """Make the shard's buffer on its device; out of device memory, one error naming the tensor,
    the device and its free memory."""
    try:
        piece.array = programs.allocation(
            region_shape(piece.region), piece.dtype, piece.device
        ).result()()
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


def _memory_stats(device: object) -> dict[str, Any]:
    memory_stats = getattr(device, "memory_stats", None)
    try:
        return (memory_stats() if memory_stats is not None else None) or {}
    except Exception:  # noqa: BLE001 - a backend that cannot report it
        return {}


def free_bytes(device: object) -> int | None:
    """The device's free memory in bytes (`bytes_limit` less `bytes_in_use`), None where its
    allocator does not say (the CPU backend)."""
    stats = _memory_stats(device)
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def model_too_large(device: object, nbytes: int, free: int) -> DeviceOutOfMemoryError:
    """The model does not fit its device: one error naming both figures, before any read."""
    limit = int(_memory_stats(device).get("bytes_limit", free))
    return DeviceOutOfMemoryError(
        f"the model needs {nbytes} bytes ({nbytes / 2**30:.2f} GiB) on device {device}, which has "
        f"{free} bytes ({free / 2**30:.2f} GiB) free of {limit}: nothing was read. Give the model "
        "a smaller dtype, shard it over more devices, or free device memory first"
    )


def free_memory(device: object) -> str:
    """The device's free memory, as its allocator reports it ("unknown" where it does not)."""
    free = free_bytes(device)
    if free is None:
        return "unknown free memory"
    return f"{free} bytes free of {int(_memory_stats(device)['bytes_limit'])}"


def oom_error(where: str, device: object, nbytes: int) -> DeviceOutOfMemoryError:
    """A device out of memory, as one error naming the tensor, the device and its free memory."""
    return DeviceOutOfMemoryError(
        f"{where}: device {device} ran out of memory receiving {nbytes} bytes "
        f"({free_memory(device)})"
    )
