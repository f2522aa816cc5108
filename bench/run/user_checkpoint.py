"""The user's own checkpoint (`bench run --checkpoint PATH`): its spec, sizes and reference digests.

PATH is a `.safetensors` file, a folder of shards (with or without its index) or an
`*.safetensors.index.json`. The spec comes from the headers alone (`shapes.local`); the model the
bench loads into is `shapes.model_builder` of that spec. The reference a load is verified against
is safetensors' own reading of the same file (`safe_open(framework="np")`), one BLAKE3 digest per
tensor, computed once per file and cached under `<cache>/digests/`, keyed by the file's absolute
path, size and mtime (a changed file is hashed again). Nothing is ever written beside the user's
files: converted copies for strategies that need them go under `<cache>/checkpoints/user-<key>/`.
Parent side: reads with numpy and safetensors, never imports jax.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.machine.allocator import small_tensor_bytes

DIGESTS_VERSION = 1


@dataclass(frozen=True)
class UserCheckpoint:
    """A user's checkpoint as the bench sees it."""

    label: str  # what rows carry in `shapes` (the absolute path the user named)
    load_path: Path  # what strategies load: the file, or the folder of shards
    files: tuple[Path, ...]
    checkpoint_bytes: int
    largest_tensor_bytes: int
    tensors: int
    small_tensor_bytes: int  # under glibc's mmap threshold (bench.machine.allocator)
    key: str  # identifies this exact content (paths, sizes, mtimes)


def open_checkpoint(path: str | os.PathLike) -> UserCheckpoint:
    """Read a user's checkpoint's headers; a clear error when PATH is not one."""
    from shapes import ShapesError
    from shapes.local import spec_from_local

    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise BenchError(f"--checkpoint {path}: no such file or folder")
    if p.is_file() and not (p.suffix == ".safetensors" or p.name.endswith(".index.json")):
        raise BenchError(
            f"--checkpoint {path}: expected a .safetensors file, a folder of shards or an "
            "*.safetensors.index.json"
        )
    try:
        spec = spec_from_local(p)
    except ShapesError as exc:
        raise BenchError(f"--checkpoint {path}: {exc}") from None
    folder = p if p.is_dir() else p.parent
    files = tuple(folder / f for f in spec.files)
    sizes = [t.nbytes for t in spec.tensors]
    stamp = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return UserCheckpoint(
        label=str(p),
        load_path=p if p.suffix == ".safetensors" else folder,
        files=files,
        checkpoint_bytes=sum(f.stat().st_size for f in files),
        largest_tensor_bytes=max(sizes, default=0),
        tensors=len(sizes),
        small_tensor_bytes=small_tensor_bytes(sizes),
        key=hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16],
    )


def _file_key(file: Path) -> str:
    st = file.stat()
    stamp = json.dumps([str(file.resolve()), st.st_size, st.st_mtime_ns])
    return hashlib.sha256(stamp.encode()).hexdigest()[:24]


def file_digests(file: Path) -> dict[str, dict]:
    """name -> {blake3, dtype, shape} of every tensor of one file, as safetensors reads it."""
    from safetensors import safe_open

    from shapes.synth import tensor_digest

    out = {}
    with safe_open(str(file), framework="np") as fh:
        dtypes = {k: v["dtype"] for k, v in _header(file).items() if k != "__metadata__"}
        for name in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
            arr = np.ascontiguousarray(fh.get_tensor(name))
            out[name] = {
                "blake3": tensor_digest(arr.reshape(-1).view(np.uint8).data),
                "dtype": dtypes[name],
                "shape": list(arr.shape),
                "file": file.name,
            }
    return out


def _header(file: Path) -> dict:
    with open(file, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        return json.loads(fh.read(n))


def digests(ck: UserCheckpoint, cache: Path) -> Path:
    """The merged digests JSON of the checkpoint (cached per file); its path under `cache`."""
    from loader.format.atomic import atomic_write_text

    folder = cache / "digests"
    folder.mkdir(parents=True, exist_ok=True)
    merged: dict[str, dict] = {}
    for file in ck.files:
        cached = folder / f"{_file_key(file)}.json"
        if cached.is_file():
            record = json.loads(cached.read_text(encoding="utf-8"))
        else:
            record = {
                "format_version": DIGESTS_VERSION,
                "file": str(file),
                "tensors": file_digests(file),
            }
            atomic_write_text(cached, json.dumps(record))
        merged.update(record["tensors"])
    out = folder / f"checkpoint-{ck.key}.json"
    atomic_write_text(out, json.dumps({"checkpoint": ck.label, "tensors": merged}))
    return out
