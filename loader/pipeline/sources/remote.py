"""`RemoteFiles`: a checkpoint behind a URL (a registered store: `loader.remote.registry`), read
by range requests.

A remote read waits on the link, not on a CPU: one reader thread per request in flight
(`concurrency=`, `loader.remote.DEFAULT_CONCURRENCY`), each fetching its parts a chunk at a time
straight into the destination buffers, its answer (one chunk) held in the budget until copied:
a chunk is at most what the budget leaves each reader (`request_bytes`), at least
`MIN_REQUEST_BYTES`. Every byte read again is a request over the link again, so rows that several
devices hold, and the rows of a fused tensor several leaves are cut from, are fetched once for
all of them (`shares_rows`). A run of small neighbouring tensors is one request per chunk of
their joint range (`read_run`). Where a file's sha256 is checked (`digest=`, or the Hub's LFS
sha256: `loader.remote.digest`), its bytes are hashed in file order as they arrive, so the load
reads them in that order, a request at a time (`in_file_order`): the hash waits only for the
requests in flight, what comes back ahead of them waits in its reader's buffer, and nothing is
fetched twice. There is no page cache to mind, and the requests and bytes are counted for the
report (`remote_stats`, `loader.remote.RemoteStats`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from loader.remote.source import RemoteSource

#: A remote request fetches at least this much, however small the budget over the threads.
MIN_REQUEST_BYTES = 64 << 10


class RemoteFiles(RemoteSource):
    """A remote checkpoint as a `loader.pipeline.sources.ByteSource` (see the module docstring).

    Args:
        url: a URL of a registered store (`loader.remote.registry`).
        remote: `loader.options.Remote`: its `concurrency`, range requests in flight, one reader
            thread each (default `loader.remote.DEFAULT_CONCURRENCY`).

    Example:
        >>> with RemoteFiles("s3://bucket/model.safetensors", Remote(concurrency=32)) as source:
        ...     source.tensor_bytes("layers.0.kernel").read(0, out)
    """

    shares_rows = True  # a row read again is a request over the link again

    @property
    def in_file_order(self) -> bool:
        """A file's sha256 is checked as its bytes arrive (`loader.remote.digest`)."""
        return bool(self.reader.digests)

    def reader_threads(self, budget_bytes: int, *, staged: bool) -> int:
        return self.concurrency  # one reader a request in flight

    def request_bytes(self, budget_bytes: int, threads: int) -> int:
        """The client's chunk, cut to a quarter of the budget over the threads (a multiple of
        `MIN_REQUEST_BYTES`, at least one)."""
        chunk = min(self.reader.chunk_bytes, max(MIN_REQUEST_BYTES, budget_bytes // (4 * threads)))
        return chunk // MIN_REQUEST_BYTES * MIN_REQUEST_BYTES

    def begin(self, request_bytes: int) -> None:
        self.reader.chunk_bytes = request_bytes

    def read_run(self, keys: list[str], views: list[np.ndarray]) -> None:
        """One request per chunk of the run's joint range (`RangeReader.fetch_views`)."""
        obj = self.objects[self._where[keys[0]]]
        names = f"tensors {keys[0]!r} to {keys[-1]!r}"
        self.reader.fetch_views(obj, self.file_offset(keys[0]), views, what=names)

    def plan_reads(self, keys: set[str], read: set[str], host_bytes: Callable[[], int]) -> None:
        return None  # no page cache behind a URL

    def __enter__(self) -> RemoteFiles:
        return self
