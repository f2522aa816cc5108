"""A remote checkpoint as a layout: the `sharded` strategy over a URL, each process its own ranges.

`open_remote_layout(url)` opens the URL's headers with `loader.remote.source.RemoteSource` (one or
two range requests a file, the ETag pinned, every offset checked against the file's size) and sees
the checkpoint as whole-tensor slices, as `loader.sharded.layout.file_layout` sees a local one.
The slice reader then asks for the contiguous runs of this process's own index ranges only
(`loader.sharded.slices.box_runs`), each through the source's checked, retried range requests
(`RangeReader.get`: If-Match on the header's ETag, a short or failed answer retried a bounded
number of times, then one error naming the URL, the tensor and the range); a run longer than one
chunk is split, and the pieces of one range go `concurrency` requests at a time. Nothing is written.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import numpy as np

from loader.remote.options import RemoteOptions
from loader.remote.ranges import RemoteStats
from loader.remote.source import RemoteSource
from loader.sharded.files import Run, SliceFile
from loader.sharded.layout import Layout, LayoutSource, Slice, TensorLayout, full_region


def remote_layout(source: RemoteSource) -> Layout:
    """The files of `source` as whole-tensor slices in file order (each slice's `file` is the
    file's path in its store, the key of `source.headers`)."""
    tensors = {}
    for path, header in source.headers.items():
        for key in sorted(header.tensors, key=header.file_offset):
            info = header.tensors[key]
            slices = [Slice(Path(path), key, full_region(info.shape))]
            tensors[key] = TensorLayout(key, info.dtype, info.shape, slices)
    return Layout(Path(source.path), tensors, dict(source.metadata))


class RemoteSliceFile:
    """One remote file of the layout: its validated header, runs fetched by range requests."""

    def __init__(
        self,
        source: RemoteSource,
        path: Path,
        pool: concurrent.futures.ThreadPoolExecutor | None,
    ) -> None:
        self.header = source.headers[str(path)]
        self._obj = source.objects[str(path)]
        self._reader = source.reader
        self._pool = pool

    def read_runs(self, raw: np.ndarray, runs: list[Run], *, what: str) -> None:
        step = self._reader.chunk_bytes
        pieces = [(a + k, at + k, min(step, n - k)) for a, at, n in runs for k in range(0, n, step)]

        def fetch(piece: Run) -> None:
            a, at, n = piece
            data = self._reader.get(self._obj, at, at + n, what=what)
            raw[a : a + n] = np.frombuffer(data, np.uint8)
            del data

        if self._pool is None or len(pieces) == 1:
            for piece in pieces:
                fetch(piece)
        else:
            list(self._pool.map(fetch, pieces))

    def close(self) -> None:
        return None  # the source's files hold no handle; the source closes the pool


class RemoteLayoutSource(LayoutSource):
    """A `LayoutSource` whose slices are read from a `RemoteSource` (see the module docstring)."""

    def __init__(self, source: RemoteSource) -> None:
        super().__init__(remote_layout(source))
        self.path = source.path
        self.remote = source
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(
                source.concurrency, thread_name_prefix="loader-sharded-remote"
            )
            if source.concurrency > 1
            else None
        )

    def open_file(self, path: Path) -> SliceFile:
        return RemoteSliceFile(self.remote, path, self._pool)

    def remote_stats(self) -> RemoteStats | None:
        return self.remote.stats()

    def finish_reads(self) -> None:
        """The digests: checked where this process read the whole files (one process)."""
        import jax

        self.remote.finish_reads(whole=jax.process_count() == 1)

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self.remote.close()


def open_remote_layout(url: str, options: RemoteOptions | None = None) -> RemoteLayoutSource:
    """The source of a remote checkpoint (`https://`, `s3://`, `hf://`) for the `sharded` strategy.

    Example:
        >>> with open_remote_layout("s3://bucket/model.safetensors", RemoteOptions(8)) as source:
        ...     print(source.keys())
    """
    return RemoteLayoutSource(RemoteSource(url, options))
