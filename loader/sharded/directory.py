"""`save_sharded` / `load_sharded`: a checkpoint directory each process writes and reads in part.

Layout of a directory saved by N processes::

    shard-0-of-N.safetensors ... shard-<N-1>-of-N.safetensors   one per process (written atomically)
    manifest.json                                                written LAST, by process 0

Each shard file holds only slices its process owns: for every tensor, each distinct index range of
its sharding is written once, by the process of the lowest-id device holding it (replicated data is
written once, not once per device). A slice is stored under the key `<key>@<start>:<stop>,...`
(global index range per axis; `<key>@` for a 0-d tensor) as a C-contiguous tensor of the range's
shape. The manifest (`loader.sharded.layout`, format `loadbench.sharded-dir` version 1) gives each
tensor's global dtype and shape, and for each slice its file, key and index range; plus the process
count and the `__metadata__` a single-file save would have written. A directory without manifest
is an unfinished save and raises `IncompleteCheckpointError`.

Loading, each process reads (with `os.preadv`, headers validated) only the index ranges its
addressable devices need, from whichever files hold them, and assembles each array with
`jax.make_array_from_single_device_arrays`. The sharding is the model's own; leaves without one
(a plain builder) get the sharding rule (`loader.sharded.rule.rule_sharding`) over all devices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from loader.format.atomic import atomic_write_text, withdraw
from loader.format.source import CheckpointSource
from loader.phases import NULL_PROBE, Probe
from loader.placement.leaves import META_SHARDINGS, is_prng_dtype
from loader.placement.place import describe_sharding
from loader.planning.keys import KeyMap, key_of
from loader.planning.keys import Path as KeyPath
from loader.planning.policy import LoadPolicy, Patterns
from loader.report import LoadReport
from loader.save import describe_leaf, header_metadata, host_copy, keyed_values
from loader.sequence import LoadArgs, run_load
from loader.sharded.layout import (
    MANIFEST,
    Layout,
    Region,
    Slice,
    TensorLayout,
    extents,
    file_layout,
    full_region,
    manifest_json,
    slice_key,
)
from loader.sharded.load import DIRECTORY_RECIPE
from loader.sharded.rule import rule_mesh, rule_sharding
from loader.sharded.slices import ShardSlice, SliceReader, write_shard
from loader.vocabulary import REPORT

__all__ = ["MANIFEST", "convert_to_sharded", "load_sharded", "save_sharded", "shard_name"]


def shard_name(process: int, count: int) -> str:
    return f"shard-{process}-of-{count}.safetensors"


@dataclass
class _Item:
    """One tensor to save: its sharding (None: written whole by process 0) and a slice fetcher."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    sharding: Any
    fetch: Callable[[Region, Any], np.ndarray]  # (region, owning device or None) -> host array


def region_of(index: tuple[slice, ...], shape: tuple[int, ...]) -> Region:
    """A device's index (tuple of slices) as a global (start, stop) range per axis."""
    index = tuple(index) + (slice(None),) * (len(shape) - len(index))
    return tuple(s.indices(d)[:2] for s, d in zip(index, shape))


def owners(sharding: Any, shape: tuple[int, ...]) -> dict[Region, Any]:
    """Each distinct index range of `sharding` and the lowest-id device holding it."""
    found: dict[Region, Any] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        region = region_of(index, shape)
        if region not in found or device.id < found[region].id:
            found[region] = device
    return found


def _plan_items(
    items: list[_Item], folder: Path, count: int
) -> tuple[dict[str, TensorLayout], list[ShardSlice]]:
    """The whole layout (every process computes the same) and this process's slices to write."""
    me = jax.process_index()
    tensors: dict[str, TensorLayout] = {}
    mine: list[ShardSlice] = []
    for item in items:
        regions = (
            {full_region(item.shape): None}
            if item.sharding is None
            else owners(item.sharding, item.shape)
        )
        t = tensors[item.key] = TensorLayout(item.key, item.dtype, item.shape)
        for region in sorted(regions):
            device = regions[region]
            process = 0 if device is None else device.process_index
            s = Slice(folder / shard_name(process, count), slice_key(item.key, region), region)
            t.slices.append(s)
            if process == me:
                fetch = lambda item=item, r=region, d=device: item.fetch(r, d)  # noqa: E731
                mine.append((s.key, item.dtype, extents(region), fetch))
    return tensors, mine


