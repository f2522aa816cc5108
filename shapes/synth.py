"""Synthetic checkpoints with exactly a spec's shapes, and verification of what a loader produced.

`synthesize(spec, out_dir)` writes `out_dir/model.safetensors` (one-file specs) or the spec's shard
files plus `model.safetensors.index.json` (sharded specs), then `out_dir/digests.json`:

```
{"format_version": 2, "seed": 0, "dtype": null, "spec_digest": "...", "source": "...",
 "files": {"model.safetensors": 453864},
 "tensors": {"name": {"blake3": "...", "dtype": "F32", "shape": [32, 96], "file": "..."}}}
```

Digests are BLAKE3, a cryptographic hash fast enough that hashing does not set the pace of
synthesis as sha256 did (the figures: docs/results.md, "Digests of synthetic checkpoints").

Every file is written atomically and `digests.json` last, so a present digests file means a
complete checkpoint; a second call with the same spec, dtype and seed reuses it. Writers take an
exclusive `flock` on the folder: a second process synthesising the same folder waits, then reuses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import blake3
import numpy as np

from loader.format import encode_header
from loader.format.atomic import atomic_open, atomic_write_text, withdraw
from loader.format.folder_lock import folder_lock
from shapes import content
from shapes.catalog import load_spec
from shapes.errors import ShapesError, VerificationError
from shapes.spec import ShapeSpec

DIGESTS_FILE = "digests.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_MAX_BACKLOG = 8


def _file_names(spec: ShapeSpec) -> dict[str, str]:
    return {spec.files[0]: SINGLE_FILE} if len(spec.files) == 1 else {f: f for f in spec.files}


def _layout(
    spec: ShapeSpec, dtype: str | None
) -> dict[str, dict[str, tuple[str, tuple[int, ...]]]]:
    """file -> {tensor name -> (stored dtype, shape)} in layout order."""
    return {
        f: {t.name: (content.effective_dtype(t.dtype, dtype), t.shape) for t in spec.tensors_in(f)}
        for f in spec.files
    }


def tensor_digest(parts: list[memoryview] | memoryview) -> str:
    """The BLAKE3 hex digest of a tensor's bytes, given whole or in consecutive parts: hashed on
    as many threads as BLAKE3 finds useful for their size (the digest is the same on one; a large
    tensor hashes several times faster on a host with cores to spare, small ones cost no more)."""
    digest = blake3.blake3(max_threads=blake3.blake3.AUTO)
    for p in [parts] if isinstance(parts, memoryview) else parts:
        digest.update(p)
    return digest.hexdigest()


def _write_file(
    path: Path,
    rel: str,
    entries: dict,
    metadata: dict,
    seed: int,
    pool: ThreadPoolExecutor,
    shape_of: Callable[[str], tuple[int, ...] | None],
) -> dict:
    """Write one file; a second thread hashes each tensor's buffers while this one writes them."""
    header, offsets = encode_header(entries, metadata or None)
    pending: dict[str, Future[str]] = {}
    with atomic_open(path) as fh:
        fh.write(header)
        for name, (dtype, _) in entries.items():
            begin, end = offsets[name]
            how = content.fill(name, dtype, shape_of)
            parts = list(content.chunks(name, dtype, end - begin, seed, how))
            pending[name] = pool.submit(tensor_digest, parts)
            for p in parts:
                fh.write(p)
            _bound_backlog(pending)
    return {
        name: {"blake3": pending[name].result(), "dtype": d, "shape": list(s), "file": rel}
        for name, (d, s) in entries.items()
    }


def _bound_backlog(pending: dict[str, Future[str]]) -> None:
    """Keep at most _MAX_BACKLOG tensors' blocks alive waiting for the hasher."""
    waiting = [f for f in pending.values() if not f.done()]
    if len(waiting) > _MAX_BACKLOG:
        waiting[0].result()


