"""What one child group ran under: the page cache it started from and each limit put on it.

Each part comes from the object that made it: `bench.limits.pagecache.set_cache` gives the
`CacheOutcome`, `MemoryLimit.outcome()` the `LimitOutcome` (`bench run --host-ram`),
`ReadThrottle.outcome()` the `ThrottleOutcome` (`--disk-read-speed`), `CpuLimit.outcome()` the
`CpuOutcome` (`--cpus`). A limit that was not asked
for is None. Every limit part says its `mechanism`, whether it was `enforced` (read back as
asked), and a `note` saying why not, where it was not. `bench.run.rows` writes the parts into each
`PhaseRecord` (fields `cache` .. `disk_read_limit_enforced`, bench/SCHEMA.md). Never imports jax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from bench.limits.cpu import CpuOutcome
from bench.limits.disk_read import ThrottleOutcome
from bench.limits.memory import LimitOutcome
from bench.limits.pagecache import CacheOutcome


class LimitPart(Protocol):
    """What every limit's outcome says: how it was applied, whether it held, and why not."""

    @property
    def mechanism(self) -> str: ...
    @property
    def enforced(self) -> bool: ...
    @property
    def note(self) -> str: ...
    def row_fields(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Situation:
    """The page cache and the limits of one child group (None: that limit was not asked for)."""

    cache: CacheOutcome
    memory: LimitOutcome | None = None
    disk_read: ThrottleOutcome | None = None
    cpus: CpuOutcome | None = None  # `bench run --cpus`

    def limits(self) -> list[LimitPart]:
        """The limits the group ran under, in the order they were applied."""
        parts: list[LimitPart | None] = [self.memory, self.disk_read, self.cpus]
        return [p for p in parts if p is not None]

    def row_fields(self) -> dict[str, Any]:
        """The row's fields that say the page cache and each limit (bench/SCHEMA.md)."""
        fields = self.cache.row_fields()
        for part in self.limits():
            fields |= part.row_fields()
        return fields

    def notes(self) -> list[str]:
        """What the limits had to say (a fallback, a limit that did not read back as asked)."""
        return [p.note for p in self.limits() if p.note]
