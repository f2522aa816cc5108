"""Where one task's seconds went: the runner's steps around its child, and the child's own.

A row's `wall_s` is the load alone; a task costs more: preparing its checkpoint's format, the
machine probe (once per disk and size), the moment reference's passes before and after, setting
the page cache, and the child, whose interpreter starts, imports jax and opens the devices before
it loads and verifies after. On a CPU host the load is a good part of it; on a TPU host every
fresh child spends seconds opening the chip and more verifying a large model than loading it,
which decides how many rows fit in a slot of time (`scripts/device-check.sh` plans by it). `bench
run` prints the split on each task's progress line, so that a slow bench says which step is
slow. Never imports jax.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

PREPARE, PROBE, REFERENCE, PAGE_CACHE, CHILDREN = (
    "prepare",
    "probe",
    "references",
    "page cache",
    "child",
)
#: steps a task pays for others too (the checkpoint's format, the machine probe: once per run),
#: which a configuration's `--repeat-budget` does not count
SHARED = (PREPARE, PROBE)
#: what the child's start is called where the child did not time its own steps
CHILD_START = "start"
#: below this a step is left out of the line (it says nothing about where the time went)
SHOWN_FROM_S = 0.05


@dataclass
class TaskTimes:
    """The runner's steps of one task, in seconds (a step timed twice adds up)."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def timing(self, step: str) -> Iterator[None]:
        """Add the seconds the block takes to `step`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(step, time.perf_counter() - started)

    def add(self, step: str, seconds: float) -> None:
        self.seconds[step] = self.seconds.get(step, 0.0) + seconds

    def own_s(self, total_s: float) -> float:
        """Of `total_s` (the task's seconds), those that were this configuration's own: less the
        `SHARED` steps it happened to run first."""
        return total_s - sum(self.seconds.get(step, 0.0) for step in SHARED)

    def text(self, child_steps: Mapping[str, float] | None = None) -> str:
        """`child 20.1 s (start 16.0, backend ..., load 0.6, verify 3.4); references 0.6 s`: the
        child's seconds split into its own steps (`start`: the interpreter's start and imports
        before its steps, and its exit), then the runner's other steps; steps under
        `SHOWN_FROM_S` left out."""
        parts = []
        for step, seconds in self.seconds.items():
            if seconds < SHOWN_FROM_S:
                continue
            inside = _child_split(seconds, child_steps) if step == CHILDREN else ""
            parts.append(f"{step} {seconds:.1f} s{inside}")
        return "; ".join(parts)


def _child_split(child_s: float, steps: Mapping[str, float] | None) -> str:
    """` (start 16.0, load 0.6, verify 3.4)`, or "" where the child timed no steps."""
    if not steps:
        return ""
    rest = child_s - sum(steps.values())
    named = {CHILD_START: rest, **steps}
    shown = [f"{step} {s:.1f}" for step, s in named.items() if s >= SHOWN_FROM_S]
    return f" ({', '.join(shown)})" if shown else ""
