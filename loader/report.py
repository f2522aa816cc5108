"""`LoadReport`: every way a checkpoint and a model can disagree, each listed by parameter path.

By default each problem becomes a `warnings.warn` naming the path; `strict=True` raises one
`MismatchError` listing all of them at once. Nothing is ever loaded in silence.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from loader.errors import MismatchError


class LoadWarning(UserWarning):
    """A checkpoint/model mismatch that a non-strict load reported and went on past."""


@dataclass(frozen=True)
class ShapeMismatch:
    path: str
    file_key: str
    expected: tuple[int, ...]
    found: tuple[int, ...]
    transform: str = ""  # the declared transform applied to `found` (`Chain.__str__`)
    result: str = ""  # what it gave: a shape, or why it cannot apply

    def __str__(self) -> str:
        head = f"{self.path}: model expects shape {self.expected}, file key {self.file_key!r}"
        if self.transform:
            return f"{head} has {self.found}, {self.transform} gives {self.result} (not applied)"
        return f"{head} has {self.found} (not applied)"


@dataclass(frozen=True)
class DtypeCast:
    path: str
    file_dtype: str
    model_dtype: str

    def __str__(self) -> str:
        return (
            f"{self.path}: cast from file dtype {self.file_dtype} to model dtype {self.model_dtype}"
        )


@dataclass(frozen=True)
class ShardingChange:
    path: str
    saved: str
    loaded: str

    def __str__(self) -> str:
        return f"{self.path}: saved with sharding {self.saved}, placed with {self.loaded}"


@dataclass
class LoadReport:
    """What a load found. Empty lists everywhere means the file and the model agree exactly.

    Attributes:
        path: the checkpoint that was loaded.
        loaded: model paths that received a value from the file.
        missing: model paths with no tensor in the file (left at their init, or zeros for an
            abstract target).
        unexpected: file keys that no model path asked for.
        shape_mismatches: never applied; the parameter keeps its init (zeros for abstract targets).
        casts: parameters whose file dtype differs from the model's; cast on the host.
        sharding_changes: parameters placed with a sharding other than the one they were saved with.
        transformed: parameters filled through a declared transform (`loader.Transpose`,
            `Reshape`, `Slice`), read straight into place where the strategy can (`pipelined`).
        device_transposed: of those, the ones whose file bytes travelled contiguously through the
            staging ring and were transposed on their device (a staged load of a `Transpose`,
            alone or with a `Reshape` or a leading `Slice`): the host made no transposing copy.
        staged: parameters whose transform is an opaque callable (or a declared one that is no
            strided view), applied to the whole tensor staged on the host. Neither is a problem.
        stacked: parameters filled from N file keys through a `loader.Stack` (each layer through
            its per-layer transform, if any): read straight into slices of the leaf by
            `pipelined`, assembled on the host by the other strategies. Not a problem either;
            all N file keys count as used.
        inflight_peak_bytes: high-water mark of host bytes in flight beyond the model's own, for
            strategies that bound them (`pipelined`); None otherwise.
        staging_memory: a staged load's host staging memory, "pinned_host" or "pageable"
            (`pipelined` on a backend that does not adopt host buffers, or `staging=True`).
        staging_slots: most staging buffers alive at once in that load.
        device_received_bytes / device_expected_bytes: per device (its `str`), bytes transferred
            to it and the bytes of its regions of the model (a staged load).
    """

    path: str = ""
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    shape_mismatches: list[ShapeMismatch] = field(default_factory=list)
    casts: list[DtypeCast] = field(default_factory=list)
    sharding_changes: list[ShardingChange] = field(default_factory=list)
    transformed: list[str] = field(default_factory=list)
    device_transposed: list[str] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)
    stacked: list[str] = field(default_factory=list)
    inflight_peak_bytes: int | None = None
    staging_memory: str | None = None
    staging_slots: int | None = None
    device_received_bytes: dict[str, int] | None = None
    device_expected_bytes: dict[str, int] | None = None

    @property
    def ok(self) -> bool:
        """True when nothing at all differs between file and model."""
        return not self.problems()

    def problems(self) -> list[str]:
        """One line per problem, each naming its parameter path or file key."""
        lines = [f"{p}: missing from the checkpoint" for p in self.missing]
        lines += [
            f"{k}: in the checkpoint but not in the model (unexpected)" for k in self.unexpected
        ]
        lines += [str(m) for m in self.shape_mismatches]
        lines += [str(c) for c in self.casts]
        lines += [str(s) for s in self.sharding_changes]
        return lines

    def raise_or_warn(self, *, strict: bool) -> None:
        """Raise `MismatchError` with every problem (strict) or warn once per problem."""
        lines = self.problems()
        if not lines:
            return
        if strict:
            listing = "\n  ".join(lines)
            raise MismatchError(
                f"{self.path}: {len(lines)} mismatch(es) between checkpoint and model "
                f"(strict=True):\n  {listing}\n"
                "Fix the checkpoint or the model, map keys with key_map=, "
                "or load with strict=False to accept these.",
                self,
            )
        for line in lines:
            warnings.warn(f"{self.path}: {line}", LoadWarning, stacklevel=3)

    def summary(self) -> str:
        return (
            f"{len(self.loaded)} loaded, {len(self.missing)} missing, "
            f"{len(self.unexpected)} unexpected, {len(self.shape_mismatches)} reshaped, "
            f"{len(self.casts)} cast, {len(self.sharding_changes)} re-sharded"
        )
