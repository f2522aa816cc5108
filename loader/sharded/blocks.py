"""Bytes mode of the `sharded` load: read a leading-axis block, reshard over the interconnect.

For a tensor read in bytes mode (`loader.sharded.share`), process `p` of `P` reads the rows
`[p * c, min((p + 1) * c, R))` of the file, `c = ceil(R / P)` (`leading_block`: one contiguous
byte run), casts them on the host and puts them on its own devices as one global array whose
sharding splits the leading axis over the processes (`Block.source`: a mesh of the target's
devices as (process, local device), the rows split further over the local devices where they
divide, else the block replicated on each; rows the process count does not divide are padded
with zeros at the end, since a `NamedSharding` splits an axis evenly). One compiled program per
shape, dtype and pair of shardings (`Block.program`: an identity, or the slice that drops the
padding, with the target sharding as `out_shardings`) then has XLA's collectives move each part
to the devices that hold it in the model. Only programs that move data are used: all-to-all,
all-gather, collective-permute; one that would reshard with arithmetic (an all-reduce or a
reduce-scatter, which can change -0.0 and NaN payloads, and which jax issue 40830 reports wrong
over gloo with large chunks) is not, and that tensor is read by regions. The host block is freed
once it is on the devices, and the source array once resharded, so a process holds its block,
not the tensor. The blocks are read ahead (`loader.sharded.slices.ReadAhead`): the next ones
arrive while this one's program compiles and its collectives run.

`plan_block` decides from the global sharding alone, and whether a program is used from the
compiled program alone, the same in every process, so every process makes the same collective
calls in the same order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from loader.phases import CAST, TRANSFER, Probe, substep
from loader.placement.leaves import LeafKind
from loader.placement.materialize import host_cast
from loader.planning.plan import Step
from loader.sharded.layout import Region, index_region, within
from loader.sharded.share import exchanged_elements, leading_block

PROCESSES, LOCAL = "processes", "local"
#: What a resharding program may not contain: collectives that compute (see the docstring).
ARITHMETIC = ("all-reduce", "reduce-scatter")


def source_mesh(sharding: Any) -> Mesh | None:
    """The target's devices as a (process, local device) mesh, or None where they are not spread
    evenly over every process (bytes mode needs each process to hold a block)."""
    by_process: dict[int, list[Any]] = {}
    for device in sharding.device_set:
        by_process.setdefault(device.process_index, []).append(device)
    counts = {len(devices) for devices in by_process.values()}
    if len(by_process) != jax.process_count() or len(counts) != 1:
        return None
    grid = [sorted(by_process[p], key=lambda d: d.id) for p in sorted(by_process)]
    return Mesh(np.array(grid), (PROCESSES, LOCAL))


def source_sharding(mesh: Mesh, rows: int) -> NamedSharding:
    """The leading axis (`rows` per process) split over the processes, and over each one's
    devices where they divide its rows."""
    local = mesh.devices.shape[1]
    return NamedSharding(
        mesh, PartitionSpec((PROCESSES, LOCAL) if rows % local == 0 else PROCESSES)
    )


@dataclass(frozen=True)
class Block:
    """How one tensor goes in bytes mode: the rows per process, the (padded) shape the blocks
    make, their sharding, and what the program that reshards them to the target is made from."""

    rows: int
    padded: tuple[int, ...]
    source: NamedSharding
    length: int  # the tensor's rows (`padded` less the padding)
    dtype: Any
    target: Any  # the tensor's sharding in the model

    def program(self) -> Any:
        """The compiled program from the blocks to the tensor at its target sharding
        (`reshard_program`, compiled on first use), or None where XLA would use arithmetic."""
        return reshard_program(self.padded, self.length, self.dtype, self.source, self.target)

    def region(self, shape: tuple[int, ...], process: int) -> Region:
        """The rows of the file's tensor process `process` reads (empty past the last row)."""
        block = leading_block(shape, jax.process_count(), process)
        assert block is not None, "a Block of a tensor with no rows"
        return block


