"""A stacked leaf's layers read straight into slices of the leaf's own buffers (`loader.Stack`).

Planning gives each layer of a stacked leaf its own step (`loader.planning.stacking`). Here the leaf
gets its buffers once, one per device region of its placement, in its dtype (the model's own memory,
as an adopt job's, so outside the budget); each layer step becomes a `LayerJob`: an `AdoptJob` whose
pieces are that layer's slices of those buffers (`StackBuffers.layer_pieces`), read by the reader
threads like any other: in place when the slice is contiguous and the dtype the file's, through the
scratch (cast, or a per-layer transform's strided view) otherwise. Finishing a layer counts it in;
once the last is in, the buffers are handed to the devices without a copy (`jobs.placed`): no
per-layer model, no `np.stack`, no second copy of the leaf.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loader.budget import ByteBudget
from loader.format import TensorInfo
from loader.format.buffers import aligned
from loader.pipeline.jobs import AdoptJob, Piece, placed
from loader.pipeline.regions import Bytes, normalize, region_shape
from loader.pipeline.speculation import Speculated
from loader.planning.plan import LoadPlan, Stacked, Step
from loader.transforms import View


@dataclass
class StackBuffers:
    """The device buffers of one stacked leaf, and how many of its layers are still to read."""

    group: Stacked
    pieces: list[Piece]
    pending: int

    @classmethod
    def allocate(cls, group: Stacked) -> StackBuffers:
        """One buffer per addressable device region of the leaf, in the leaf's dtype."""
        shape, dtype = group.leaf.shape, np.dtype(group.leaf.dtype)
        pieces = []
        for device, index in group.sharding.addressable_devices_indices_map(shape).items():
            assert index is not None, f"{group.leaf.where}: jax gave device {device} no index"
            region = normalize(index, shape)
            pieces.append(Piece(device, region, aligned(region_shape(region), dtype)))
        return cls(group, pieces, len(group.stack.keys))

    def layer_pieces(self, i: int) -> list[Piece]:
        """Layer `i`'s slice of each buffer holding it (its region: the layer's own axes)."""
        axis = self.group.axis
        out = []
        for piece in self.pieces:
            rows = piece.region[axis]
            if rows.start <= i < rows.stop:
                region = (*piece.region[:axis], *piece.region[axis + 1 :])
                dest = piece.dest[(slice(None),) * axis + (i - rows.start,)]
                out.append(Piece(piece.device, region, dest))
        return out

    def layer_done(self) -> None:
        """Count one layer in; after the last, the leaf is placed from its buffers."""
        self.pending -= 1
        if self.pending == 0:
            group = self.group
            group.leaf.variable.set_value(placed(group.leaf.shape, group.sharding, self.pieces))
            group.placed = True
            self.pieces = []


@dataclass(eq=False)
class LayerJob(AdoptJob):
    """One layer of a stacked leaf: an `AdoptJob` into the layer's slices of the leaf's buffers
    (a speculative read is only a source: the slices are the leaf's own); finishing it counts the
    layer in, and the last one places the leaf (`StackBuffers.layer_done`)."""

    stack: StackBuffers = field(kw_only=True)

    @classmethod
    def of_layer(
        cls,
        step: Step,
        info: TensorInfo,
        source: Bytes,
        file: str,
        budget: ByteBudget,
        stack: StackBuffers,
        *,
        view: View | None = None,
        spec: Speculated | None = None,
    ) -> LayerJob:
        """The job of a layer step (`step.layer`) into `stack`'s buffers."""
        assert step.layer is not None, f"{step.leaf.where}: not a layer of a stacked leaf"
        pieces = stack.layer_pieces(step.layer.index)
        held = info.nbytes if spec is not None else 0  # a speculative read: a source only
        return cls(step, info, source, pieces, file, budget, view, held, stack=stack)

    def finish(self, plan: LoadPlan) -> None:
        self.stack.layer_done()
        self.let_go()
