"""What the pipelined engine did in one load (`PipelineStats`): for the report and the bench."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PipelineStats:
    """What the engine did: for reports and the bench (`sizing`'s figures beside what it saw).

    Example:
        >>> PipelineStats(budget_bytes=256 << 20, threads=2).read_s
        0.0
    """

    budget_bytes: int = 0
    inflight_peak_bytes: int = 0  # high-water mark of budgeted bytes (scratch included)
    speculative_bytes: int = 0  # read (or prefaulted, strict) before the plan was known
    threads: int = 0
    read_s: float = 0.0  # summed over threads
    cast_s: float = 0.0
    coalesced: int = 0  # tensors read in runs of adjacent small tensors (`coalesce`)