@functools.lru_cache(maxsize=256)
def reshard_program(
    padded: tuple[int, ...], rows: int, dtype: Any, source: Any, target: Any
) -> Any:
    """The program from the blocks (`padded` rows at sharding `source`) to the tensor's `rows` at
    sharding `target` (the identity, or dropping the padding), compiled once per argument set, or
    None where XLA would reshard it with arithmetic.

    Example:
        >>> program = reshard_program((8, 16), 5, np.dtype("float32"), source, target)
        >>> tensor = program(blocks)  # (5, 16) at `target`
    """
    cut = padded[0] != rows
    program = jax.jit(lambda x: x[:rows] if cut else x, out_shardings=target)
    compiled = program.lower(jax.ShapeDtypeStruct(padded, dtype, sharding=source)).compile()
    text = compiled.as_text() or ""
    return None if any(op in text for op in ARITHMETIC) else compiled


def plan_block(step: Step, shape: tuple[int, ...]) -> Block | None:
    """How `step` goes in bytes mode, or None where it is read by regions: a PRNG key or a
    stacked layer; a tensor with no rows; a sharding whose devices are not spread evenly over
    every process; one under which each process's devices hold only its own rows already
    (nothing to exchange). The same in every process: it looks at the global sharding only.
    The program is compiled when the block is placed (`Block.program`, while the next blocks are
    read: `loader.sharded.slices.ReadAhead`); one XLA would run with arithmetic is not used, and
    that tensor is read by regions then (`assembled_from_block` gives None)."""
    if step.leaf.kind is LeafKind.PRNG or step.layer is not None:
        return None
    processes = jax.process_count()
    if leading_block(shape, processes, 0) is None:
        return None
    target: Any = step.placement()
    mesh = source_mesh(target)
    if mesh is None:
        return None
    if not any(
        exchanged_elements(
            [index_region(index, shape)], leading_block(shape, processes, d.process_index) or ()
        )
        for d, index in target.devices_indices_map(shape).items()
    ):
        return None
    rows = -(-shape[0] // processes)
    padded = (rows * processes, *shape[1:])
    source = source_sharding(mesh, rows)
    dtype = step.leaf.stored_shape_dtype()[1]
    return Block(rows, padded, source, shape[0], dtype, target)


def assembled_from_block(
    step: Step, block: Block, host: np.ndarray, probe: Probe, shape: tuple[int, ...]
) -> tuple[jax.Array, int] | None:
    """Place this process's block `host` of `step`'s tensor (read as `Block.region` says) and
    reshard it to the target sharding: the array, and the bytes of this process's distinct target
    ranges it did not read (received over the interconnect). None where the program would reshard
    with arithmetic (`Block.program`): the same in every process, which then read it by regions."""
    program = block.program()
    if program is None:
        return None
    me = jax.process_index()
    region = block.region(shape, me)
    with substep(probe, CAST):
        host = host_cast(step.leaf, host)
    itemsize = host.dtype.itemsize
    if host.shape[0] != block.rows:  # rows past the tensor's end: zeros the program drops
        pad = np.zeros((block.rows - host.shape[0], *host.shape[1:]), host.dtype)
        host = np.concatenate([host, pad])
    mine = ((me * block.rows, (me + 1) * block.rows), *region[1:])  # the padded block
    with substep(probe, TRANSFER):
        parts = [
            jax.device_put(host[within(index_region(index, block.padded), mine)], device)
            for device, index in block.source.addressable_devices_indices_map(block.padded).items()
        ]
        del host
        placed = jax.make_array_from_single_device_arrays(block.padded, block.source, parts)
        del parts
        arr = program(placed)
        del placed
        arr.block_until_ready()  # the source buffers go now, not with the next tensors
    target: Any = step.placement()
    held = [index_region(i, shape) for i in target.addressable_devices_indices_map(shape).values()]
    return arr, exchanged_elements(held, region) * itemsize
