"""The sharding rule of the sharded strategies, and its application to a load's plan.

The rule: split each tensor's largest axis that the device count divides, replicate the rest
(`shard_axis`; one function, shown in the dashboard too, so this module imports no jax at module
level). `apply_rule` applies it to a plan: each leaf that declares no sharding gets the rule's, and
sharding changes are judged against it (`sharded`, `sharded-dir` and `orbax-safetensors` place
with it alike).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # jax is imported only when the rule is applied
    from jax.sharding import Mesh, NamedSharding

    from loader.planning.plan import LoadPlan

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


def declares_none(sharding: Any) -> bool:
    """No sharding, or an abstract model's (built under `jax.set_mesh`) that partitions nothing."""
    from jax.sharding import Mesh, NamedSharding

    if sharding is None:
        return True
    abstract = isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, Mesh)
    return abstract and all(axis is None for axis in sharding.spec)


class WithMetadata(Protocol):
    """What `apply_rule` reads of a source: the checkpoint's `__metadata__` (the shardings a save
    recorded). A `LayoutSource` and a `loader.format.source.CheckpointSource` both have it."""

    @property
    def metadata(self) -> dict[str, str]: ...


def apply_rule(plan: LoadPlan, source: WithMetadata) -> None:
    """Place with the rule what declares no sharding, and judge sharding changes against it.

    A leaf without any sharding always gets the rule. If no leaf of the model partitions anything
    (a plain builder, even under `jax.set_mesh`), every array leaf gets it; a model that partitions
    some leaves keeps its own layout, replicated leaves included.

    Example:
        >>> Recipe(Slices, open_source=open_manifest, adjust_plan=apply_rule)
    """
    from loader.placement.leaves import META_SHARDINGS, LeafKind
    from loader.placement.place import describe_sharding
    from loader.report import ShardingChange

    mesh = rule_mesh()
    leaves = [s.leaf for s in plan.steps] + plan.skipped
    plain = all(declares_none(leaf.sharding) for leaf in leaves if leaf.kind is not LeafKind.SCALAR)
    ruled = set()
    for leaf in leaves:
        if leaf.kind is not LeafKind.SCALAR and (
            leaf.sharding is None or (plain and declares_none(leaf.sharding))
        ):
            leaf.sharding = rule_sharding(leaf.stored_shape_dtype()[0], mesh)
            ruled.add(leaf.key)
    saved = json.loads(source.metadata.get(META_SHARDINGS, "{}"))
    changes = [c for c in plan.report.sharding_changes if c.path not in ruled]
    for step in plan.steps:
        if step.leaf.key in ruled:
            step.sharding = step.leaf.sharding
            before, after = saved.get(step.leaf.key), describe_sharding(step.sharding)
            if before is not None and before != after:
                changes.append(ShardingChange(step.leaf.key, before, after))
    plan.report.sharding_changes = changes
