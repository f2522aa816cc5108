"""`save_model`: an NNX model, optimizer or state to one `.safetensors` file, streamed and atomic.

The header is written by hand (u64 length, JSON padded to 8 bytes, tensors in key order), then each
tensor is fetched to the host, written, and dropped: only one host buffer is alive at a time. The
file appears only when complete (`loader.format.atomic`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx

from loader.errors import CheckpointError
from loader.format import dtype_name, encode_header
from loader.format.atomic import atomic_open
from loader.keys import Path, key_of, path_str
from loader.leaves import (
    META_PRNG,
    META_PYTYPES,
    META_SHARDINGS,
    is_prng_dtype,
    iter_variables,
    refuse_unstorable,
)
from loader.place import describe_sharding

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


def header_metadata(
    user: Mapping[str, str] | None, notes: dict[str, dict[str, str]]
) -> dict[str, str]:
    meta = {"format": "np", "loadbench.format_version": FORMAT_VERSION}
    for kind in (META_PRNG, META_PYTYPES, META_SHARDINGS):
        per_key = {k: n[kind] for k, n in notes.items() if kind in n}
        if per_key:
            meta[kind] = json.dumps(per_key, sort_keys=True)
    for k, v in (user or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise CheckpointError(
                f"metadata entry {k!r}: safetensors metadata maps strings to strings"
            )
        meta[k] = v
    return meta


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
    model_or_state: Any, path: str | os.PathLike[str], *, metadata: Mapping[str, str] | None = None
) -> None:
    """Write every variable of an NNX module (an `nnx.Optimizer` too) or `nnx.State` to one file.

    Args:
        model_or_state: the module, optimizer or state to save.
        path: the `.safetensors` file to (atomically) create or replace.
        metadata: extra string-to-string entries for the header's `__metadata__`.

    Example:
        >>> loader.save_model(model, "model.safetensors")
    """
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