def _cached(out: Path, key: dict) -> bool:
    try:
        old = json.loads((out / DIGESTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if any(old.get(k) != v for k, v in key.items()):
        return False
    files = old.get("files", {})
    return all((out / f).is_file() and (out / f).stat().st_size == n for f, n in files.items())


def _key(spec: ShapeSpec, override: str | None, seed: int) -> dict:
    return {"format_version": 2, "seed": seed, "dtype": override, "spec_digest": spec.digest()}


def _override(dtype: object) -> str | None:
    override = None if dtype is None else content.normalize_dtype(dtype)
    if override is not None and override not in content.FLOAT_DTYPES:
        raise ShapesError(
            f"dtype override {override} is not a float dtype; "
            f"expected one of {sorted(content.FLOAT_DTYPES)}"
        )
    return override


def is_synthesized(
    spec: ShapeSpec | str, out_dir: str | os.PathLike, *, dtype: object = None, seed: int = 0
) -> bool:
    """True when `out_dir` already holds this spec's checkpoint for `dtype` and `seed`."""
    spec = load_spec(spec)
    return _cached(Path(out_dir), _key(spec, _override(dtype), seed))


def synthesize(
    spec: ShapeSpec | str, out_dir: str | os.PathLike, *, dtype: object = None, seed: int = 0
) -> Path:
    """Write a synthetic checkpoint with exactly the spec's tensors, and its digests.

    Args:
        spec: a `ShapeSpec`, or anything `load_spec` accepts.
        out_dir: folder to write into (created if missing).
        dtype: store every float tensor in this dtype instead (`"BF16"`, `jnp.bfloat16`, ...).
        seed: content seed; the same seed gives the same bytes.

    Returns:
        `out_dir/model.safetensors` for a one-file spec, else `out_dir` (shards + index json).

    Example:
        >>> path = synthesize(load_spec("tiny-gpt2"), "/tmp/tiny")
    """
    spec = load_spec(spec)
    override = _override(dtype)
    out = Path(out_dir)
    names = _file_names(spec)
    result = out / SINGLE_FILE if len(names) == 1 else out
    key = _key(spec, override, seed)
    if _cached(out, key):
        return result
    with folder_lock(out):  # a second process waits here, then finds the checkpoint cached
        if not _cached(out, key):
            _write_checkpoint(spec, out, names, override, seed, key)
    return result


def _write_checkpoint(
    spec: ShapeSpec, out: Path, names: dict[str, str], override: str | None, seed: int, key: dict
) -> None:
    withdraw(out / DIGESTS_FILE)
    tensors: dict[str, dict] = {}
    sizes: dict[str, int] = {}
    layout = _layout(spec, override)
    shapes = {n: shape for entries in layout.values() for n, (_, shape) in entries.items()}
    with ThreadPoolExecutor(1) as pool:
        for src, entries in layout.items():
            path = out / names[src]
            meta = dict(spec.metadata)
            tensors.update(_write_file(path, names[src], entries, meta, seed, pool, shapes.get))
            sizes[names[src]] = path.stat().st_size
    if len(names) > 1:
        _write_index(out, spec, override, tensors)
    record = {**key, "source": spec.source, "files": sizes, "tensors": tensors}
    atomic_write_text(out / DIGESTS_FILE, json.dumps(record, indent=0))


def _write_index(out: Path, spec: ShapeSpec, override: str | None, tensors: dict) -> None:
    total = sum(
        int(np.prod(t["shape"], dtype=np.int64)) * content.DTYPES[t["dtype"]].itemsize
        for t in tensors.values()
    )
    index = {
        "metadata": {"total_size": total},
        "weight_map": {n: t["file"] for n, t in tensors.items()},
    }
    atomic_write_text(out / INDEX_FILE, json.dumps(index, indent=2))


def tensor_values(
    spec: ShapeSpec | str, name: str, *, dtype: object = None, seed: int = 0
) -> np.ndarray:
    """The exact values `synthesize(spec, ..., dtype=dtype, seed=seed)` wrote for tensor `name`."""
    spec = load_spec(spec)
    t = spec[name]
    override = None if dtype is None else content.normalize_dtype(dtype)
    stored = content.effective_dtype(t.dtype, override)
    how = content.fill(name, stored, lambda n: spec.by_name[n].shape if n in spec.by_name else None)
    return content.values(name, stored, t.shape, seed, how)


@lru_cache(maxsize=8)
def _read_digests(path: str, mtime_ns: int) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ShapesError(f"{path}: cannot read synthetic-checkpoint digests ({e})") from None


def read_digests(checkpoint_path: str | os.PathLike) -> dict:
    """The `digests.json` beside a synthetic checkpoint (file or folder)."""
    p = Path(checkpoint_path)
    path = (p if p.is_dir() else p.parent) / DIGESTS_FILE
    if not path.is_file():
        raise ShapesError(
            f"{path}: no digests file; {checkpoint_path} was not written by `shapes synth` "
            "(or its writer did not finish); synthesise it again"
        )
    return _read_digests(str(path), path.stat().st_mtime_ns)


def verify_tensor(checkpoint_path: str | os.PathLike, name: str, array: object) -> None:
    """Check that `array` holds the synthetic values of tensor `name`, exactly.

    Uses the recorded digest when `array` has the stored dtype; otherwise regenerates the stored
    values and casts them to `array`'s dtype (so a bf16 model loaded from an f32 file verifies).

    Raises:
        VerificationError: wrong shape, or values differ (the message counts and shows them).
    """
    record = read_digests(checkpoint_path)
    entry = record.get("tensors", {}).get(name)
    if entry is None:
        raise VerificationError(
            f"{checkpoint_path}: tensor {name!r} is not in the synthetic checkpoint"
        )
    arr = np.asarray(array, order="C")
    shape = tuple(entry["shape"])
    if arr.shape != shape:
        raise VerificationError(
            f"{checkpoint_path}: tensor {name!r} has shape {arr.shape}, expected {shape}"
        )
    stored = content.DTYPES[entry["dtype"]]
    flat = arr.reshape(-1)
    if arr.dtype == stored and tensor_digest(flat.view(np.uint8).data) == entry["blake3"]:
        return
    recorded = record["tensors"]
    how = content.fill(
        name, entry["dtype"], lambda n: tuple(recorded[n]["shape"]) if n in recorded else None
    )
    stored_values = content.values(name, entry["dtype"], shape, record["seed"], how)
    expected = stored_values.astype(arr.dtype).reshape(-1)
    bad = (
        expected != flat if arr.dtype != stored else expected.view(np.uint8) != flat.view(np.uint8)
    )
    if arr.dtype == stored or bad.any():
        count = int(np.count_nonzero(bad))
        first = int(np.flatnonzero(bad)[0]) if count else 0
        raise VerificationError(
            f"{checkpoint_path}: tensor {name!r} ({arr.dtype}) differs from its synthetic values: "
            f"{count} of {bad.size} {'bytes' if arr.dtype == stored else 'elements'} differ "
            f"(first at flat index {first}); the loader placed wrong data in this parameter"
        )
