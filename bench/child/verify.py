"""Verification of a loaded model against its synthetic checkpoint, outside the measured phases.

Every model leaf whose key ('.'.join of its state path) names a tensor of the spec is checked bit
for bit: a fully addressable array through `shapes.verify_tensor` (the recorded digests), an array
sharded across processes shard by shard against the regenerated slice. A spec tensor that the
model does not hold is an error too. Values are compared chunk by chunk (`same_bits`), so a check
never holds more than a slice of a tensor beyond the model: a whole-tensor `tobytes()` pair costs
twice the largest tensor (Llama-3-8B's 1 GB embedding pushed a port's check past the memory budget
after a 1.00x load). Leaves are checked on a few threads (`checked_in_order`): on an accelerator
the device -> host copy of each leaf is most of a check, and copies of several leaves go side by
side (on a TPU v5e host, Llama-3-8B's first 4 GiB: 6.5 s one leaf at a time, 3.2 s on six threads).
Worker side: imports jax and flax.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

COMPARE_CHUNK_BYTES = 64 << 20
#: leaves checked side by side at most (fewer on a host with fewer CPUs)
CHECK_THREADS = 6
#: bytes of leaves handed to the threads beyond the oldest one not yet checked (at least one leaf)
CHECK_AHEAD_BYTES = 2 << 30

Item = TypeVar("Item")


def checked_in_order(
    items: Iterable[Item], check: Callable[[Item], None], nbytes: Callable[[Item], int]
) -> tuple[int, Exception | None]:
    """Run `check` on every item, on up to `CHECK_THREADS` threads with at most
    `CHECK_AHEAD_BYTES` of items (by `nbytes`) started beyond the oldest unfinished one; stops at
    the first item, in the given order, whose check raises a `shapes.ShapesError`.

    Returns (items checked before it, that error or None): the same answer as one thread gives.
    """
    import shapes

    threads = max(1, min(CHECK_THREADS, os.cpu_count() or 1))
    pending: deque[tuple[Future[None], int]] = deque()
    ahead, checked = 0, 0
    with ThreadPoolExecutor(threads, thread_name_prefix="verify") as pool:

        def finish_oldest() -> Exception | None:
            nonlocal ahead, checked
            future, size = pending.popleft()
            ahead -= size
            try:
                future.result()
            except shapes.ShapesError as exc:
                for later, _ in pending:
                    later.cancel()
                return exc
            checked += 1
            return None

        for item in items:
            size = nbytes(item)
            while pending and ahead + size > CHECK_AHEAD_BYTES:
                if (error := finish_oldest()) is not None:
                    return checked, error
            pending.append((pool.submit(check, item), size))
            ahead += size
        while pending:
            if (error := finish_oldest()) is not None:
                return checked, error
    return checked, None


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether `want`, cast to `got`'s dtype, equals `got` bit for bit (so NaNs compare by their
    bits, and -0.0 differs from 0.0); `want` may be any strided view. Compared in chunks of about
    `COMPARE_CHUNK_BYTES` along the first axis; where `want` is laid out otherwise than `got` (a
    port's transposed weight), in square tiles of the last two axes, which both fit in the CPU's
    cache (a row-order pass over a transposed view read 0.28 GB/s: a Llama-3-8B port's check took
    99 s on a TPU host, its plain check 27 s)."""
    if got.shape != want.shape:
        return False
    if got.ndim == 0 or got.size == 0:
        return got.tobytes() == np.asarray(want).astype(got.dtype).tobytes()
    if got.ndim >= 2 and not want.flags.c_contiguous:
        return _same_tiles(got, want)
    row_bytes = max(1, got[0].nbytes)
    step = max(1, COMPARE_CHUNK_BYTES // row_bytes)
    return all(
        _same_block(got[start : start + step], want[start : start + step])
        for start in range(0, got.shape[0], step)
    )


#: the side of a tile `_same_tiles` compares (elements): 256 x 256 x 4 bytes = 256 KiB per side
TILE = 256


def _same_tiles(got: np.ndarray, want: np.ndarray) -> bool:
    """`same_bits`, tile by tile over the last two axes (each leading index in turn). A tensor of
    more axes is first seen as a matrix, its trailing or its leading axes merged, where `want`'s
    strides allow it without a copy: a port's attention kernel, (4096, 8, 128), is the file's
    (1024, 4096) transposed and split, and tiled per leading index it made 4096 tiles of 2 KiB
    each, whose Python cost held the interpreter longer than their compares took."""
    if got.ndim > 2:
        for matrix in ((got.shape[0], -1), (-1, got.shape[-1])):
            try:
                merged = np.reshape(want, matrix, copy=False)
            except ValueError:  # these axes of `want` cannot merge without a copy
                continue
            return _same_tiles(np.reshape(got, matrix), merged)
    rows, cols = got.shape[-2:]
    for lead in np.ndindex(*got.shape[:-2]):
        a, b = got[lead], want[lead]
        for i in range(0, rows, TILE):
            for j in range(0, cols, TILE):
                if not _same_block(a[i : i + TILE, j : j + TILE], b[i : i + TILE, j : j + TILE]):
                    return False
    return True


def _same_block(a: np.ndarray, b: np.ndarray) -> bool:
    """One block of `same_bits`: `b` cast to `a`'s dtype, compared by bits."""
    b = b.astype(a.dtype, copy=False)
    if a.dtype.itemsize in (1, 2, 4, 8):
        bits = np.dtype(f"u{a.dtype.itemsize}")
        return bool(np.array_equal(a.view(bits), b.view(bits)))
    return a.tobytes() == np.ascontiguousarray(b).tobytes()


def flat_leaves(model) -> dict[str, object]:
    """key -> array of every variable in `model` ('.'.join(map(str, path)))."""
    from flax import nnx

    out = {}
    for path, var in nnx.to_flat_state(nnx.state(model)):
        value = var.get_value() if hasattr(var, "get_value") else getattr(var, "value", var)
        out[".".join(map(str, path))] = value
    return out


def _verify_shards(spec, name: str, array, *, dtype: str | None, seed: int) -> None:
    import shapes

    expected = shapes.tensor_values(spec, name, dtype=dtype, seed=seed)
    if tuple(array.shape) != expected.shape:
        raise shapes.VerificationError(
            f"tensor {name!r}: global shape {tuple(array.shape)}, expected {expected.shape}"
        )
    for shard in array.addressable_shards:
        if shard.replica_id != 0:
            continue
        got = np.asarray(shard.data)
        if not same_bits(got, expected[shard.index]):
            raise shapes.VerificationError(
                f"tensor {name!r}: shard {shard.index} on device {shard.device} differs from "
                "its synthetic values; the loader placed wrong data in this slice"
            )


def verify_model(
    model, checkpoint: str, spec, *, dtype: str | None = None, seed: int = 0
) -> tuple[int, str | None]:
    """Check every loaded tensor. Returns (tensors checked, first error message or None)."""
    import shapes

    if model is None:
        return 0, "the strategy returned no model (only reference strategies may)"
    leaves = flat_leaves(model)
    missing = [t.name for t in spec.tensors if t.name not in leaves]
    if missing:
        return 0, f"{len(missing)} spec tensor(s) not in the loaded model, e.g. {missing[:3]}"

    def check(name: str) -> None:
        array = leaves[name]
        if getattr(array, "is_fully_addressable", True):
            shapes.verify_tensor(checkpoint, name, np.asarray(array))
        else:
            _verify_shards(spec, name, array, dtype=dtype, seed=seed)

    checked, error = checked_in_order(
        [t.name for t in spec.tensors], check, lambda name: leaf_nbytes(leaves[name])
    )
    return checked, None if error is None else str(error)


def leaf_nbytes(array: object) -> int:
    """A leaf's bytes (its global size for an array sharded across processes), as
    `checked_in_order` bounds the leaves ahead by them."""
    return int(getattr(array, "nbytes", 0))


def _safetensors_reading(folder: str, entry: dict, name: str) -> np.ndarray:
    from safetensors import safe_open

    with safe_open(f"{folder}/{entry['file']}", framework="np") as fh:
        return fh.get_tensor(name)


def _check_user_tensor(name: str, array, entry: dict, folder: str) -> None:
    """One leaf against safetensors' reading of the user's file (digest, or values when cast)."""
    import shapes
    from shapes.synth import tensor_digest

    if tuple(array.shape) != tuple(entry["shape"]):
        raise shapes.VerificationError(
            f"tensor {name!r}: loaded shape {tuple(array.shape)}, the file holds {entry['shape']}"
        )
    if not getattr(array, "is_fully_addressable", True):
        want = _safetensors_reading(folder, entry, name)
        for shard in array.addressable_shards:
            got = np.asarray(shard.data)
            if not same_bits(got, want[shard.index]):
                raise shapes.VerificationError(
                    f"tensor {name!r}: shard {shard.index} differs from safetensors' reading"
                )
        return
    got = np.ascontiguousarray(np.asarray(array))
    digest = tensor_digest(got.reshape(-1).view(np.uint8).data)
    if digest == entry["blake3"]:
        return
    want = _safetensors_reading(folder, entry, name)
    if want.dtype != got.dtype and same_bits(got, want):
        return  # stored as one dtype, held as another (e.g. I64 as int32 without x64): same values
    bad = int(np.count_nonzero(want.astype(got.dtype).reshape(-1) != got.reshape(-1)))
    raise shapes.VerificationError(
        f"tensor {name!r} ({got.dtype}) differs from safetensors' reading of {entry['file']} "
        f"({entry['dtype']}): {bad} of {got.size} elements differ; the loader placed wrong data"
    )


def verify_user_model(model, digests_file: str, folder: str) -> tuple[int, str | None]:
    """Check every tensor of a user's checkpoint against its cached digests
    (`bench.run.user_checkpoint`).

    Returns (tensors checked, first error message or None).
    """
    import json

    if model is None:
        return 0, "the strategy returned no model (only reference strategies may)"
    with open(digests_file, encoding="utf-8") as fh:
        tensors = json.load(fh)["tensors"]
    leaves = flat_leaves(model)
    missing = [n for n in tensors if n not in leaves]
    if missing:
        return 0, f"{len(missing)} checkpoint tensor(s) not in the loaded model, e.g. {missing[:3]}"
    checked, error = checked_in_order(
        list(tensors),
        lambda name: _check_user_tensor(name, leaves[name], tensors[name], folder),
        lambda name: leaf_nbytes(leaves[name]),
    )
    return checked, None if error is None else str(error)
