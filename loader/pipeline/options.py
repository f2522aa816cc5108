"""The pipelined engine's options: `PipelineOptions`, each value checked once, where it is made.

`PipelineOptions` holds what `pipelined` takes beyond what every strategy does, under the names
`loader.load_model` gives them (`budget`, `staging`, `threads`, `cache_policy`): one frozen object,
so the engine never meets a bad value. What each one does: `budget` and `threads` size the load
(`loader.pipeline.sizing`; `threads=` overrides the byte source's own count, e.g. with the queue
depth that `loadbench probe` found best for the disk: its `cold_read_threads`), `staging` picks
the staging ring (`loader.pipeline.ring`), `cache_policy` is the local files' page-cache policy
(`loader.pipeline.sources.local`).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

from loader.budget import DEFAULT_BUDGET_BYTES
from loader.errors import CheckpointError
from loader.options import check_budget
from loader.vocabulary import AUTO, CACHE_POLICIES

__all__ = ["PipelineOptions"]


@dataclass(frozen=True)
class PipelineOptions:
    """What `pipelined` takes beyond every strategy's arguments, each value checked once, here.

    The field names are `loader.load_model`'s keywords (and `pipelined`'s `OPTIONS`).

    Attributes:
        budget: bound in bytes on the host memory in flight beyond the model's own: the
            readers' scratch, speculative reads, host copies of transformed leaves and the
            staging ring (`loader.budget`; default `DEFAULT_BUDGET_BYTES`, 256 MiB).
        staging: read through the staging ring onto the devices (`loader.pipeline.ring_job`):
            None (default) where the backend does not adopt host buffers (a GPU, a TPU); True
            forces it on the CPU backend (where it is tested); False never.
        threads: reader threads; None (default) sizes them from the CPUs this process may use
            and whether the files are cached (see the module docstring).
        cache_policy: `"auto"` (default: drop a range from the page cache once read only where
            the files and the model do not fit in memory together), `"keep"` or `"dontneed"`
            (drop every range once read; `loader.pipeline.cache_fit`).

    Raises:
        CheckpointError: a value of the wrong type or out of range, in one line naming it.

    Example:
        >>> PipelineOptions(budget=64 << 20, threads=2).cache_policy
        'auto'
    """

    budget: int = DEFAULT_BUDGET_BYTES
    staging: bool | None = None
    threads: int | None = None
    cache_policy: str = AUTO

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", check_budget(self.budget, DEFAULT_BUDGET_BYTES))
        if self.staging is not None and not isinstance(self.staging, bool):
            raise CheckpointError(f"staging={self.staging!r}: give True, False or None")
        if self.threads is not None and (
            isinstance(self.threads, bool)
            or not isinstance(self.threads, Integral)
            or self.threads < 1
        ):
            raise CheckpointError(
                f"threads={self.threads!r}: give a whole number of reader threads, >= 1"
            )
        if self.cache_policy not in CACHE_POLICIES:
            raise CheckpointError(
                f"cache_policy={self.cache_policy!r} is not one of "
                f"{', '.join(map(repr, CACHE_POLICIES))}"
            )
