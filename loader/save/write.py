"""`save_model`: an NNX model, optimizer or state to one `.safetensors` file, streamed and atomic.

The header is written by hand (u64 length, JSON padded to 8 bytes, tensors in key order), then each
tensor is fetched to the host, written, and dropped: only one host buffer is alive at a time. The
file appears only when complete (`loader.format.atomic`).

With the `key_map` a load used (and the file it loaded as `reference`), the model is written in
that file's layout instead: `loader.save.writeback` plans every tensor from the inverses of the
declared transforms before anything is written, and each file tensor is then put together from
its leaves (a fused one from several) and written, one at a time as above.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx

from loader.errors import CheckpointError
from loader.format import DTYPES, dtype_name, encode_header
from loader.format.atomic import atomic_open
from loader.format.source import CheckpointSource
from loader.placement.leaves import (
    META_PRNG,
    META_PYTYPES,
    META_SHARDINGS,
    is_prng_dtype,
    iter_variables,
    refuse_unstorable,
)
from loader.placement.place import describe_sharding
from loader.planning.keys import KeyMap, Path, key_of, path_str
from loader.planning.policy import LoadPolicy, Patterns
from loader.save.writeback import Piece, SavedLeaf, SourceTensor, copy_bytes, plan_writeback
from loader.transforms import Part

FORMAT_VERSION = "1"


def flat_values(obj: Any) -> list[tuple[Path, Any]]:
    if isinstance(obj, nnx.State):
        return [
            (tuple(p), v.get_value() if isinstance(v, nnx.Variable) else v)
            for p, v in nnx.to_flat_state(obj)
        ]
    return [(path, var.get_value()) for path, var in iter_variables(obj)]


def host_copy(path: Path, value: Any) -> np.ndarray:
    """The host bytes of one leaf (a device-to-host copy for arrays; PRNG keys as key data)."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return np.asarray(
            value, dtype={bool: np.bool_, int: np.int64, float: np.float64}[type(value)]
        )
    if not hasattr(value, "dtype") or not hasattr(value, "shape"):
        refuse_unstorable(path, value)
    if is_prng_dtype(value.dtype):
        value = jax.random.key_data(value)
    if isinstance(value, jax.Array) and not value.is_fully_addressable:
        raise CheckpointError(
            f"parameter {path_str(path)}: array spans devices of other processes; "
            "use loader.save_sharded(model, folder) for multi-process models"
        )
    return np.ascontiguousarray(jax.device_get(value))


def describe_leaf(path: Path, value: Any) -> tuple[str, tuple[int, ...], dict[str, str]]:
    """(dtype name, shape, metadata notes) of a leaf without copying it to the host."""
    notes: dict[str, str] = {}
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        notes[META_PYTYPES] = type(value).__name__
        return dtype_name(host_copy(path, value).dtype), (), notes
    if not hasattr(value, "dtype") or not hasattr(value, "shape"):
        refuse_unstorable(path, value)
    if is_prng_dtype(value.dtype):
        notes[META_PRNG] = str(jax.random.key_impl(value))
        data = jax.eval_shape(jax.random.key_data, value)
        return dtype_name(data.dtype), tuple(data.shape), notes
    if isinstance(value, jax.Array):
        notes[META_SHARDINGS] = describe_sharding(value.sharding)
    return dtype_name(value.dtype), tuple(value.shape), notes


