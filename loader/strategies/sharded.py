"""One file; each addressable device reads only its own index range (`get_slice`), then assembled.

Each tensor is placed with the model's sharding, or, where the model declares none, with the rule
of `loader.sharded.rule` (largest axis divisible by the device count, the rest replicated), exactly as
`sharded-dir` places it (`loader.sharded.load.apply_rule`). A device
reads its slice with safetensors' `get_slice`; identical slices (replicated tensors) are read once
per process. Runs in one process or as several cooperating `jax.distributed` processes.
"""

from __future__ import annotations

import jax
import numpy as np
from safetensors import safe_open

from loader.format.source import CheckpointSource
from loader.load import stream_load
from loader.materialize import host_cast
from loader.phases import NULL_PROBE
from loader.plan import Step
from loader.sharded.load import apply_rule, refuse_unaddressable

MULTIPROCESS = True


class _SliceReader:
    """Reads the slices this process's devices need and assembles the global array."""

    def __init__(self, source: CheckpointSource) -> None:
        self.source = source
        self.handles: dict[object, object] = {}

    def _slice(self, key: str, index: tuple[slice, ...]) -> np.ndarray:
        f = self.source.file_of(key)
        if f not in self.handles:
            self.handles[f] = safe_open(str(f), framework="np", backend="pread").__enter__()
        handle = self.handles[f]
        if not index or self.source.info(key).numel == 0:
            return handle.get_tensor(key)[index]
        return handle.get_slice(key)[index]

    def assemble(self, step: Step) -> jax.Array:
        sharding = step.sharding
        refuse_unaddressable(sharding, step.leaf.where)
        shape = step.leaf.shape
        cache: dict[tuple, np.ndarray] = {}
        arrays = []
        for device, index in sharding.addressable_devices_indices_map(shape).items():
            spans = tuple((s.start, s.stop) for s in index)
            if spans not in cache:
                cache[spans] = host_cast(step.leaf, self._slice(step.file_key, index))
            arrays.append(jax.device_put(cache[spans], device))
        return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

    def close(self) -> None:
        for handle in self.handles.values():
            handle.__exit__(None, None, None)


def load(target, path, probe=NULL_PROBE, *, strict=False, key_map=None):
    """Build `target` abstractly and assemble every tensor from per-device slices."""
    return stream_load(
        target,
        path,
        probe,
        strict=strict,
        key_map=key_map,
        assembler=_SliceReader,
        adjust_plan=lambda plan, source: apply_rule(plan, source.metadata),
    )
