"""`LoadReport`: every way a checkpoint and a model can disagree, each listed by parameter path.

By default each problem becomes a `warnings.warn` naming the path, pointed at the caller's line
(the first frame outside this package); `strict=True` raises one `MismatchError` listing all of
them at once. Nothing is ever loaded in silence. What a caller declared expected (ignored keys,
allowed casts: `loader.planning.policy`) is listed too, but is no problem.
"""

from __future__ import annotations

import enum
import os
import sys
import warnings
from dataclasses import dataclass, field

from loader.errors import MismatchError
from loader.options import Share
from loader.remote.ranges import RemoteStats

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: What an abstract target's leaf holds when nothing was loaded into it.
LEFT_AT_ZEROS = "left at zeros (abstract target: no initial value)"
LEFT_AT_INIT = "left at the model's initial value"


class LoadWarning(UserWarning):
    """A checkpoint/model mismatch that a non-strict load reported and went on past."""


def caller_stacklevel() -> int:
    """The `stacklevel` that makes a warning issued by this package's caller of this function
    point at the first frame outside the `loader` package (the user's line), whichever strategy
    and helpers are between (Python 3.11 has no `skip_file_prefixes`)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


class CastKind(enum.Enum):
    """What a dtype change is (`loader.placement.casts.cast_kind`)."""

    FLOAT = "float"  # float -> float: a rounding, expected under casts="allow"
    INTEGER = "integer"  # integer -> integer: exact, the values are checked during the read
    KIND = "change of kind"  # integer <-> float, bool: always a mismatch
    KEY = "prng key"  # a PRNG key's data or impl differs


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
    """A leaf read in one dtype and held in another.

    Attributes:
        kind: what the cast is (`CastKind`).
        expected: not a problem: an exact integer cast (values checked), or a float cast under
            `casts="allow"`.
    """

    path: str
    file_dtype: str
    model_dtype: str
    kind: CastKind = CastKind.FLOAT
    expected: bool = False

    def __str__(self) -> str:
        line = (
            f"{self.path}: cast from file dtype {self.file_dtype} to model dtype {self.model_dtype}"
        )
        if self.kind is CastKind.KIND:
            return f"{line} changes the kind of value (not applied)"
        if self.kind is CastKind.INTEGER:
            return f"{line} (integer: every value checked to fit)"
        return line


@dataclass(frozen=True)
class MissingKey:
    """How a missing model path was looked for, and the nearest file key that exists."""

    path: str
    file_key: str  # the file key looked for
    entry: str = ""  # the key_map entry that named it ("" when none did)
    closest: str = ""  # the closest existing file key ("" when none is close)

    def __str__(self) -> str:
        line = f"{self.path}: missing from the checkpoint (looked for file key {self.file_key!r}"
        line += f", from key_map entry {self.entry})" if self.entry else ")"
        return f"{line}; closest file key: {self.closest!r}" if self.closest else line


@dataclass(frozen=True)
class UnexpectedKey:
    """A file key no model path asked for, and the nearest name the model did ask for."""

    file_key: str
    closest: str = ""  # a file key a model path looked for in vain, or a model path

    def __str__(self) -> str:
        line = f"{self.file_key}: in the checkpoint but not in the model (unexpected)"
        return (
            f"{line}; closest name the model asks for: {self.closest!r}" if self.closest else line
        )


@dataclass(frozen=True)
class UnusedEntry:
    """A key_map entry whose model key is no path of the model."""

    model_key: str
    file_key: str
    closest: str = ""  # the closest model path

    def __str__(self) -> str:
        line = (
            f"key_map entry {self.model_key!r} -> {self.file_key!r}: no model path "
            f"{self.model_key!r}"
        )
        return f"{line}; closest model path: {self.closest!r}" if self.closest else line


@dataclass(frozen=True)
class UnmatchedIgnore:
    """An `ignore_unexpected` / `ignore_missing` pattern that matched nothing."""

    option: str  # "ignore_unexpected" | "ignore_missing"
    pattern: str

    def __str__(self) -> str:
        what = "file key left unexpected" if self.option == "ignore_unexpected" else "missing path"
        return f"{self.option} pattern {self.pattern!r} matched no {what}"


@dataclass(frozen=True)
class ShardingChange:
    path: str
    saved: str
    loaded: str

    def __str__(self) -> str:
        return f"{self.path}: saved with sharding {self.saved}, placed with {self.loaded}"


@dataclass(frozen=True)
class ShareStats:
    """How a `sharded` load shared the checkpoint between processes (`LoadReport.share`;
    `loader.sharded.share` chooses and carries it out).

    Attributes:
        asked: what `share=` asked (`auto` by default).
        mode: what the load did: `regions` or `bytes`.
        reason: why (for `auto`: the figures it chose on).
        block_tensors / region_tensors / whole_tensors: the tensors read as a leading-axis
            block and resharded, as this process's own index ranges, and whole.
        exchanged_bytes: the bytes of this process's distinct index ranges (as loaded, after any
            cast) that it did not read: received from other processes over the interconnect
            by XLA's collectives (0 in `regions` mode). What the collectives send may be more.
    """

    asked: Share
    mode: Share
    reason: str
    block_tensors: int = 0
    region_tensors: int = 0
    whole_tensors: int = 0
    exchanged_bytes: int = 0

    def __str__(self) -> str:
        return (
            f"share={self.mode.value} (asked {self.asked.value}; {self.reason}): "
            f"{self.block_tensors} tensors as blocks resharded, {self.region_tensors} by "
            f"regions, {self.whole_tensors} whole; {self.exchanged_bytes} bytes exchanged"
        )


@dataclass
class LoadReport:
    """What a load found. Empty lists everywhere means the file and the model agree exactly.

    Attributes:
        path: the checkpoint that was loaded.
        loaded: model paths that received a value from the file.
        missing: model paths with no tensor in the file (left at their init, or zeros for an
            abstract target: `left_at` says which).
        unexpected: file keys that no model path asked for.
        ignored: file keys (unexpected) and model paths (missing) that the caller declared
            (`ignore_unexpected` / `ignore_missing`): listed, not reported.
        unmatched_ignores: declared patterns that matched nothing (reported: a typo).
        missing_keys / unexpected_keys: the same names with how they were looked for and the
            closest existing name (what the report's lines say).
        unused_key_map: key_map entries whose model key is no path of the model.
        shape_mismatches: never applied; the parameter keeps its init (zeros for abstract targets).
        casts: parameters whose dtype differs from the model's (after any transform); cast on the
            host, or on the device (`device_cast`). A reported problem unless `expected` (an
            exact integer cast, or a float cast under `casts="allow"`).
        device_cast: of those, the ones whose file bytes were sent as stored and converted on
            their device (a staged load of a float leaf of at least a mebibyte from a local file:
            `loader.pipeline.ring_job.cast_shapes`).
        left_at: what a leaf that was not loaded holds (`LEFT_AT_ZEROS` on an abstract target).
        sharding_changes: parameters placed with a sharding other than the one they were saved with.
        transformed: parameters filled through a declared transform (`loader.Transpose`,
            `Reshape`, `Slice`), read straight into place where the strategy can (`pipelined`).
        device_transposed: of those, the ones whose file bytes travelled contiguously through the
            staging ring and were transposed on their device (a staged load of a `Transpose`,
            alone or with a `Reshape` or a leading `Slice`): the host made no transposing copy.
        transfer_transposed: of those, the ones sent to their device as strided views of the
            file's mapped pages, which the device runtime transposed while copying them (a staged
            load of such a transpose from a local file without a cast): no transposing copy by
            the loader and no program on the device.
        staged: parameters whose transform is an opaque callable (or a declared one that is no
            strided view), applied to the whole tensor staged on the host. Neither is a problem.
        stacked: parameters filled from N file keys through a `loader.Stack` (each layer through
            its per-layer transform, if any): read straight into slices of the leaf by
            `pipelined`, assembled on the host by the other strategies. Not a problem either;
            all N file keys count as used.
        dequantized: parameters made from a quantized layout (`loader.Dequantize`,
            `loader.Unpack`, `loader.DequantizeMXFP4`): their file tensors sent as stored and
            dequantized on the device by `pipelined`, on the host by the other strategies.
        inflight_peak_bytes: high-water mark of host bytes in flight beyond the model's own, for
            strategies that bound them (`pipelined`; `sharded`: the bytes read ahead); None
            otherwise.
        over_budget: the tensors a `sharded` load read ahead whole in one region larger than
            `budget=` (each alone, nothing else held; a region is not read in parts), so
            `inflight_peak_bytes` is over the budget; the load warns once, naming the budget
            that would hold them. Empty where the budget held (and for other strategies).
        staging_memory: a staged load's host staging memory (`pipelined` on a backend that does
            not adopt host buffers, or `staging=True`): "mapped" where every chunk went straight
            from the file's mapped pages, "pageable" where some went through the staging ring.
        staging_slots: most staging buffers alive at once in that load.
        device_programs: programs a staged load compiled to assemble or transpose leaves on their
            devices (once per shape; none for leaves sent whole: `loader.pipeline.programs`).
        device_received_bytes / device_expected_bytes: per device (its `str`), bytes transferred
            to it and the bytes of its regions of the model (a staged load).
        device_resent_bytes: per device, the bytes of `device_received_bytes` beyond its regions
            by design: the rows where a leaf's last chunk overlaps the one before it (chunks of
            one shape need one assembling program, `loader.pipeline.ring_chunks.even_chunks`),
            and the assembling updates' offsets (int32 scalars, `loader.pipeline.programs`).
        remote: a remote load's requests, bytes and concurrency (`loader.remote`); else None.
        share_bytes: a `sharded` or `sharded-dir` load: the bytes of this process's distinct
            index ranges, which it read (its share of the checkpoint); in `bytes` mode
            (`share`), the bytes it read: its leading-axis blocks and what fell back to regions.
            None for other strategies.
        share: a `sharded` load: how the processes shared the checkpoint (`regions` or `bytes`,
            asked or chosen by `auto`, and why), the tensors read each way and `exchanged_bytes`,
            the bytes this process's devices hold that it did not read (received over the
            interconnect); `ShareStats`. None for other strategies.
    """

    path: str = ""
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    unmatched_ignores: list[UnmatchedIgnore] = field(default_factory=list)
    missing_keys: list[MissingKey] = field(default_factory=list)
    unexpected_keys: list[UnexpectedKey] = field(default_factory=list)
    unused_key_map: list[UnusedEntry] = field(default_factory=list)
    shape_mismatches: list[ShapeMismatch] = field(default_factory=list)
    casts: list[DtypeCast] = field(default_factory=list)
    device_cast: list[str] = field(default_factory=list)
    sharding_changes: list[ShardingChange] = field(default_factory=list)
    transformed: list[str] = field(default_factory=list)
    device_transposed: list[str] = field(default_factory=list)
    transfer_transposed: list[str] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)
    stacked: list[str] = field(default_factory=list)
    dequantized: list[str] = field(default_factory=list)
    inflight_peak_bytes: int | None = None
    over_budget: list[str] = field(default_factory=list)
    staging_memory: str | None = None
    staging_slots: int | None = None
    device_programs: int | None = None
    device_received_bytes: dict[str, int] | None = None
    device_expected_bytes: dict[str, int] | None = None
    device_resent_bytes: dict[str, int] | None = None
    left_at: str = LEFT_AT_INIT
    remote: RemoteStats | None = None
    share_bytes: int | None = None
    share: ShareStats | None = None

    @property
    def ok(self) -> bool:
        """True when nothing at all differs between file and model."""
        return not self.problems()

    def problems(self) -> list[str]:
        """One line per problem, each naming its parameter path or file key."""
        looked = {m.path: str(m) for m in self.missing_keys}
        lines = [
            f"{looked.get(p, f'{p}: missing from the checkpoint')}; {self.left_at}"
            for p in self.missing
        ]
        found = {u.file_key: str(u) for u in self.unexpected_keys}
        lines += [str(found.get(k, UnexpectedKey(k))) for k in self.unexpected]
        lines += [f"{m}; {self.left_at}" for m in self.shape_mismatches]
        lines += [str(c) for c in self.casts if not c.expected]
        lines += [str(s) for s in self.sharding_changes]
        lines += [str(u) for u in self.unused_key_map]
        lines += [str(u) for u in self.unmatched_ignores]
        return lines

    def raise_or_warn(self, *, strict: bool) -> None:
        """Raise `MismatchError` with every problem (strict) or warn once per problem, each
        warning pointed at the caller's line outside the loader."""
        lines = self.problems()
        if not lines:
            return
        if strict:
            listing = "\n  ".join(lines)
            raise MismatchError(
                f"{self.path}: {len(lines)} mismatch(es) between checkpoint and model "
                f"(strict=True):\n  {listing}\n"
                "Fix the checkpoint or the model, map keys with key_map=, declare what is "
                "expected with ignore_unexpected= / ignore_missing= / casts='allow', "
                "or load with strict=False to accept these.",
                self,
            )
        level = caller_stacklevel()
        for line in lines:
            warnings.warn(f"{self.path}: {line}", LoadWarning, stacklevel=level)

    def summary(self) -> str:
        return (
            f"{len(self.loaded)} loaded, {len(self.missing)} missing, "
            f"{len(self.unexpected)} unexpected, {len(self.shape_mismatches)} reshaped, "
            f"{len(self.casts)} cast, {len(self.sharding_changes)} re-sharded, "
            f"{len(self.ignored)} ignored"
        )
