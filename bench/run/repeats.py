"""How many repeats a configuration gets: at least `--repeats`, then more until its time is clear.

Every configuration (strategy, model, layout, page cache, route) first runs `--repeats` times,
interleaved with the others (A B C A B C), as before. Then further rounds, interleaved the same
way, run only the configurations whose paired ratio (`bench.intervals`) is not yet
settled, a 95% confidence interval within +-5%, until each is settled, has run
`--max-repeats` times, or has spent its `--repeat-budget` of wall time (its children, their
reference passes and their start-up, added up; not the machine probe or a checkpoint's format,
which whichever task comes first runs for all): a slow strategy such as `eager` stops at the
minimum, where a one-second one can afford ten. A configuration that failed a repeat (crashed,
out of memory, wrong) is never repeated further: a failure is not noise to average away. The
defaults come from measurements on this project's 2-core development VM (`docs/bench.md`,
"How many repeats"). Never imports jax.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from bench.errors import BenchError
from bench.intervals import interval

DEFAULT_MIN_REPEATS = 3
DEFAULT_MAX_REPEATS = 10
DEFAULT_REPEAT_BUDGET_S = 30.0


@dataclass(frozen=True)
class RepeatPolicy:
    """`--repeats` (the minimum, always run), `--max-repeats` (the cap) and `--repeat-budget`
    (the wall seconds one configuration's repeats may take in all: no repeat is added that would
    take it past them, at its repeats' mean time so far)."""

    min_repeats: int = DEFAULT_MIN_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS
    budget_s: float = DEFAULT_REPEAT_BUDGET_S

    def __post_init__(self) -> None:
        if self.min_repeats < 1:
            raise BenchError(f"--repeats {self.min_repeats}: give at least 1")
        if self.max_repeats < self.min_repeats:
            raise BenchError(
                f"--max-repeats {self.max_repeats} is below --repeats {self.min_repeats}: the "
                "cap must be at least the minimum (e.g. --repeats 3 --max-repeats 10)"
            )
        if self.budget_s < 0:
            raise BenchError(f"--repeat-budget {self.budget_s:g}: give 0 s or more, e.g. 30s")


@dataclass
class Tally:
    """What one configuration's repeats gave so far: paired ratios of its ok repeats, their
    reference drifts, the repeats run, the seconds spent, and whether one failed."""

    ratios: list[float] = field(default_factory=list)
    drifts: list[float | None] = field(default_factory=list)
    runs: int = 0
    elapsed_s: float = 0.0
    failed: bool = False

    def add(self, ratio: float | None, drift: float | None, ok: bool, elapsed_s: float) -> None:
        """One repeat: its paired ratio (None where no reference stood beside it)."""
        self.runs += 1
        self.elapsed_s += elapsed_s
        if not ok:
            self.failed = True
        elif ratio is not None:
            self.ratios.append(ratio)
            self.drifts.append(drift)

    def wants_more(self, policy: RepeatPolicy) -> bool:
        """Under the cap and the budget, with no failure, and its interval not yet settled (a
        configuration whose repeats carry no paired ratio is never extended: nothing to
        settle)."""
        if self.failed or self.runs >= policy.max_repeats or self.runs < policy.min_repeats:
            return False
        if self.elapsed_s + self.elapsed_s / self.runs > policy.budget_s:
            return False
        iv = interval(self.ratios)
        return iv is not None and len(self.ratios) == self.runs and not iv.settled


Key = TypeVar("Key", bound=Hashable)


@dataclass
class Tallies(Generic[Key]):
    """Every configuration's tally, by its key."""

    policy: RepeatPolicy
    by_key: dict[Key, Tally] = field(default_factory=dict)

    def of(self, key: Key) -> Tally:
        """The tally of `key` (a new one the first time)."""
        return self.by_key.setdefault(key, Tally())

    def wanting(self, keys: list[Key]) -> list[Key]:
        """Of `keys` (in run order), those that want another repeat."""
        return [k for k in keys if self.of(k).wants_more(self.policy)]
