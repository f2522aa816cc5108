"""A stacked leaf's layers read straight into slices of the leaf's own buffers (`loader.Stack`).

Planning gives each layer of a stacked leaf its own step (`loader.stacking`). Here the leaf gets
its buffers once, one per device region of its placement, in its dtype (the model's own memory,
as an adopt job's, so outside the budget); each layer step becomes an ordinary adopt job whose
pieces are that layer's slices of those buffers (`StackBuffers.layer_pieces`), read by the
reader threads like any other: in place when the slice is contiguous and the dtype the file's,
through the scratch (cast, or a per-layer transform's strided view) otherwise. Once the last
layer is in, the buffers are handed to the devices without a copy (`jobs.placed`): no per-layer
model, no `np.stack`, no second copy of the leaf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loader.format.buffers import aligned
from loader.pipeline.jobs import Piece, placed, region_shape
from loader.pipeline.regions import normalize
from loader.stacking import Stacked


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
