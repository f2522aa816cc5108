"""A device's shard of a leaf, assembled on the device from the chunks the staging ring sent it.

A device region of one chunk is the transferred array itself; a larger one is assembled on its
device by in-place updates of one buffer (`dynamic_update_slice` with the buffer donated), so the
device holds the shard and the chunks in flight, never a second copy of the shard. A chunk of a
leaf that a port transposes arrives transposed where it was sent as a strided view of mapped pages
(the device runtime arranges the bytes while it copies them: no program for it); one that came
through a ring slot is transposed on the device, by one program for a whole shard or by its
update. A leaf cast on its device arrives in the file's dtype and is converted there, by the
same programs (one per shape). The programs are `loader.pipeline.programs.DevicePrograms`',
compiled ahead, once per shape (`ask_programs`). `fold` moves the
transfers that have completed into the shard (where the device has room, not yet those whose
programs are still compiling); the token it returns is ready once the update has run, so the ring
reuses a slot a device array borrows (the CPU backend) only after that.

A device that runs out of memory mid-load raises one error naming the tensor, the device and its
free memory (`oom_error`, `DeviceOutOfMemoryError`; the bench records it as an `oom` row of kind
`device`).
"""

from __future__ import annotations

import math
from typing import Any

import jax

from loader.errors import DeviceOutOfMemoryError
from loader.pipeline.programs import DevicePrograms
from loader.pipeline.regions import Region, region_shape
from loader.pipeline.ring_chunks import DevicePiece


def fold(
    piece: DevicePiece,
    where: str,
    programs: DevicePrograms,
    *,
    ready_only: bool,
    defer_bytes: int = 0,
) -> object | None:
    """Move transferred chunks into the piece's device array (lock held); the token of the last
    update made (ready once it, and every update before it on that buffer, has run).

    With `ready_only`, only the chunks whose transfers have completed (a device array that is the
    whole shard as stored is taken as it is, landed or not); and of a shard of at most
    `defer_bytes` (`RingSender.defer_bytes`: what its device can hold beside the whole model and
    the chunks in flight), only those whose programs have compiled: the others stay pending, on
    the device, for a later fold, so the thread that sends goes on meanwhile rather than waiting
    for the compiler (on a TPU v5e host llama3-8b's first assembled chunks land before their
    programs have compiled; docs/results.md, "Tenth session"). A larger shard waits for them:
    folded only once every other part of the model is on the device, its buffer and its chunks
    together could pass the device's memory.
    """
    defer = ready_only and 0 < shard_bytes(piece) <= defer_bytes
    keep, token = [], None
    for entry in piece.pending:
        handle, region, on_host = entry
        target, perm = piece.placement(region, on_host=on_host)
        # a device array that is the whole shard as it arrives is the shard at once, landed or
        # not (jax orders every later use of it after its transfer): no second look per batch
        whole = target == piece.region and isinstance(handle, jax.Array)
        as_is = whole and not perm and not piece.converts
        if ready_only and not as_is and not _is_ready(handle) and not _converts_now(piece, whole):
            keep.append(entry)
            continue
        if target == piece.region:  # the whole shard in one chunk
            array = _as_array(handle)
            if perm or piece.converts:
                shape = region_shape(region)
                arrange = programs.arrange(shape, piece.arrives_as, piece.dtype, piece.device, perm)
                if (defer or piece.converts) and ready_only and not arrange.done():
                    keep.append(entry)
                    continue
                array = arrange.result()(array)
            piece.array = array
            continue
        arriving = piece.arriving_shape(region, on_host=on_host)
        shard = region_shape(piece.region)
        update = programs.update(
            shard, arriving, piece.dtype, piece.device, perm, sent=piece.arrives_as
        )
        if defer and not (update.done() and _has_buffer(piece, programs)):
            keep.append(entry)
            continue
        if piece.array is None:
            allocate(piece, where, programs)
        starts = programs.offsets(_starts(target, piece.region), piece.device)
        piece.array, token = run_update(update.result(), piece.array, _as_array(handle), starts)
    piece.pending = keep
    return token


def _converts_now(piece: DevicePiece, whole: bool) -> bool:
    """Whether a whole shard cast on its device is converted as soon as it is sent, landed or not
    (jax runs the conversion after the transfer): the file's bytes then stay on the device no
    longer than their transfer, which keeps the device's peak near the model's."""
    return whole and piece.converts and not piece.transposes


def _starts(target: Region, shard: Region) -> tuple[int, ...]:
    """Where a chunk's leaf region `target` starts in its `shard`."""
    return tuple(int(t.start - s.start) for t, s in zip(target, shard))


def _has_buffer(piece: DevicePiece, programs: DevicePrograms) -> bool:
    """Whether the piece has its buffer, or the program that makes it has compiled."""
    if piece.array is not None:
        return True
    return programs.allocation(region_shape(piece.region), piece.dtype, piece.device).done()


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
    from `even_chunks`), with the chunks' offsets put on the device. Whether it needs any."""
    if not chunks:
        return False
    shard = region_shape(piece.region)
    target, perm = piece.placement(chunks[0], on_host=on_host)
    if len(chunks) == 1 and target == piece.region:
        if perm or piece.converts:
            shape = region_shape(chunks[0])
            programs.arrange(shape, piece.arrives_as, piece.dtype, piece.device, perm)
        return bool(perm) or piece.converts
    programs.allocation(shard, piece.dtype, piece.device)
    for region in {region_shape(r): r for r in chunks}.values():
        _, perm = piece.placement(region, on_host=on_host)
        arriving = piece.arriving_shape(region, on_host=on_host)
        programs.update(shard, arriving, piece.dtype, piece.device, perm, sent=piece.arrives_as)
    # their offsets go to the device now, before the chunks do
    targets = [piece.placement(region, on_host=on_host)[0] for region in chunks]
    programs.put_offsets([_starts(target, piece.region) for target in targets], piece.device)
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
            raise oom_error(where, piece.device, shard_bytes(piece)) from exc
        raise


def shard_bytes(piece: DevicePiece) -> int:
    """The bytes of the piece's shard on its device."""
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
