"""A checkpoint to read from: one `.safetensors` file or a folder of shard files.

Headers are read (and validated) once, through `loader.format.read_header`. Tensor bytes are then
read one at a time, either through safetensors' own `safe_open(..., backend="pread")` or with
`os.preadv` into a buffer the caller owns (for aligned, zero-copy reads).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Protocol

import numpy as np
from safetensors import safe_open

from loader.errors import CheckpointError, HeaderError
from loader.format import Header, TensorInfo, read_header

INDEX_SUFFIX = ".safetensors.index.json"


class _OpenFile(Protocol):
    """What `CheckpointSource` uses of an entered `safe_open` (its stubs leave it untyped)."""

    def get_tensor(self, name: str) -> np.ndarray: ...

    def __exit__(self, *exc: object) -> object: ...


def checkpoint_files(path: str | os.PathLike[str]) -> list[Path]:
    """The shard files of a checkpoint: the file itself, or a folder's index or `*.safetensors`."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise CheckpointError(f"{p}: no such checkpoint file or folder")
    indexes = sorted(p.glob(f"*{INDEX_SUFFIX}"))
    if indexes:
        try:
            weight_map = json.loads(indexes[0].read_text(encoding="utf-8"))["weight_map"]
            return [p / name for name in sorted(set(weight_map.values()))]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{indexes[0]}: not a valid safetensors index ({e})") from None
    files = sorted(p.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{p}: folder holds no *.safetensors file and no {INDEX_SUFFIX}")
    return files


class CheckpointSource:
    """Validated headers of every shard, and per-tensor reads.

    Example:
        >>> with CheckpointSource("model.safetensors") as src:
        ...     arr = src.read("layers.0.kernel")
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.files = checkpoint_files(path)
        self.headers: dict[Path, Header] = {}
        self._where: dict[str, Path] = {}
        for f in self.files:
            header = read_header(f)
            self.headers[f] = header
            for name in header.tensors:
                if name in self._where:
                    raise HeaderError(f"{f}: tensor {name!r} also appears in {self._where[name]}")
                self._where[name] = f
        self._handles: dict[Path, _OpenFile] = {}
        self._fds: dict[Path, int] = {}

    # -- header facts -------------------------------------------------------------------------
    def keys(self) -> list[str]:
        return list(self._where)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def info(self, key: str) -> TensorInfo:
        return self.headers[self._where[key]].tensors[key]

    def file_of(self, key: str) -> Path:
        return self._where[key]

    def file_offset(self, key: str) -> int:
        return self.headers[self._where[key]].file_offset(key)

    @functools.cached_property
    def metadata(self) -> dict[str, str]:
        """Every shard's `__metadata__`, merged (the same for all files of one save)."""
        merged: dict[str, str] = {}
        for header in self.headers.values():
            merged.update(header.metadata)
        return merged

    @property
    def total_bytes(self) -> int:
        return sum(h.data_bytes for h in self.headers.values())

    # -- reads --------------------------------------------------------------------------------
    def read(self, key: str) -> np.ndarray:
        """One tensor, read with safetensors' `pread` backend into a fresh host buffer."""
        f = self._where[key]
        if f not in self._handles:
            self._handles[f] = safe_open(str(f), framework="np", backend="pread").__enter__()
        return self._handles[f].get_tensor(key)

    def read_into(self, key: str, out: np.ndarray) -> np.ndarray:
        """Read a tensor's bytes with `os.preadv` into `out` (a C-contiguous buffer of its size)."""
        info = self.info(key)
        f = self._where[key]
        if f not in self._fds:
            self._fds[f] = os.open(f, os.O_RDONLY)
        raw = out.reshape(-1).view(np.uint8)
        if raw.nbytes != info.nbytes:
            raise CheckpointError(
                f"{f}: buffer of {raw.nbytes} bytes for tensor {key!r} of {info.nbytes}"
            )
        pread_exact(self._fds[f], raw, self.file_offset(key), where=f"{f}: tensor {key!r}")
        return raw.view(info.np_dtype).reshape(info.shape)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.__exit__(None, None, None)
        for fd in self._fds.values():
            os.close(fd)
        self._handles.clear()
        self._fds.clear()

    def __enter__(self) -> CheckpointSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pread_exact(fd: int, buf: np.ndarray, offset: int, *, where: str) -> None:
    """Fill the uint8 buffer `buf` from `fd` at `offset`; `CheckpointError` if the file is short."""
    view = buf.data  # a memoryview (numpy's stubs make arrays buffers only from Python 3.12)
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            raise CheckpointError(f"{where}: file ends {len(view) - done} bytes early (truncated?)")
        done += n
