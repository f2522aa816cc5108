"""Bytes mode of the `sharded` load: read a leading-axis block, reshard over the interconnect.

For a tensor read in bytes mode (`loader.sharded.share`), process `p` of `P` reads the rows
`leading_block(shape, P, p)` of the file (one contiguous byte run), casts them on the host and
puts them on its own devices as one global array whose sharding splits the leading axis over the
processes (`source_sharding`: a mesh of the target's devices as (process, local device), the rows
split further over the local devices where they divide, else the block replicated on each). A
jitted identity with the target sharding as `out_shardings` (`reshard`) then has XLA's
collectives move each part to the devices that hold it in the model (all-to-all and
collective-permute, no arithmetic: bit-exact; no `psum_scatter`, which jax issue 40830 reports
wrong over gloo). The host block is freed once it is on the devices, and the source array once
resharded, so a process holds its block, not the tensor.

`why_not_block` says whether a tensor goes this way, from the global sharding alone, so that
every process makes the same collective calls in the same order.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from loader.phases import CAST, READ, TRANSFER, Probe, substep
from loader.placement.leaves import LeafKind
from loader.placement.materialize import host_cast
from loader.planning.plan import Step
from loader.sharded.layout import Region, index_region, within
from loader.sharded.share import exchanged_elements, leading_block
from loader.sharded.slices import SliceReader

PROCESSES, LOCAL = "processes", "local"


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


def source_sharding(mesh: Mesh, shape: tuple[int, ...]) -> NamedSharding:
    """The leading axis split over the processes, and over each one's devices where it divides."""
    processes, local = mesh.devices.shape
    axis0 = (PROCESSES, LOCAL) if shape[0] % (processes * local) == 0 else PROCESSES
    return NamedSharding(mesh, PartitionSpec(axis0))


def why_not_block(step: Step, shape: tuple[int, ...]) -> str | None:
    """Why `step` cannot be read as a block and resharded (read by regions instead), or None.

    The same in every process: it looks at the global sharding only.
    """
    if step.leaf.kind is LeafKind.PRNG or step.layer is not None:
        return "a PRNG key or a stacked layer"
    processes = jax.process_count()
    if leading_block(shape, processes, 0) is None:
        return f"the leading axis is not divisible by {processes} processes"
    sharding: Any = step.placement()
    if source_mesh(sharding) is None:
        return "its devices are not spread evenly over every process"
    for device, index in sharding.devices_indices_map(shape).items():
        block = leading_block(shape, processes, device.process_index)
        assert block is not None
        if exchanged_elements([index_region(index, shape)], block):
            return None
    return "each process's devices hold only its own rows already: nothing to exchange"


_RESHARD: dict[Any, Any] = {}


def reshard(target: Any) -> Any:
    """A jitted identity whose output has sharding `target` (one per target; jax caches its
    compilations per input shape, dtype and sharding)."""
    if target not in _RESHARD:
        _RESHARD[target] = jax.jit(lambda x: x, out_shardings=target)
    return _RESHARD[target]


def block_read(step: Step, shape: tuple[int, ...]) -> Region:
    """The region of the file's tensor this process reads for `step` in bytes mode."""
    block = leading_block(shape, jax.process_count(), jax.process_index())
    assert block is not None, f"{step.leaf.where}: no block (why_not_block refuses it)"
    return block


def assembled_from_block(
    step: Step, reader: SliceReader, probe: Probe, shape: tuple[int, ...]
) -> tuple[jax.Array, int]:
    """Read this process's block of `step`'s tensor, place it, and reshard it to the target
    sharding; the array, and the bytes of this process's distinct target ranges it did not read
    (received over the interconnect)."""
    target: Any = step.placement()
    block = block_read(step, shape)
    mesh = source_mesh(target)
    assert mesh is not None, f"{step.leaf.where}: no source mesh (why_not_block refuses it)"
    source = source_sharding(mesh, shape)
    with substep(probe, READ):
        host = reader.read_region(step.file_key, block)
    with substep(probe, CAST):
        host = host_cast(step.leaf, host)
    itemsize = host.dtype.itemsize
    with substep(probe, TRANSFER):
        parts = [
            jax.device_put(host[within(index_region(index, shape), block)], device)
            for device, index in source.addressable_devices_indices_map(shape).items()
        ]
        del host
        placed = jax.make_array_from_single_device_arrays(shape, source, parts)
        del parts
        arr = reshard(target)(placed)
        del placed
        arr.block_until_ready()
    mine = [index_region(i, shape) for i in target.addressable_devices_indices_map(shape).values()]
    return arr, exchanged_elements(mine, block) * itemsize
