"""The plan's types: what planning reads of a checkpoint (`Source`) and what it gives an executor.

`loader.planning.match.plan_load` turns a model and a `Source` into a `LoadPlan`: one `Step` per
leaf to fill (a stacked leaf, `loader.Stack`, is a `Stacked` group and one `Step` per layer, each
a `StackLayer`), the leaves left alone, the report of every mismatch, and one `PlanEntry` per
model path and unused file key (`loader.plan`'s table). Every executor reads the steps; nothing
here plans, reads or places, so the planner, the stacking checks and every executor import these
types from here, and none of them imports another to reach them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from jax.sharding import Sharding

from loader.format import TensorMeta
from loader.phases import NULL_PROBE, Probe
from loader.placement.leaves import Leaf
from loader.planning.keys import Transform
from loader.report import LoadReport
from loader.transforms import Stack
from loader.transforms.quant import Quantized

if TYPE_CHECKING:
    from loader.remote.ranges import RemoteStats


class Source(Protocol):
    """What planning reads of a checkpoint: keys, each tensor's `TensorMeta`, the metadata; and
    what the load sequence reports of it (`remote_stats`)."""

    @property
    def path(self) -> Path | str: ...  # a URL for a remote source (`loader.remote`)

    def keys(self) -> list[str]: ...

    def __contains__(self, key: str) -> bool: ...

    def info(self, key: str) -> TensorMeta: ...

    def file_of(self, key: str) -> Path | str: ...

    def file_offset(self, key: str) -> int: ...

    @property
    def metadata(self) -> dict[str, str]: ...

    def remote_stats(self) -> RemoteStats | None:
        """A remote checkpoint's requests and bytes so far (`LoadReport.remote`); None for a
        local one."""
        ...

    def finish_reads(self) -> None:
        """After every read of the load, before the model is returned: check what only the end
        can (a remote file's sha256); raise `CheckpointError` where it fails."""
        ...


@dataclass
class Step:
    """One leaf to fill from one file key (with an optional host transform).

    A layer of a stacked leaf (`loader.Stack`) is a step like any other: its leaf is one layer's
    (`loader.planning.stacking`), its transform the per-layer one, and `layer` says which layer of
    which stacked leaf it fills.
    """

    leaf: Leaf
    file_key: str
    transform: Transform | None
    sharding: Sharding | None  # concrete sharding to place with; None for a Python scalar
    layer: StackLayer | None = None

    def placement(self) -> Sharding:
        """The concrete sharding of an array or PRNG leaf (only a Python scalar has none)."""
        assert self.sharding is not None, f"{self.leaf.where}: a scalar leaf has no placement"
        return self.sharding


@dataclass
class LoadPlan:
    """What to read, in file order, and what to leave alone (reported).

    `stacked` holds the stacked leaves; each has one step per layer in `steps`; `quantized` the
    leaves made from a quantized layout, each with one step per file tensor it reads. `entries`
    says, per model path (in model order) then per unused file key, what the load does with it.
    """

    steps: list[Step] = field(default_factory=list)
    stacked: list[Stacked] = field(default_factory=list)
    quantized: list[QuantGroup] = field(default_factory=list)
    skipped: list[Leaf] = field(default_factory=list)
    report: LoadReport = field(default_factory=LoadReport)
    entries: list[PlanEntry] = field(default_factory=list)


@dataclass(frozen=True)
class PlanEntry:
    """What a load does with one model path or one file key (a row of `loader.plan`'s table).

    Attributes:
        path: the model path ("" for a file key no model path asks for).
        shape / dtype: the model's (dtype as its safetensors name; "" when there is no leaf).
        file_key / file_shape / file_dtype: the tensor read ("" and () when there is none).
        transform: the key_map transform (`str` of a declared chain, or the callable's name).
        verdict: one of `loader.vocabulary.VERDICTS`.
        note: why (the pattern that ignored it, the closest name, the cast).
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    file_key: str
    file_shape: tuple[int, ...]
    file_dtype: str
    transform: str
    verdict: str
    note: str = ""


@dataclass
class Stacked:
    """One stacked leaf of a plan: its `Stack`, placement, and what is filled of it so far.

    Attributes:
        leaf: the model's leaf (the whole stack).
        stack: its key_map entry (keys, axis, per-layer transform).
        sharding: the concrete sharding the leaf is placed with.
        host: the host buffer a staging executor assembles the leaf in (allocated on first use).
        written: the layers copied into `host` so far.
        placed: True once the leaf holds its value (`pipelined` places it itself).
    """

    leaf: Leaf
    stack: Stack
    sharding: Sharding
    host: np.ndarray | None = None
    written: set[int] = field(default_factory=set)
    placed: bool = False

    @property
    def layer_ndim(self) -> int:
        return len(self.leaf.shape) - 1

    @property
    def axis(self) -> int:
        return self.stack.leaf_axis(self.layer_ndim)

    def layer_index(self, i: int) -> tuple[slice | int, ...]:
        """The index of layer `i` in the whole leaf."""
        return self.stack.index(i, self.layer_ndim)


@dataclass(frozen=True)
class StackLayer:
    """What a layer step fills: layer `index` of `group`."""

    group: Stacked
    index: int


@dataclass
class QuantGroup:
    """One leaf made from a quantized layout (`loader.transforms.quant`): its file tensors are
    read as parts (one step each, of the tensor's own shape and dtype), then dequantized.

    Attributes:
        leaf: the model's leaf.
        layout: its key_map entry (`Dequantize`, `Unpack`, `DequantizeMXFP4`).
        sharding: the concrete sharding the leaf is placed with.
        infos: each role's file tensor (`weight`, `scale`, ...).
        on_device: dequantize on the device the parts were sent to (`pipelined`), not the host.
        values: the parts read so far, by role (dropped once the leaf is made).
        unchecked: after a device dequantization, what the end of the load checks of the parts'
            values (`loader.planning.quantized.check_device_values`).
        placed: True once the leaf holds its value.
        probe: the load's probe, whose `dequantize` phase times each leaf made (`run_load`).
    """

    leaf: Leaf
    layout: Quantized
    sharding: Sharding
    infos: dict[str, TensorMeta]
    on_device: bool = False
    values: dict[str, object] = field(default_factory=dict)
    unchecked: dict[str, object] = field(default_factory=dict)
    placed: bool = False
    probe: Probe = NULL_PROBE

    @property
    def part_keys(self) -> list[str]:
        """The part leaves' keys (what the executors report loaded in its stead)."""
        return [f"{self.leaf.key}<{role}>" for role in self.infos]

    @property
    def file_bytes(self) -> int:
        """The bytes it moves: its file tensors as stored."""
        return sum(info.nbytes for info in self.infos.values())
