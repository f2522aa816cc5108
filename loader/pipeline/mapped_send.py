"""The chunks that go straight from mapped file pages, sent a batch at a time by one thread.

A mapped chunk has nothing to read (`loader.pipeline.ring`'s mapped route): what it costs is the
Python around its `jax.device_put`. Measured on a TPU v5e host (gVisor, sa3's 684 chunks, see
docs/results.md): one put per chunk from a sender thread, beside the main thread finishing leaves,
took 0.37-0.40 s of puts (0.55 ms each: the two threads hand the interpreter's lock back and forth);
the model zoos' one put per leaf on the main thread 0.18 s; one `jax.device_put` of a list of the
685 views 0.10 s. So:

- the chunks go in batches (`batches`): consecutive chunks in file order, each batch mapped (its
  chunks admitted to the `MappedFlight` and viewed in their file's window) and then handed to one
  `jax.device_put` (`RingSender.send_many`);
- where every part of a load is a mapped chunk (a local file, no cast: the usual load onto an
  accelerator), the main thread sends them all before it finishes any leaf; where reader threads
  read other parts, one sender thread sends them beside the readers (the main thread must go on
  finishing jobs there: a host copy's budget is given back only then).

A batch holds at most `BATCH_CHUNKS` chunks and at most `limit_bytes` (the sender's largest mapped
chunk): its chunks are admitted before its one call, so a batch must fit what the budget lets be
in flight once everything launched earlier has landed, as a single chunk did.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import numpy as np

from loader.pipeline.jobs import MappedPart
from loader.pipeline.ring import RingSender

BATCH_CHUNKS = 256  # chunks per `jax.device_put` call at most


def batches(parts: Iterable[MappedPart], limit_bytes: int) -> Iterator[list[MappedPart]]:
    """Consecutive parts, at most `BATCH_CHUNKS` and `limit_bytes` a batch (a larger part alone)."""
    batch: list[MappedPart] = []
    size = 0
    for part in parts:
        if batch and (len(batch) >= BATCH_CHUNKS or size + part.nbytes > limit_bytes):
            yield batch
            batch, size = [], 0
        batch.append(part)
        size += part.nbytes
    if batch:
        yield batch


def _cast_cap(batch: list[MappedPart], sender: RingSender) -> float | None:
    """The bound on bytes in flight before the batch where it holds chunks cast on their device
    into a narrower dtype (`RingSender.cast_cap`); None otherwise."""
    pieces = [part.chunk.piece for part in batch]
    ratio = max(p.arrives_as.itemsize / p.dtype.itemsize for p in pieces)
    leaf_bytes = sum(part.chunk.device_bytes for part in batch)
    return sender.cast_cap(leaf_bytes, ratio)


def send_batch(batch: list[MappedPart], sender: RingSender) -> float:
    """Map the batch's chunks and start their transfers with one call; the seconds spent mapping.
    The batch's bytes are admitted to the sender's `MappedFlight` at once (held until each
    transfer completes); a chunk whose range its source declines to map gives its bytes back and
    goes through a ring slot instead."""
    t0 = time.perf_counter()
    flight = sender.flight
    unsent = sum(part.nbytes for part in batch)
    flight.admit(unsent, _cast_cap(batch, sender))
    mapped: list[tuple[MappedPart, np.ndarray, np.ndarray]] = []
    ring_s = 0.0
    try:
        for part in batch:
            got = part.job.map_chunk(part.chunk, part.offset, part.nbytes)
            if got is None:
                flight.withdraw(part.nbytes)
                unsent -= part.nbytes
                ring_s += part.job.through_ring(part.chunk, np.empty(0, np.uint8))
            else:
                mapped.append((part, *got))
        mapping_s = time.perf_counter() - t0 - ring_s
        handles = sender.send_many(
            [
                (chunk, p.chunk.piece, p.job.where, p.job.is_whole(p.chunk, on_host=True))
                for p, chunk, _ in mapped
            ]
        )
    except BaseException:
        flight.withdraw(unsent)  # admitted, never in flight
        raise
    flight.launched_many([(h, p.nbytes, raw) for (p, _, raw), h in zip(mapped, handles)])
    for (part, _, _), handle in zip(mapped, handles, strict=True):
        part.job.arrived(part.chunk, handle, on_host=True)
    return mapping_s + ring_s