def _checked_metadata(user: Mapping[str, str] | None) -> dict[str, str]:
    for k, v in (user or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise CheckpointError(
                f"metadata entry {k!r}: safetensors metadata maps strings to strings"
            )
    return dict(user or {})


def header_metadata(
    user: Mapping[str, str] | None, notes: dict[str, dict[str, str]]
) -> dict[str, str]:
    meta = {"format": "np", "loadbench.format_version": FORMAT_VERSION}
    for kind in (META_PRNG, META_PYTYPES, META_SHARDINGS):
        per_key = {k: n[kind] for k, n in notes.items() if kind in n}
        if per_key:
            meta[kind] = json.dumps(per_key, sort_keys=True)
    return meta | _checked_metadata(user)


def keyed_values(model_or_state: Any) -> dict[str, tuple[Path, Any]]:
    """Every leaf by its file key, as (path, value); `CheckpointError` if two paths share a key."""
    leaves: dict[str, tuple[Path, Any]] = {}
    for p, value in flat_values(model_or_state):
        key = key_of(p)
        if key in leaves:
            raise CheckpointError(
                f"parameters {path_str(leaves[key][0])} and {path_str(p)} both map to key {key!r}"
            )
        leaves[key] = (p, value)
    return leaves


def save_model(
    model_or_state: Any,
    path: str | os.PathLike[str],
    *,
    metadata: Mapping[str, str] | None = None,
    key_map: KeyMap | None = None,
    reference: str | os.PathLike[str] | None = None,
    ignore_unexpected: Patterns = (),
    ignore_missing: Patterns = (),
) -> None:
    """Write every variable of an NNX module (an `nnx.Optimizer` too) or `nnx.State` to one file.

    Given the `key_map` a load used, the file has the layout that load read (the source
    framework's names and shapes): each leaf goes back through the inverse of its declared
    transforms, and the leaves sliced from one tensor are put back together. Nothing is written
    if any leaf cannot go back (an opaque callable transform, a shape, a gap between slices).

    Args:
        model_or_state: the module, optimizer or state to save.
        path: the `.safetensors` file to (atomically) create or replace.
        metadata: extra string-to-string entries for the header's `__metadata__`.
        key_map: the load's key map (declared transforms only): write the file's layout back.
        reference: the file (or folder of shards) the model was loaded from: its header gives the
            stored shapes (a Reshape or a Slice does not say them), its `__metadata__` is kept,
            and the tensors matched by `ignore_unexpected` are copied from it unchanged. Every
            other tensor of it must be written from the model.
        ignore_unexpected: the load's patterns for file keys the model does not hold (copied
            from `reference`).
        ignore_missing: the load's patterns for model paths the file does not hold (not written).

    Example:
        >>> loader.save_model(model, "model.safetensors")
        >>> loader.save_model(port, "out/model.safetensors", key_map=km,
        ...     reference="hf/model.safetensors", ignore_unexpected=["pooler.*"])
    """
    if key_map is None and reference is None and not ignore_missing:
        _save_own_layout(model_or_state, path, metadata)
        return
    leaves = []
    for p, value in flat_values(model_or_state):
        dtype, shape, _ = describe_leaf(p, value)
        leaves.append(SavedLeaf(p, value, dtype, shape))
    with contextlib.ExitStack() as stack:
        ref = None if reference is None else stack.enter_context(CheckpointSource(reference))
        policy = LoadPolicy.of(ignore_unexpected=ignore_unexpected, ignore_missing=ignore_missing)
        tensors = plan_writeback(leaves, key_map, ref, policy)
        if ref is not None:  # the source's metadata (`format: pt`), then the caller's
            meta = {**ref.metadata, **_checked_metadata(metadata)}
        else:
            meta = header_metadata(metadata, {})
        head, _ = encode_header({t.key: (t.dtype, t.shape) for t in tensors}, meta)
        with atomic_open(path) as fh:
            fh.write(head)
            for tensor in tensors:
                host = _source_bytes(tensor, ref)
                fh.write(host.reshape(-1).view(np.uint8).data)
                del host


def _source_bytes(tensor: SourceTensor, reference: CheckpointSource | None) -> np.ndarray:
    """One file tensor on the host: copied from the reference, or put together from its leaves
    (each leaf, or layer of a stacked leaf, fetched to the host and taken back in turn)."""
    if tensor.copied is not None:
        assert reference is not None, f"{tensor.key}: a copied tensor without its reference"
        return copy_bytes(reference, tensor.copied)
    if len(tensor.pieces) == 1:
        return np.ascontiguousarray(_placed(tensor.pieces[0], tensor.shape).values)
    out = np.empty(tensor.shape, DTYPES[tensor.dtype])
    for piece in tensor.pieces:
        part = _placed(piece, tensor.shape)
        out[part.region] = part.values
    return out


def _placed(piece: Piece, shape: tuple[int, ...]) -> Part:
    """A piece's host copy, back in its block of the file tensor of `shape`."""
    return piece.place(host_copy(piece.leaf.path, piece.leaf.stored_value()), shape)


def _save_own_layout(
    model_or_state: Any, path: str | os.PathLike[str], metadata: Mapping[str, str] | None
) -> None:
    """The model's own layout: its state paths as keys, with the notes a load reads back."""
    leaves = keyed_values(model_or_state)
    entries, notes = {}, {}
    for key in sorted(leaves):
        dtype, shape, notes[key] = describe_leaf(*leaves[key])
        entries[key] = (dtype, shape)
    head, _ = encode_header(entries, header_metadata(metadata, notes))
    with atomic_open(path) as fh:
        fh.write(head)
        for key in entries:
            host = host_copy(*leaves[key])
            fh.write(host.reshape(-1).view(np.uint8).data)
            del host
