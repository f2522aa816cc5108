"""How a `sharded` load splits the checkpoint between processes: by regions, or by bytes.

- `Share.REGIONS`: each process reads its own index ranges of every tensor (what its devices
  hold) and nothing moves between processes. A column-split tensor is then one run per file row
  for every process: over a link, many requests (the read plan merges what it can,
  `loader.sharded.read_plan`), and a replicated tensor is read by every process.
- `Share.BYTES`: each process reads one contiguous leading-axis block of each tensor (rows
  `[p * c, (p + 1) * c)` for process `p` of `P`, `c = ceil(R / P)`, the last fewer: one run, so
  one read or a few large requests), places it on its own devices, and JAX's own resharding (a
  jitted program with the target `out_shardings`) moves the bytes to where the model's sharding
  wants them, over the interconnect (gloo between CPU processes, NVLink / ICI on accelerators).
  A process reads about `1 / P` of the checkpoint; `exchanged_bytes` (the bytes its devices hold
  that it did not read) are what it received from the others. A PRNG key, a tensor whose target
  already puts each process's rows on it (nothing to exchange), or one XLA would reshard with
  arithmetic (`loader.sharded.blocks.plan_block`) is read by regions; a scalar or a transform
  needing the whole tensor is read whole.
- `Share.AUTO` (the default): regions for one process or a local file (a run there is one
  `preadv`, with no round trip to save); over a URL with several processes, bytes when any
  process's regions would cost more requests than the issue's bound (`request_bound`: its share /
  8 MiB + its tensors + 10) or receive more than `AUTO_OVER_BYTES` times what bytes would (the
  gaps its read plan reads through, and replicated tensors read by every process), else
  regions. `ShareStats.reason` says which.

`mode_of` makes the choice (for `auto`, on every process's `ProcessFigures`, gathered with
`every_process` so that every process chooses the same); `loader.sharded.load.Slices` carries the
mode out; `loader.report.ShareStats` (in `LoadReport.share`) says what was asked, what was chosen
and why, the tensors read each way and the bytes exchanged. This module imports no jax at module
level: the arithmetic here is unit-tested alone.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from loader.options import Share, Sharing
from loader.report import ShareStats
from loader.sharded.layout import Region, extents, intersect
from loader.sharded.read_plan import PlanFigures
from loader.sharded.reads import PlannedRead, total_bytes

__all__ = ["DEFAULT_SHARE", "Share", "ShareStats", "check_share", "choose", "mode_of"]

#: The bytes one planned request carries (`loader.remote.ranges.CHUNK_BYTES`), in the bound on
#: requests per process: its share / this + its tensors + 10.
BOUND_CHUNK_BYTES = 8 << 20
#: The most a bytes-mode read plan reads over the process's bytes (the gaps of the tensors that
#: fall back to regions, read through to save requests): the issue's bound on bytes received in
#: bytes mode, against `max_over_read` (1.5 by default) by regions.
BYTES_MAX_OVER_READ = 1.01
#: `auto` reads by bytes where regions would receive more than this times what bytes reads: the
#: gaps its read plan reads through (up to `max_over_read`, 1.5x, by default) and the replicated
#: tensors every process reads cost link time, which bytes mode spends on the interconnect instead
#: (docs/results.md, "Several processes at the link's speed").
AUTO_OVER_BYTES = 1.05


DEFAULT_SHARE = Share.AUTO


def check_share(value: str | Share | None) -> Share:
    """`share=` as a `Share` (None: `DEFAULT_SHARE`), or a one-line error naming the choices.

    Example:
        >>> check_share("bytes")
        <Share.BYTES: 'bytes'>
        >>> check_share(None)
        <Share.AUTO: 'auto'>
    """
    return Share(Sharing(share=value).value("share"))


class Way(enum.Enum):
    """How one tensor is read in a process."""

    WHOLE = "whole"  # a scalar, or a transform that needs the whole tensor
    REGIONS = "regions"  # this process's own index ranges
    BLOCK = "block"  # a leading-axis block, resharded


def leading_block(shape: tuple[int, ...], processes: int, index: int) -> Region | None:
    """The rows process `index` of `processes` reads of a tensor in bytes mode (the other axes
    whole): `ceil(R / processes)` each, the last ones fewer (or none) where the count does not
    divide the rows; None for a tensor without rows (0-d, or empty).

    Example:
        >>> leading_block((8, 3), 4, 1)
        ((2, 4), (0, 3))
        >>> leading_block((6, 3), 4, 2)
        ((4, 6), (0, 3))
        >>> leading_block((6, 3), 4, 3)
        ((6, 6), (0, 3))
    """
    if not shape or shape[0] == 0:
        return None
    rows = -(-shape[0] // processes)
    start, end = min(index * rows, shape[0]), min((index + 1) * rows, shape[0])
    return ((start, end), *((0, d) for d in shape[1:]))


def elements(region: Region) -> int:
    return math.prod(extents(region))


def exchanged_elements(regions: Iterable[Region], block: Region) -> int:
    """Of the distinct `regions` a process's devices hold, the elements outside `block` (which it
    read): what it receives from the other processes.

    Example:
        >>> exchanged_elements([((0, 4), (0, 2)), ((0, 4), (2, 4))], ((0, 2), (0, 4)))
        8
    """
    total = 0
    for region in set(regions):
        inside = intersect(region, block)
        total += elements(region) - (0 if inside is None else elements(inside))
    return total


def request_bound(share_bytes: int, tensors: int) -> float:
    """The most requests a process's share should take: its share / 8 MiB + its tensors + 10.

    Example:
        >>> request_bound(16 << 20, 3)
        15.0
    """
    return share_bytes / BOUND_CHUNK_BYTES + tensors + 10


@dataclass(frozen=True)
class ProcessFigures:
    """What one process would read by regions, and by bytes, before anything is read."""

    regions_requests: int  # the requests (reads, for a local file) its regions plan makes
    regions_bytes: int  # the bytes of its own index ranges
    regions_tensors: int  # the tensors it reads
    bytes_bytes: int  # the bytes it reads in bytes mode (blocks, and what falls back)
    regions_read_bytes: int = 0  # what its regions plan reads, the gaps read through included

    @classmethod
    def of(
        cls, regions: Sequence[PlannedRead], blocks: Sequence[PlannedRead], planned: PlanFigures
    ) -> ProcessFigures:
        """A process's figures from its planned reads by regions and by bytes, and what its
        regions' read plan would take (`planned`: `loader.sharded.slices.SliceReader.plan_figures`).
        """
        return cls(
            regions_requests=planned.requests,
            regions_bytes=total_bytes(regions),
            regions_tensors=len({read.key for read in regions}),
            bytes_bytes=total_bytes(blocks),
            regions_read_bytes=planned.read_bytes,
        )

    def as_list(self) -> list[int]:
        return [
            self.regions_requests,
            self.regions_bytes,
            self.regions_tensors,
            self.bytes_bytes,
            self.regions_read_bytes,
        ]


def choose(*, processes: int, remote: bool, figures: list[ProcessFigures]) -> tuple[Share, str]:
    """`auto`'s choice and why (the same in every process: `figures` are every process's).

    Example:
        >>> choose(processes=1, remote=True, figures=[])
        (<Share.REGIONS: 'regions'>, 'auto: one process, nothing to exchange')
        >>> f = ProcessFigures(400, 1 << 20, 3, 1 << 20)
        >>> choose(processes=2, remote=True, figures=[f, f])[0]
        <Share.BYTES: 'bytes'>
    """
    if processes == 1:
        return Share.REGIONS, "auto: one process, nothing to exchange"
    if not remote:
        return Share.REGIONS, "auto: a local file (each run is one pread, no round trip to save)"
    for index, f in enumerate(figures):
        bound = request_bound(f.regions_bytes, f.regions_tensors)
        if f.regions_requests > bound:
            return Share.BYTES, (
                f"auto: by regions process {index} would send {f.regions_requests} requests, "
                f"more than its bound of {bound:.0f} (share / 8 MiB + tensors + 10)"
            )
        received = max(f.regions_read_bytes, f.regions_bytes)
        if received > AUTO_OVER_BYTES * f.bytes_bytes:
            return Share.BYTES, (
                f"auto: by regions process {index} would receive {received} bytes, more "
                f"than {AUTO_OVER_BYTES}x the {f.bytes_bytes} it reads by bytes"
            )
    return Share.REGIONS, (
        "auto: by regions every process stays within its request bound and receives at most "
        f"{AUTO_OVER_BYTES}x what it would by bytes"
    )


def every_process(mine: ProcessFigures) -> list[ProcessFigures]:
    """Every process's figures, in process order, `mine` among them (an all-gather: every
    process calls it at the same point of the load)."""
    from jax.experimental import multihost_utils

    row = np.array(mine.as_list(), "<i8").view(np.uint8)
    gathered = np.asarray(multihost_utils.process_allgather(row))
    return [
        ProcessFigures(*np.asarray(r, np.uint8).view("<i8").tolist())
        for r in gathered.reshape(-1, row.size)
    ]


def mode_of(
    asked: Share | None,
    *,
    processes: int,
    remote: bool,
    figures: Callable[[], ProcessFigures],
    gather: Callable[[ProcessFigures], list[ProcessFigures]] = every_process,
) -> tuple[Share, str]:
    """The mode of a load and why: as `asked`, or `auto`'s choice (`choose`) on every process's
    figures (this process's from `figures()`, worked out only when needed, then `gather`ed so
    that every process chooses the same). `asked` None: a sharded directory, read by regions.

    Example:
        >>> mode_of(Share.BYTES, processes=2, remote=True, figures=lambda: f)
        (<Share.BYTES: 'bytes'>, "asked share='bytes'")
    """
    if asked is None:
        return Share.REGIONS, "a sharded directory: each process reads its own slices"
    if asked is not Share.AUTO:
        return asked, f"asked share={asked.value!r}"
    if processes == 1 or not remote:
        return choose(processes=processes, remote=remote, figures=[])
    return choose(processes=processes, remote=remote, figures=gather(figures()))
