"""Host arrays onto devices, with the model's own sharding.

A model sharded over 8 devices stays sharded over 8; a replicated leaf stays replicated. An abstract
sharding (what `nnx.eval_shape` gives under a mesh) is made concrete over the current mesh. A
sharding that names devices this process does not know is refused, never silently reduced.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding, Sharding, SingleDeviceSharding

from loader.errors import CheckpointError


def _concrete_mesh(abstract_mesh: AbstractMesh, where: str) -> Mesh:
    names = tuple(abstract_mesh.axis_names)
    sizes = tuple(abstract_mesh.axis_sizes)
    current = jax.sharding.get_mesh() if hasattr(jax.sharding, "get_mesh") else None
    if (
        isinstance(current, Mesh)
        and tuple(current.axis_names) == names
        and current.devices.shape == sizes
    ):
        return current
    need = math.prod(sizes)
    devices = jax.devices()
    if need > len(devices):
        raise CheckpointError(
            f"{where}: the model is sharded over a mesh {dict(zip(names, sizes))} "
            f"of {need} devices, "
            f"but this process sees {len(devices)}; load under a matching `jax.set_mesh(mesh)`"
        )
    axis_types = getattr(abstract_mesh, "axis_types", None)
    return jax.make_mesh(sizes, names, axis_types=axis_types, devices=devices[:need])


def concrete_sharding(sharding: Sharding | None, where: str) -> Sharding:
    """The sharding to place a leaf with: concrete, and checked against this process's devices."""
    if sharding is None:
        return SingleDeviceSharding(jax.devices()[0])
    if isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, Mesh):
        sharding = NamedSharding(_concrete_mesh(sharding.mesh, where), sharding.spec)
    known = set(jax.devices())
    unknown = [d for d in sharding.device_set if d not in known]
    if unknown:
        raise CheckpointError(
            f"{where}: sharding {sharding} names device(s) {unknown} this process cannot address; "
            "build the model under this process's mesh (refusing to place only a local slice)"
        )
    return sharding


def describe_sharding(sharding: Sharding | None) -> str:
    """A stable, human-readable description, compared across save and load."""
    if sharding is None or isinstance(sharding, SingleDeviceSharding):
        return "single-device"
    if isinstance(sharding, NamedSharding):
        mesh = dict(zip(sharding.mesh.axis_names, sharding.mesh.axis_sizes))
        spec = tuple(sharding.spec)
        if all(s is None for s in spec):
            return f"replicated over {mesh}"
        return f"{spec} over {mesh}"
    return f"{type(sharding).__name__} over {len(sharding.device_set)} devices"


def place(host: np.ndarray, sharding: Sharding) -> jax.Array:
    """Put a host array on devices with `sharding` (each process supplies only its own shards)."""
    if sharding.is_fully_addressable:
        placed: jax.Array = jax.device_put(host, sharding)
        return placed
    # dtype given: a process that holds none of the shards cannot take it from a callback
    return jax.make_array_from_callback(
        host.shape, sharding, lambda index: host[index], dtype=host.dtype
    )
