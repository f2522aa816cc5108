"""A checkpoint to read from: one `.safetensors` file or a folder of shard files.

Headers are read (and validated) once, through `loader.format.read_header`. Tensor bytes are then
read one at a time with `os.preadv`, into a fresh page-aligned buffer (`read`) or into one the
caller owns (`read_into`). Aligned, because JAX's CPU backend adopts an aligned host array as the
device buffer and copies an unaligned one: safetensors' own `pread` backend hands back unaligned
arrays, and `builder` then held the copy of its last, largest tensor beside the host array (gpt2:
1.38x the checkpoint, against 1.01x for a load whose buffers are adopted).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from loader.errors import CheckpointError, HeaderError
from loader.format import Header, TensorInfo, read_header
from loader.format.buffers import aligned, prefault

INDEX_SUFFIX = ".safetensors.index.json"
F = TypeVar("F")  # how a source names its shard files


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


class ShardHeaders(Generic[F]):
    """The validated headers of a checkpoint's shard files (keyed by `F`: a local `Path`, a
    remote file's path in its store) and which file holds each tensor: the header facts that
    planning reads (`loader.planning.plan.Source`), the same for a local and a remote checkpoint.

    Example:
        >>> shards = ShardHeaders[Path]()
        >>> shards.add_header(path, read_header(path), shown=str(path))
        >>> shards.info("layers.0.kernel").shape, shards.file_offset("layers.0.kernel")
    """

    def __init__(self) -> None:
        self.headers: dict[F, Header] = {}
        self._where: dict[str, F] = {}

    def add_header(self, file: F, header: Header, *, shown: str) -> None:
        """Record one shard file's header (`shown`: the file as errors name it); a tensor that an
        earlier shard holds too is refused."""
        for name in header.tensors:
            if name in self._where:
                raise HeaderError(f"{shown}: tensor {name!r} also appears in {self._where[name]}")
            self._where[name] = file
        self.headers[file] = header

    def keys(self) -> list[str]:
        return list(self._where)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def info(self, key: str) -> TensorInfo:
        return self.headers[self._where[key]].tensors[key]

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
        """The tensor bytes of every shard file (their data, headers left out)."""
        return sum(h.data_bytes for h in self.headers.values())


class CheckpointSource(ShardHeaders[Path]):
    """Validated headers of every shard, and per-tensor reads.

    Example:
        >>> with CheckpointSource("model.safetensors") as src:
        ...     arr = src.read("layers.0.kernel")
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        self.files = checkpoint_files(path)
        for f in self.files:
            self.add_header(f, read_header(f), shown=str(f))
        self._fds: dict[Path, int] = {}

    def file_of(self, key: str) -> Path:
        return self._where[key]

    def remote_stats(self) -> None:
        return None  # a local checkpoint: no request sent

    def finish_reads(self) -> None:
        return None  # a local file: nothing left to check

    # -- reads --------------------------------------------------------------------------------
    def read(self, key: str) -> np.ndarray:
        """One tensor, read with `os.preadv` into a fresh page-aligned host buffer (its pages
        populated first where the kernel allows: `loader.format.buffers.prefault`)."""
        info = self.info(key)
        out = aligned(info.shape, info.np_dtype)
        prefault(out)
        return self.read_into(key, out)

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
        return raw.view(info.np_dtype).reshape(info.storage_shape)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
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
