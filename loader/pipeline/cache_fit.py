"""Which tensors `pipelined` drops from the page cache once it has read them (`cache_policy=`).

- `"keep"`: none; the page cache is left as the kernel keeps it.
- `"dontneed"`: every one (and, at close, what read-ahead left cached).
- `"auto"` (the default): only as many as will not fit anyway. Once the plan is known, the model
  bytes still to be allocated in host RAM (`host_bytes`: none for leaves on an accelerator) and
  the memory available now (`available_bytes`: `MemAvailable`, or less where this process's
  memory cgroup allows less) give the page cache that can stay:
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
import math
import os
from collections.abc import Iterable, Mapping

import numpy as np

from loader.format import TensorInfo
from loader.format.source import CheckpointSource
from loader.host import available_bytes
from loader.leaves import Leaf
from loader.pipeline.jobs import device_regions, region_shape
from loader.pipeline.order import file_order
from loader.pipeline.speculation import Speculated
from loader.pipeline.staging import backend_adopts_host_buffers, host_memory
from loader.planning import Step
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


def _leaf_bytes(leaf: Leaf) -> int:
    shape, dtype = leaf.stored_shape_dtype()
    return math.prod(shape) * np.dtype(dtype).itemsize


def host_bytes(step: Step) -> int:
    """The host RAM a step's leaf takes once loaded: its bytes on each addressable device whose
    memory is the host's (the CPU backend's; a leaf replicated over 8 such devices, 8 times),
    nothing on an accelerator's (the staged path leaves only its ring on the host)."""
    nbytes = _leaf_bytes(step.leaf)
    if step.sharding is None:  # a Python scalar
        return nbytes
    size = math.prod(step.leaf.shape)
    if size == 0:
        return 0
    on_host = sum(
        math.prod(region_shape(region))
        for device, region in device_regions(step)
        if host_memory(device)
    )
    return nbytes * on_host // size


def drops_for(
    policy: str, steps: list[Step], source: CheckpointSource, speculated: Mapping[str, Speculated]
) -> set[str]:
    """`dropped_tensors` for a plan: the tensors the steps read, in the readers' order, less those
    read speculatively before the plan (already read and left cached, so counted as kept)."""
    keys = {step.file_key for step in steps}
    read = {k for k in keys if k in speculated and speculated[k].filled}
    order = file_order([source.info(k) for k in keys - read], source.file_of)
    if policy != AUTO:  # the model's size matters only to "auto"
        return dropped_tensors(policy, order, 0, None)
    kept = sum(source.info(k).nbytes for k in read)
    model = sum(host_bytes(step) for step in steps)
    available = available_bytes()
    return dropped_tensors(policy, order, model + kept, available)
