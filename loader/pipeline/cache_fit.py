"""Which tensors `pipelined` drops from the page cache once it has read them (`cache_policy=`).

- `"keep"`: none; the page cache is left as the kernel keeps it.
- `"dontneed"`: every one (and, at close, what read-ahead left cached).
- `"auto"` (the default): only as many as will not fit anyway. Once the plan is known, the model
  bytes still to be allocated in host RAM (`loader.pipeline.jobs.host_bytes`: none for leaves on
  an accelerator) and the memory available now (`available_bytes`: `MemAvailable`, or less where
  this process's memory cgroup allows less) give the page cache that can stay:
  `keep = available - model - reserve`. Where the files fit in that, nothing is dropped (as
  `"keep"`). Otherwise the tensors read first (in the readers' order) are dropped behind the
  readers until what is left to read fits: the last `keep` bytes stay cached for the next load.

Why: where file and model do not fit in RAM together, the kernel evicts file pages while the model
grows, least recently used first. Pages not read yet (cached by an earlier load, or by a warm-up
read) are older than the ones this load has just read and will not read again, so they go first,
and the load then reads them back from the disk. `"auto"` keeps what will fit, so the next load
finds it cached too; `"dontneed"` reads the whole file from the disk on every load (the figures
this was chosen on: docs/results.md, "The page-cache policy").

Before the model is known, the files get a read-ahead hint at open (`read_ahead`) only where they
will stay cached (`prefetch`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from loader.format import TensorInfo
from loader.host import available_bytes
from loader.pipeline.ring import backend_adopts_host_buffers
from loader.vocabulary import AUTO, DONTNEED, KEEP

RESERVE_FRACTION = 0.05  # of the memory available: left to other processes and the allocator
MIN_RESERVE_BYTES = 256 << 20


def dropped_tensors(
    policy: str, order: Iterable[TensorInfo], model_bytes: int, available: int | None
) -> set[str]:
    """The names of the tensors (in `order`, the readers' order) to drop once read."""
    order = list(order)
    if policy == DONTNEED:
        return {info.name for info in order}
    if policy != AUTO or available is None:
        return set()
    reserve = max(MIN_RESERVE_BYTES, int(RESERVE_FRACTION * available))
    keep = max(0, available - model_bytes - reserve)
    head = sum(info.nbytes for info in order) - keep  # bytes to drop before the rest fits
    dropped: set[str] = set()
    for info in order:
        if head <= 0:
            break
        dropped.add(info.name)
        head -= info.nbytes
    return dropped


def prefetch(policy: str, file_bytes: int) -> bool:
    """Whether to hint the kernel to read the files ahead at open (before the model is known): with
    `"keep"`, and with `"auto"` where the files fit in the memory available beside a model as
    large (on the CPU backend, whose device arrays are host memory; on an accelerator, alone)."""
    if policy != AUTO:
        return policy == KEEP
    available = available_bytes()
    model = file_bytes if backend_adopts_host_buffers() else 0
    return available is not None and file_bytes + model <= available


def read_ahead(fds: Iterable[int], policy: str, file_bytes: int) -> None:
    """Hint the kernel to read the open files ahead (`POSIX_FADV_WILLNEED`) where `prefetch` says
    so. Linux reads only a file's head for it (its read-ahead window), not the whole file; a file
    smaller than that may be cached whole at once, so the readers' count (cold or warm) is decided
    before the hint."""
    for fd in fds if prefetch(policy, file_bytes) else ():
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)


def drops(policy: str, order: list[TensorInfo], resident_bytes: int) -> set[str]:
    """The tensors to drop from the page cache once read, for a plan (`dropped_tensors`): `order`
    is what the readers will read, in their order; `resident_bytes` what the host will hold
    beside it (the model's host bytes, and file bytes read before the plan and left cached). The
    memory available is read only for `"auto"`."""
    available = available_bytes() if policy == AUTO else None
    return dropped_tensors(policy, order, resident_bytes, available)