def _barrier(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(f"loadbench.save_sharded.{name}")


def _write(folder: Path, items: list[_Item], metadata: dict[str, str]) -> Path:
    count, me = jax.process_count(), jax.process_index()
    if me == 0:  # a reader must never pair an old manifest with new shards
        withdraw(folder / MANIFEST)
    _barrier("begin")
    tensors, mine = _plan_items(items, folder, count)
    shard_meta = {"format": "np", "loadbench.shard": f"{me} of {count}"}
    write_shard(folder / shard_name(me, count), mine, shard_meta)
    _barrier("shards")
    if me == 0:
        layout = Layout(folder, tensors, metadata, count)
        atomic_write_text(folder / MANIFEST, manifest_json(layout, folder))
    _barrier("manifest")
    return folder


def _model_item(path: KeyPath, value: Any) -> tuple[_Item, dict[str, str]]:
    dtype, shape, notes = describe_leaf(path, value)
    key = key_of(path)
    if not isinstance(value, jax.Array) or (jax.process_count() > 1 and value.is_fully_addressable):
        host = host_copy(path, value)  # process 0's copy is the one written
        return _Item(key, dtype, shape, None, lambda region, device: host), notes
    data = jax.random.key_data(value) if is_prng_dtype(value.dtype) else value

    def fetch(region: Region, device: Any) -> np.ndarray:
        shard = next(s for s in data.addressable_shards if s.device == device)
        return np.asarray(shard.data)

    return _Item(key, dtype, shape, data.sharding, fetch), notes


def save_sharded(
    model: Any, folder: str | os.PathLike[str], *, metadata: dict[str, str] | None = None
) -> Path:
    """Write a model's variables as a sharded checkpoint directory; call it on every process.

    Args:
        model: an NNX module (or optimizer, or `nnx.State`), its arrays global across processes.
        folder: the directory to write (created if needed); an existing manifest is replaced last.
        metadata: extra string-to-string entries, kept in the manifest's `metadata`.

    Returns:
        The folder. Every process returns only once the manifest is written (barriers), so any
        process may load it right away.

    Example:
        >>> loader.save_sharded(model, "ckpt/")  # on each of the N processes
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    items, notes = [], {}
    for key, (path, value) in keyed_values(model).items():
        item, notes[key] = _model_item(path, value)
        items.append(item)
    return _write(folder, sorted(items, key=lambda i: i.key), header_metadata(metadata, notes))


def convert_to_sharded(src: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """Lay a plain `.safetensors` checkpoint out as a sharded directory, tensor by tensor.

    Every process (call it on each) reads and writes only the slices it owns under the sharding
    rule over all devices: no model is built, and one slice is in host memory at a time.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mesh = rule_mesh()
    with CheckpointSource(src) as source, SliceReader(file_layout(source)) as reader:
        items, shardings = [], {}
        for key in sorted(source.keys()):
            info = source.info(key)
            sharding = rule_sharding(info.shape, mesh)
            shardings[key] = describe_sharding(sharding)
            fetch = lambda region, device, key=key: reader.read_region(key, region)  # noqa: E731
            items.append(_Item(key, info.dtype, info.shape, sharding, fetch))
        metadata = {**source.metadata, META_SHARDINGS: json.dumps(shardings, sort_keys=True)}
        return _write(folder, items, metadata)


def load_sharded(
    target: Any,
    folder: str | os.PathLike[str],
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    probe: Probe = NULL_PROBE,
    ignore_unexpected: Patterns = (),
    ignore_missing: Patterns = (),
    casts: str = REPORT,
) -> tuple[Any, LoadReport]:
    """Load a sharded checkpoint directory; each process reads only the slices it needs.

    Args:
        target: an `nnx.Module` (filled in place) or a zero-argument builder (built abstractly).
        folder: a directory written by `save_sharded` (or `convert_to_sharded`).
        strict: raise `loader.MismatchError` on any mismatch instead of warning.
        key_map: as for `loader.load_model`. A key with a transform is read whole on every process.
        probe: phase probe (`build`, then `stream` with `read` / `cast` / `transfer` sub-steps).
        ignore_unexpected / ignore_missing / casts: as for `loader.load_model`.

    Returns:
        (model, LoadReport), the report as `loader.load_model` makes it.

    Raises:
        IncompleteCheckpointError: the folder has no manifest.
        CheckpointError: a leaf's sharding leaves this process no device to hold its part.
    """
    policy = LoadPolicy.of(
        ignore_unexpected=ignore_unexpected, ignore_missing=ignore_missing, casts=casts
    )
    return run_load(
        DIRECTORY_RECIPE,
        target,
        folder,
        probe,
        LoadArgs(strict=strict, key_map=key_map, policy=policy),
    )
