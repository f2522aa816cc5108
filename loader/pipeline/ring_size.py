"""How a budget is split when the pipeline stages: per-thread scratch, the staging ring, and the
smallest budget that still gives every slot one staging chunk (`MIN_SLOT_BYTES`).

The ring takes half of what the scratch leaves (`2 * threads` slots, so each reader can fill one
slot while its previous one is in transfer), at most `MAX_SLOT_BYTES` a slot; the rest of the
budget stays for what the engine counts besides (a staging buffer of a transformed leaf).
"""

from __future__ import annotations

from loader.errors import CheckpointError

MIN_SLOT_BYTES = 4096  # one staging chunk: a page
MAX_SLOT_BYTES = 64 << 20
MAX_SCRATCH_BYTES = 8 << 20
#: A thread's scratch (touched only by casts and transforms) is at most this share of the
#: checkpoint, and at least `MIN_SCRATCH_BYTES`: two 8 MiB scratches are 3% of GPT-2's 523 MB,
#: which a ported GPT-2 (its `c_attn` slices go through scratch) showed as a 1.03x peak.
SCRATCH_SHARE = 1 / 200
MIN_SCRATCH_BYTES = 1 << 20


def scratch_bytes(limit: int, threads: int, checkpoint_bytes: int | None = None) -> int:
    """Each reader thread's scratch buffer (for casts and transforms): a quarter of the budget
    over the threads, at most `MAX_SCRATCH_BYTES`, and with the checkpoint's size known, at most
    `SCRATCH_SHARE` of it over the threads (not under `MIN_SCRATCH_BYTES`)."""
    size = min(MAX_SCRATCH_BYTES, limit // (4 * threads))
    if checkpoint_bytes is not None:
        size = min(size, max(MIN_SCRATCH_BYTES, int(checkpoint_bytes * SCRATCH_SHARE) // threads))
    return size // 64 * 64


def ring_layout(limit: int, threads: int) -> tuple[int, int]:
    """(slots, slot_bytes) of the staging ring for a budget of `limit` bytes."""
    slots = 2 * threads
    ring = (limit - scratch_bytes(limit, threads) * threads) // 2
    return slots, min(MAX_SLOT_BYTES, ring // slots) // MIN_SLOT_BYTES * MIN_SLOT_BYTES


def min_staging_budget(threads: int) -> int:
    """The smallest budget whose slots hold one staging chunk each (exact: a bisection)."""
    lo, hi = 0, 8 * 2 * threads * MIN_SLOT_BYTES
    while lo < hi:
        mid = (lo + hi) // 2
        if ring_layout(mid, threads)[1] >= MIN_SLOT_BYTES:
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_staging_budget(limit: int, threads: int) -> tuple[int, int]:
    """The ring's (slots, slot_bytes); a one-line `CheckpointError` naming the minimum if the
    budget cannot hold one staging chunk per slot."""
    slots, slot_bytes = ring_layout(limit, threads)
    if slot_bytes < MIN_SLOT_BYTES:
        raise CheckpointError(
            f"budget of {limit} bytes is smaller than one staging chunk per slot ({slots} slots "
            f"of {MIN_SLOT_BYTES} bytes, {threads} threads); give budget= at least "
            f"{min_staging_budget(threads)} bytes"
        )
    return slots, slot_bytes
