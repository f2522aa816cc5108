"""The sharding rule of the sharded strategies: split each tensor's largest axis that the device
count divides, replicate the rest. One function, shown in the dashboard too (it imports no jax)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # jax is imported only when the rule is applied
    from jax.sharding import Mesh, NamedSharding

AXIS = "shards"


def shard_axis(shape: tuple[int, ...] | list[int], devices: int) -> int | None:
    """The axis to split `shape` over `devices`: the largest axis divisible by it, else None.

    Ties go to the first such axis. A 0-d or zero-element tensor, or one device, is replicated.

    Example:
        >>> shard_axis((768, 2304), 8)
        1
        >>> shard_axis((50257, 768), 8)
        1
        >>> shard_axis((3,), 8) is None
        True
    """
    if devices <= 1 or not shape or 0 in shape:
        return None
    best = None
    for axis, size in enumerate(shape):
        if size % devices == 0 and (best is None or size > shape[best]):
            best = axis
    return best


def partition_spec(shape: tuple[int, ...], devices: int) -> tuple[str | None, ...]:
    """The PartitionSpec entries for `shape` under the rule (mesh axis name `AXIS`)."""
    axis = shard_axis(shape, devices)
    return tuple(AXIS if i == axis else None for i in range(len(shape)))


def rule_mesh() -> Mesh:
    """A 1-D mesh named `AXIS` over the devices of the current mesh (`jax.set_mesh`), else all."""
    import jax
    from jax.sharding import Mesh

    current = jax.sharding.get_mesh() if hasattr(jax.sharding, "get_mesh") else None
    if isinstance(current, Mesh) and current.axis_names:  # an empty Mesh() when none is set
        devices = list(current.devices.flat)
    else:
        devices = jax.devices()
    return Mesh(devices, (AXIS,))


def rule_sharding(shape: tuple[int, ...], mesh: Mesh | None = None) -> NamedSharding:
    """A `NamedSharding` for `shape` under the rule, over a 1-D `mesh` (default: `rule_mesh()`)."""
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = rule_mesh() if mesh is None else mesh
    return NamedSharding(mesh, PartitionSpec(*partition_spec(shape, mesh.devices.size)))
