"""The sizes of one load, worked out once from the options and the byte source before any reader
thread starts, and used by everything after: `Sizing`.

- threads: `threads=` if given, else the byte source's own count (`ByteSource.reader_threads`:
  by the CPUs and the page cache for local files, one per request in flight for a URL);
- each reader's scratch (`scratch_bytes`, for casts and transforms): a quarter of the budget over
  the threads, at most `MAX_SCRATCH_BYTES`, and off the staging ring at most `SCRATCH_SHARE` of
  the checkpoint over the threads (at least `MIN_SCRATCH_BYTES`);
- what each reader holds of a request in flight (`ByteSource.request_bytes`: a URL's answer);
- the most one piece of queued work reads (`max_part_bytes`): one request where the source takes
  each file's bytes in file order (`ByteSource.in_file_order`: a URL whose sha256 is checked as
  its bytes arrive), so the readers' requests in flight are the next ones of the file; otherwise
  no bound beyond the jobs' own parts (`loader.pipeline.jobs.PART_BYTES`) and runs;
- on the staged path (`staged_layout`): the piece (`chunk_bytes`: a quarter of what the scratch
  leaves, at most `MAX_CHUNK_BYTES`, so that several transfers are in flight at once), both for
  chunks sent straight from mapped file pages and for the staging ring's slots (chunks that need
  a host copy: casts, remote reads), so that a cast leaf goes in the pieces a plain one does and
  its device needs no program a plain load would not compile; the ring: half of what the scratch
  leaves, in slots of one piece (at least two, at most `2 * threads`), its bytes taken from the
  budget when it is first used; and the bytes in flight (`flight_bytes`: the budget, at most
  `MAX_FLIGHT_BYTES`): a larger budget never makes a piece larger, nor more bytes in flight than
  keep the link busy;
- on the staged path, the threads that compile its device programs
  (`loader.pipeline.programs.compile_threads`: up to four, one fewer than the usable CPUs, at
  least one);
- what is reserved of the budget for good: the scratch and the requests (`reserved_bytes`); the
  rest is counted as it comes (`ByteBudget.acquire`: speculative reads, host copies, the ring,
  mapped chunks in flight).

A budget that cannot hold two pages a reader, or one staging chunk a slot, is refused in one line
naming the least that works. Which tensors the page cache drops once read is the local source's
one decision (`loader.pipeline.sources.local`): it needs the plan, known only after the readers
have started.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loader.errors import CheckpointError
from loader.format.buffers import PAGE_BYTES
from loader.host import usable_cpus
from loader.options import Reading
from loader.pipeline.programs import compile_threads

if TYPE_CHECKING:
    from loader.pipeline.sources import ByteSource

MIN_SLOT_BYTES = PAGE_BYTES  # one staging chunk: a page
#: A piece (a chunk sent straight from mapped pages, or a ring slot's) is at most this: a TPU v5e
#: host carried 12-13.5 GB/s with four puts of 16-64 MiB in flight, and less with larger pieces
#: (docs/results.md).
MAX_CHUNK_BYTES = 64 << 20
#: Bytes in flight to the devices at most, whatever the budget: four of the largest pieces keep
#: the link busy, and more only wait (on a TPU v5e host llama3-8b loaded 2.4x slower at a 1 GiB
#: budget than at 256 MiB; docs/results.md).
MAX_FLIGHT_BYTES = 256 << 20
MAX_SCRATCH_BYTES = 8 << 20
#: A thread's scratch (touched only by casts and transforms) is at most this share of the
#: checkpoint, and at least `MIN_SCRATCH_BYTES`: on a small checkpoint a fixed scratch per thread
#: is a visible share of the peak (docs/results.md, "The readers' scratch on a small checkpoint").
SCRATCH_SHARE = 1 / 200
MIN_SCRATCH_BYTES = 1 << 20


@dataclass(frozen=True)
class Sizing:
    """The sizes of one load (see the module docstring), fixed before any reader starts.

    Attributes:
        budget_bytes: the bound on host bytes in flight beyond the model's own (`budget=`).
        threads: reader threads.
        scratch_bytes: each reader's scratch buffer.
        request_bytes: what each reader holds of a request in flight (0: reads land in place).
        ring_slots: slots of the staging ring (0: the load is not staged).
        slot_bytes: bytes a slot.
        chunk_bytes: the largest piece a staged load sends: straight from mapped pages, or
            through a ring slot (`slot_bytes` is the same).
        flight_bytes: the most bytes a staged load has in flight to its devices (0: not staged).
        max_part_bytes: the most one piece of queued work (a part of a job, a run, fused rows)
            reads: `request_bytes` where the source takes its bytes in file order, else
            `math.inf` (the jobs' own part sizes).
        compile_threads: the threads compiling a staged load's device programs (0: not staged).

    Example:
        >>> sizing = Sizing.of(Reading(threads=2), source, staged=False)
        >>> ByteBudget(sizing.budget_bytes, reserved_bytes=sizing.reserved_bytes)
    """

    budget_bytes: int
    threads: int
    scratch_bytes: int
    request_bytes: int = 0
    ring_slots: int = 0
    slot_bytes: int = 0
    chunk_bytes: int = 0
    max_part_bytes: float = math.inf
    compile_threads: int = 0
    flight_bytes: int = 0

    @property
    def staged(self) -> bool:
        return self.ring_slots > 0

    @property
    def ring_bytes(self) -> int:
        return self.ring_slots * self.slot_bytes

    @property
    def reserved_bytes(self) -> int:
        """Set aside for good: every reader's scratch and request (the ring is taken from the
        budget when it is first used)."""
        return (self.scratch_bytes + self.request_bytes) * self.threads

    @classmethod
    def of(cls, reading: Reading, source: ByteSource, *, staged: bool) -> Sizing:
        """The sizes of a load of `source` as `reading` says (`loader.options.Reading`: its
        budget and threads; `staged`: through the staging ring).

        Raises:
            CheckpointError: the budget cannot hold two pages a reader, or one staging chunk a
                slot (naming the least budget that can).
        """
        limit: int = reading.value("budget")
        threads = reading.threads or source.reader_threads(limit, staged=staged)
        check_budget(limit, threads)
        if staged:
            slots, slot_bytes, chunk = check_staging_budget(limit, threads)
            scratch = staged_scratch_bytes(limit, threads)
        else:
            slots, slot_bytes, chunk = 0, 0, 0
            scratch = scratch_bytes(limit, threads, source.total_bytes)
        request = source.request_bytes(limit, threads)
        max_part = request if source.in_file_order and request else math.inf
        compiling = compile_threads(usable_cpus()) if staged else 0
        flight = min(limit, MAX_FLIGHT_BYTES) if staged else 0
        return cls(
            limit, threads, scratch, request, slots, slot_bytes, chunk, max_part, compiling, flight
        )


def check_budget(limit: int, threads: int) -> int:
    """`limit`, or a one-line error where it cannot hold two pages per reader thread."""
    if limit < PAGE_BYTES * threads * 2:
        raise CheckpointError(
            f"budget of {limit} bytes is too small; give at least {2 * PAGE_BYTES * threads}"
        )
    return limit


def scratch_bytes(limit: int, threads: int, checkpoint_bytes: int | None = None) -> int:
    """Each reader thread's scratch buffer (for casts and transforms): a quarter of the budget
    over the threads, at most `MAX_SCRATCH_BYTES`, and with the checkpoint's size known, at most
    `SCRATCH_SHARE` of it over the threads (not under `MIN_SCRATCH_BYTES`)."""
    size = min(MAX_SCRATCH_BYTES, limit // (4 * threads))
    if checkpoint_bytes is not None:
        size = min(size, max(MIN_SCRATCH_BYTES, int(checkpoint_bytes * SCRATCH_SHARE) // threads))
    return size // 64 * 64


def staged_scratch_bytes(limit: int, threads: int) -> int:
    """A reader's scratch on the staged path, where only casts and transforms use it: a
    sixteenth of the budget over the threads, at most `MAX_SCRATCH_BYTES`, at least a page."""
    return max(PAGE_BYTES, min(MAX_SCRATCH_BYTES, limit // (16 * threads)) // 64 * 64)


def _pages(n: int) -> int:
    return n // MIN_SLOT_BYTES * MIN_SLOT_BYTES


def staged_layout(limit: int, threads: int) -> tuple[int, int, int]:
    """(ring slots, slot bytes, chunk bytes) of a staged load with a budget of `limit` bytes:
    the piece is a quarter of what the scratch leaves (at most `MAX_CHUNK_BYTES`), sent straight
    from mapped pages or through a slot of the ring; the ring is half of what the scratch leaves
    (at least two slots, at most two a reader), so that it and a few mapped chunks in flight fit
    together."""
    left = limit - staged_scratch_bytes(limit, threads) * threads
    piece = _pages(min(MAX_CHUNK_BYTES, max(0, left // 4)))
    slots = max(2, min(2 * threads, left // 2 // piece)) if piece else 2
    return slots, piece, piece


def min_staging_budget(threads: int) -> int:
    """The smallest budget whose slots and mapped chunks hold one page each (exact: a
    bisection)."""
    lo, hi = 0, 64 * 2 * threads * MIN_SLOT_BYTES
    while lo < hi:
        mid = (lo + hi) // 2
        _, slot, chunk = staged_layout(mid, threads)
        if min(slot, chunk) >= MIN_SLOT_BYTES:
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_staging_budget(limit: int, threads: int) -> tuple[int, int, int]:
    """The staged load's (slots, slot_bytes, chunk_bytes); a one-line `CheckpointError` naming
    the minimum if the budget cannot hold one page a slot and a mapped chunk."""
    slots, slot_bytes, chunk = staged_layout(limit, threads)
    if min(slot_bytes, chunk) < MIN_SLOT_BYTES:
        raise CheckpointError(
            f"budget of {limit} bytes is smaller than one staging chunk per slot ({slots} slots "
            f"of {MIN_SLOT_BYTES} bytes, {threads} threads); give budget= at least "
            f"{min_staging_budget(threads)} bytes"
        )
    return slots, slot_bytes, chunk
