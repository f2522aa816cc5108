"""Read any index range of a tensor from the slices that hold it; write one process's shard file.

`SliceReader.read_region(key, region)` opens (lazily, so a process touches only the files it
needs) and validates each shard file's header with `loader.format.read_header`, then reads with
`os.preadv` only the bytes of the requested range: one read when the range is a whole stored
slice, else one read per contiguous run. `write_shard` streams slices into one `.safetensors` file,
one host buffer at a time, atomically.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from loader.errors import CheckpointError
from loader.format import DTYPES, Header, encode_header, read_header
from loader.format.atomic import atomic_open
from loader.format.source import pread_exact
from loader.sharded.layout import Layout, Region, Slice, extents, intersect


class SliceReader:
    """Reads index ranges of a layout's tensors, opening each shard file on first use.

    Attributes:
        opened: the shard files opened so far (tests check that a process opens only its own).
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.opened: list[Path] = []
        self._files: dict[Path, tuple[int, Header]] = {}

    def _file(self, path: Path) -> tuple[int, Header]:
        if path not in self._files:
            header = read_header(path)
            self._files[path] = (os.open(path, os.O_RDONLY), header)
            self.opened.append(path)
        return self._files[path]

    def _stored(self, key: str, s: Slice) -> tuple[int, Header]:
        """The open file of slice `s`, after checking its header agrees with the layout."""
        fd, header = self._file(s.file)
        t = self.layout.tensors[key]
        info = header.tensors.get(s.key)
        if info is None or info.dtype != t.dtype or info.shape != extents(s.region):
            found = "absent" if info is None else f"{info.dtype} {list(info.shape)}"
            raise CheckpointError(
                f"{s.file}: slice {s.key!r} of tensor {key!r} should be {t.dtype} "
                f"{list(extents(s.region))} as {self.layout.path} says, but is {found}; "
                "the shard file does not belong to this manifest (save the checkpoint again)"
            )
        return fd, header

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """The values of tensor `key` in the global `region`, as a fresh host array."""
        t = self.layout.tensors[key]
        dtype = DTYPES[t.dtype]
        out = np.empty(extents(region), dtype)
        if out.size == 0:
            return out
        for s in t.slices:
            part = intersect(s.region, region)
            if part is None:
                continue
            fd, header = self._stored(key, s)
            offset = header.file_offset(s.key)
            local = tuple((a - o, b - o) for (a, b), (o, _) in zip(part, s.region))
            where = f"{s.file}: slice {s.key!r}"
            if part == region:  # the whole request lies in this one slice
                return read_box(fd, offset, extents(s.region), local, out, where=where)
            box = read_box(fd, offset, extents(s.region), local, None, dtype=dtype, where=where)
            out[tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(part, region))] = box
        return out

    def close(self) -> None:
        for fd, _ in self._files.values():
            os.close(fd)
        self._files.clear()

    def __enter__(self) -> SliceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_box(
    fd: int,
    offset: int,
    stored: tuple[int, ...],
    box: Region,
    out: np.ndarray | None,
    *,
    dtype: np.dtype | None = None,
    where: str,
) -> np.ndarray:
    """Read `box` of a C-contiguous array of shape `stored` at file `offset` into `out` (or new).

    Axes after the last partially covered one are contiguous, so each run is one `preadv`.
    """
    if out is None:
        out = np.empty(extents(box), dtype)
    raw = out.reshape(-1).view(np.uint8)
    itemsize = out.dtype.itemsize
    cut = max((i for i, (r, d) in enumerate(zip(box, stored)) if r != (0, d)), default=-1)
    if cut < 0:  # the whole stored slice
        pread_exact(fd, raw, offset, where=where)
        return out
    strides = [math.prod(stored[i + 1 :]) for i in range(len(stored))]
    run = (box[cut][1] - box[cut][0]) * strides[cut] * itemsize
    outer = [range(a, b) for a, b in box[:cut]]
    for n, index in enumerate(np.ndindex(*[len(r) for r in outer]) if outer else [()]):
        start = (
            sum((outer[i][j]) * strides[i] for i, j in enumerate(index))
            + box[cut][0] * strides[cut]
        )
        pread_exact(fd, raw[n * run : (n + 1) * run], offset + start * itemsize, where=where)
    return out


Fetch = Callable[[], np.ndarray]
#: One slice to write: (key, dtype name, shape, fetch of its host array).
ShardSlice = tuple[str, str, tuple[int, ...], Fetch]


def write_shard(path: Path, slices: Iterable[ShardSlice], metadata: dict[str, str]) -> None:
    """Write (key, dtype name, shape, fetch) slices to one file, fetching one at a time."""
    slices = list(slices)
    head, _ = encode_header({key: (dtype, shape) for key, dtype, shape, _ in slices}, metadata)
    with atomic_open(path) as fh:
        fh.write(head)
        for key, dtype, shape, fetch in slices:
            host = np.asarray(fetch())
            host = np.ascontiguousarray(host).reshape(host.shape)  # keeps 0-d tensors 0-d
            if host.shape != shape or host.dtype != DTYPES[dtype]:
                raise CheckpointError(
                    f"{path}: slice {key!r}: expected {dtype} {list(shape)}, "
                    f"got {host.dtype} {list(host.shape)}"
                )
            fh.write(host.reshape(-1).view(np.uint8).data)
            del host
