"""Peer: the JAX model zoos' load (tunix's `load_and_create_model`, bonsai): an abstract model, the
whole file memory-mapped, `np.frombuffer` views, `jax.device_put` per leaf.

What most JAX ports copy, written out here as those zoos write it: the model is built with
`nnx.eval_shape` (no random init); each file is mapped whole (`mmap`, read-only) and every tensor
is an `np.frombuffer` view of the mapping, its `key_map` transform (transpose, reshape) applied to
the view (phase `read`: no byte is read yet); then, leaf by leaf, the view is cast on the host
where the model's dtype differs and handed to `jax.device_put` with the leaf's sharding, which
faults the file's pages in (`transfer`); the values are put into the model at the end, as the
zoos' `nnx.merge` does (`assemble`). The mapping lives until the load returns, so the file's pages
count in RSS as file-backed memory beside the device copies; on the CPU backend, `device_put` of a
64-byte-aligned view adopts the mapping's pages instead of copying them (the array then keeps the
mapping alive). Planning and the report are the core's.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loader.format.source import CheckpointSource
from loader.materialize import apply_transform, assign, host_cast, to_device
from loader.phases import ASSEMBLE, READ, TRANSFER, Probe
from loader.planning import LoadPlan, Step
from loader.sequence import Recipe
from loader.vocabulary import PEER

KIND = PEER  # numpy and jax only: nothing to install


def map_whole(path: Path) -> mmap.mmap:
    """The file mapped whole, read-only (the descriptor is closed at once: the map keeps it)."""
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)


@dataclass
class MapAndPut:
    """An `Executor` (see `loader.sequence`): views of the mapped files (`read`), a host cast and
    `device_put` per leaf (`transfer`), every value put into the model (`assemble`)."""

    _maps: dict[Path, mmap.mmap] = field(default_factory=dict)

    def start(self, source: CheckpointSource, probe: Probe) -> None:
        return None

    def _views(self, source: CheckpointSource, plan: LoadPlan) -> list[tuple[Step, np.ndarray]]:
        """Each step's tensor as a view of its file's mapping, transformed as a view."""
        views = []
        for step in plan.steps:
            file = Path(source.file_of(step.file_key))
            if file not in self._maps:
                self._maps[file] = map_whole(file)
            info = source.info(step.file_key)
            flat = np.frombuffer(
                self._maps[file],
                dtype=info.np_dtype,
                count=info.numel,
                offset=source.file_offset(step.file_key),
            )
            host = apply_transform(step, flat.reshape(info.shape), plan)
            if host is not None:
                views.append((step, host))
        return views

    def fill(self, plan: LoadPlan, source: CheckpointSource, probe: Probe) -> None:
        with probe.phase(READ):
            views = self._views(source, plan)
        with probe.phase(TRANSFER):
            values = [(step, to_device(step, host_cast(step.leaf, view))) for step, view in views]
        with probe.phase(ASSEMBLE):
            for step, value in values:
                assign(step.leaf, value)
                plan.report.loaded.append(step.leaf.key)
        del views, values

    def close(self) -> None:
        # Dropped, not closed: an array that adopted a view's pages still uses its mapping,
        # which goes with the last view.
        self._maps.clear()


RECIPE = Recipe(MapAndPut)


load = RECIPE.load  # the Strategy: `run_load(RECIPE, target, path, probe, ...)`
