"""A remote checkpoint as a layout: the `sharded` strategy over a URL, each process its own ranges.

`open_remote_layout(url)` opens the URL's headers with `loader.remote.source.RemoteSource` (one or
two range requests a file, the ETag pinned, every offset checked against the file's size) and sees
the checkpoint as whole-tensor slices, as `loader.sharded.layout.file_layout` sees a local one.
The slice reader then asks for the contiguous runs of this process's own index ranges only
(`loader.sharded.slices.box_runs`), after telling each file every read it will make: the file
plans its requests over them (`loader.sharded.read_plan`: gaps between a read's runs read through,
smallest first, within `max_over_read` times the share; requests of about one chunk of needed
bytes), so a column block is a few large requests, not one per row. Each request goes through the
source's checked, retried range requests (`RangeReader.get`: If-Match on the header's ETag, a short
or failed answer retried a bounded number of times, then one error naming the URL, the tensor and
the range); the needed bytes are copied out of each answer as it arrives and the rest dropped,
and the requests of one read go `concurrency` at a time. Nothing is written.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from loader.options import DEFAULT_MAX_OVER_READ, NO_OPTIONS, Checking, Remote, Sharing
from loader.remote.ranges import RemoteStats
from loader.remote.source import RemoteSource
from loader.sharded.files import SliceFile
from loader.sharded.layout import Layout, LayoutSource, Slice, TensorLayout, full_region
from loader.sharded.read_plan import (
    PlanFigures,
    Request,
    Run,
    closed_gaps,
    plan_requests,
    request_bytes_for,
)


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
    """One remote file of the layout: its validated header, runs fetched by range requests, as
    planned over every read of the file the load will make (`plan`; `loader.sharded.read_plan`)."""

    def __init__(
        self,
        source: RemoteSource,
        path: Path,
        pool: concurrent.futures.ThreadPoolExecutor | None,
        *,
        max_over_read: float,
        on_plan: Callable[[PlanFigures, float], None],
    ) -> None:
        self.header = source.headers[str(path)]
        self._obj = source.objects[str(path)]
        self._reader = source.reader
        self._pool = pool
        self._max_over_read = max_over_read
        self._request_bytes = request_bytes_for(self._reader.chunk_bytes, max_over_read)
        self._closed: frozenset[int] = frozenset()
        self._on_plan = on_plan

    def plan(self, reads: list[list[Run]], max_over_read: float | None = None) -> None:
        """Choose the gaps to read through over every read of this file (`closed_gaps`), within
        the file's `max_over_read` or the lower `max_over_read` given, and report what the plan
        will request and the bound it ran under (`on_plan`)."""
        bound = (
            self._max_over_read
            if max_over_read is None
            else min(self._max_over_read, max_over_read)
        )
        self._closed = closed_gaps(reads, bound)
        planned = [plan_requests(runs, self._closed, self._request_bytes) for runs in reads]
        self._on_plan(sum((PlanFigures.of(r) for r in planned), PlanFigures()), bound)

    def plan_figures(self, reads: list[list[Run]]) -> PlanFigures:
        """The requests and bytes `plan(reads)` would plan (nothing planned nor requested)."""
        closed = closed_gaps(reads, self._max_over_read)
        planned = [plan_requests(runs, closed, self._request_bytes) for runs in reads]
        return sum((PlanFigures.of(r) for r in planned), PlanFigures())

    def read_runs(self, raw: np.ndarray, runs: list[Run], *, what: str) -> None:
        requests = plan_requests(runs, self._closed, self._request_bytes)

        def fetch(request: Request) -> None:
            data = self._reader.get(self._obj, request.start, request.end, what=what)
            answer = np.frombuffer(data, np.uint8)
            for a, at, n in request.copies:  # the needed bytes; the gaps are dropped with `data`
                raw[a : a + n] = answer[at : at + n]
            del answer, data

        if self._pool is None or len(requests) == 1:
            for request in requests:
                fetch(request)
        else:
            list(self._pool.map(fetch, requests))

    def close(self) -> None:
        return None  # the source's files hold no handle; the source closes the pool


class RemoteLayoutSource(LayoutSource):
    """A `LayoutSource` whose slices are read from a `RemoteSource` (see the module docstring)."""

    over_a_link = True

    def __init__(self, source: RemoteSource, max_over_read: float = DEFAULT_MAX_OVER_READ) -> None:
        super().__init__(remote_layout(source))
        self.path = source.path
        self.remote = source
        self.max_over_read = max_over_read  # checked by `loader.options.Sharing`
        self._planned = PlanFigures()
        self._bound = self.max_over_read  # the bound the plans ran under (lower in bytes mode)
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(
                source.concurrency, thread_name_prefix="loader-sharded-remote"
            )
            if source.concurrency > 1
            else None
        )

    def open_file(self, path: Path) -> SliceFile:
        return RemoteSliceFile(
            self.remote,
            path,
            self._pool,
            max_over_read=self.max_over_read,
            on_plan=self._add_plan,
        )

    def _add_plan(self, figures: PlanFigures, bound: float) -> None:
        self._planned += figures
        self._bound = bound

    def remote_stats(self) -> RemoteStats | None:
        """The source's requests and bytes, with the read plan's (`RemoteStats.planned_requests`,
        `planned_bytes`, `needed_bytes`, under `max_over_read`: the bound the plan ran under,
        `loader.sharded.share.BYTES_MAX_OVER_READ` at most in bytes mode)."""
        p = self._planned
        return dataclasses.replace(
            self.remote.stats(),
            max_over_read=self._bound,
            planned_requests=p.requests,
            planned_bytes=p.read_bytes,
            needed_bytes=p.needed_bytes,
        )

    def finish_reads(self) -> None:
        """The digests: checked where this process read the whole files (one process)."""
        import jax

        self.remote.finish_reads(whole=jax.process_count() == 1)

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self.remote.close()


def open_remote_layout(
    url: str,
    remote: Remote = NO_OPTIONS.remote,
    checking: Checking = NO_OPTIONS.checking,
    sharing: Sharing = NO_OPTIONS.sharing,
) -> RemoteLayoutSource:
    """The source of a remote checkpoint (a registered store's URL) for the `sharded` strategy:
    read as `remote` and `checking` say, its read plan bound by `sharing`'s `max_over_read`.

    Example:
        >>> with open_remote_layout("s3://bucket/model.safetensors", Remote(8)) as source:
        ...     print(source.keys())
    """
    return RemoteLayoutSource(RemoteSource(url, remote, checking), sharing.value("max_over_read"))
