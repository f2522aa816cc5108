"""Read any index range of a tensor, from the slices that hold it or ahead of the executor; write
one process's shard file.

`SliceReader.read_region(key, region)` opens (lazily, so a process touches only the files it
needs) each shard file through a `SliceFile`, whose header is checked against the layout, then
reads only the bytes of the requested range: one read when the range is a whole stored slice,
else one read per contiguous run (`box_runs`). A local file (`LocalSliceFile`) reads them with
`os.preadv`; a remote one (`loader.sharded.remote`) with checked range requests, planned over
every read the load will make when told them first (`SliceReader.plan`). `write_shard` streams
slices into one `.safetensors` file, one host buffer at a time, atomically.

Reading ahead (`ReadAhead`, in front of the slice reader; both are
`loader.sharded.reads.RegionReader`s). The sharded executor fills one tensor at a time: read its
ranges, then place them, and in bytes mode (`loader.sharded.share`) compile its resharding
program and run the collectives, which wait for every process. Read one after the other, a
process's link idles through all of that, and a small tensor's one range request waits out a
whole round trip alone. Told the load's planned reads (`ReadAhead.plan`: every range the
executor will ask for, in its order; the slice reader is told them too), `ReadAhead` reads them on
`workers` threads of its own ahead of the one the executor asks for (`read_region`), so the link
stays busy while the executor places, compiles and exchanges. Host memory is bound by the
byte budget both engines count with (`loader.budget`): a read ahead takes its bytes from the load's
`ByteBudget` (`budget=`, 256 MiB by default, as `pipelined`'s) when it starts and gives them back
when the executor takes it, and one read larger than the budget is let through only when nothing
else is held (`ReadAhead.over_budget`: the load names those tensors in `LoadReport.over_budget`
and warns); the budget's high-water mark is the load's `LoadReport.inflight_peak_bytes`. A read
nobody planned (a tensor that falls back to regions) is read at once, on the executor's thread,
beside what is held.
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loader.budget import DEFAULT_BUDGET_BYTES, ByteBudget
from loader.errors import CheckpointError
from loader.format import DTYPES, encode_header
from loader.format.atomic import atomic_open
from loader.format.buffers import host_buffer
from loader.format.source import pread_exact
from loader.sharded.files import LocalSliceFile, SliceFile
from loader.sharded.layout import Layout, Region, Slice, extents, intersect
from loader.sharded.read_plan import ByteRun, PlanFigures
from loader.sharded.reads import PlannedRead, RegionReader

#: A range read at least this large goes into its own anonymous mapping (`host_buffer`), which is
#: returned to the system when freed; below it, into the C heap, which may keep what it frees.
MAPPED_BYTES = 1 << 20
#: The reads in progress at once: several small tensors' requests share the round trip's wait
#: (a large read is itself several requests in flight: the remote file's `concurrency`).
READ_AHEAD_WORKERS = 4


@dataclass(frozen=True)
class _Part:
    """The part `part` (global indices) of a read that stored slice `slice` holds, and its runs."""

    slice: Slice
    file: SliceFile
    part: Region
    runs: list[ByteRun]


class SliceReader:
    """Reads index ranges of a layout's tensors, opening each shard file on first use.

    Attributes:
        opened: the shard files opened so far (tests check that a process opens only its own).
        read_bytes: the bytes of the index ranges read so far (a process's share, once each).
    """

    def __init__(
        self, layout: Layout, open_file: Callable[[Path], SliceFile] = LocalSliceFile
    ) -> None:
        self.layout = layout
        self.opened: list[Path] = []
        self.read_bytes = 0
        self._open_file = open_file
        self._files: dict[Path, SliceFile] = {}
        self._lock = threading.Lock()  # reads may come from several threads (`ReadAhead`)

    def _file(self, path: Path) -> SliceFile:
        with self._lock:
            if path not in self._files:
                self._files[path] = self._open_file(path)
                self.opened.append(path)
            return self._files[path]

    def _stored(self, key: str, s: Slice) -> SliceFile:
        """The open file of slice `s`, after checking its header agrees with the layout."""
        file = self._file(s.file)
        t = self.layout.tensors[key]
        info = file.header.tensors.get(s.key)
        if info is None or info.dtype != t.dtype or info.shape != extents(s.region):
            found = "absent" if info is None else f"{info.dtype} {list(info.shape)}"
            raise CheckpointError(
                f"{s.file}: slice {s.key!r} of tensor {key!r} should be {t.dtype} "
                f"{list(extents(s.region))} as {self.layout.path} says, but is {found}; "
                "the shard file does not belong to this manifest (save the checkpoint again)"
            )
        return file

    def _parts(self, key: str, region: Region) -> Iterator[_Part]:
        """The stored slices that hold part of `region`, each with its runs (`box_runs`)."""
        t = self.layout.tensors[key]
        itemsize = DTYPES[t.dtype].itemsize
        for s in t.slices:
            part = intersect(s.region, region)
            if part is None:
                continue
            file = self._stored(key, s)
            offset = file.header.file_offset(s.key)
            local = tuple((a - o, b - o) for (a, b), (o, _) in zip(part, s.region))
            runs = box_runs(offset, extents(s.region), local, itemsize)
            yield _Part(s, file, part, runs)

    def _by_file(self, reads: Iterable[PlannedRead]) -> dict[Path, list[list[ByteRun]]]:
        by_file: dict[Path, list[list[ByteRun]]] = {}
        for read in reads:
            if math.prod(extents(read.region)) == 0:
                continue
            for p in self._parts(read.key, read.region):
                by_file.setdefault(p.slice.file, []).append(p.runs)
        return by_file

    def planned(self, key: str, region: Region) -> PlannedRead:
        """The read of tensor `key`'s global `region`, with its bytes.

        Example:
            >>> reader.planned("fc.kernel", ((0, 4), (0, 8)))  # F32
            PlannedRead(key='fc.kernel', region=((0, 4), (0, 8)), nbytes=128)
        """
        itemsize = DTYPES[self.layout.tensors[key].dtype].itemsize
        return PlannedRead(key, region, math.prod(extents(region)) * itemsize)

    def plan(self, reads: Sequence[PlannedRead], max_over_read: float | None = None) -> None:
        """Tell each file every read `read_region` will make of it, so that a remote file plans
        its requests over all of them (`loader.sharded.read_plan`), within `max_over_read` where
        given (else the file's own bound)."""
        for path, runs in self._by_file(reads).items():
            self._file(path).plan(runs, max_over_read)

    def plan_figures(self, reads: Sequence[PlannedRead]) -> PlanFigures:
        """The requests (a local file: the reads) and bytes `reads` would take if they were the
        load's reads, planned as `plan` would (nothing is read, nor planned)."""
        return sum(
            (self._file(path).plan_figures(runs) for path, runs in self._by_file(reads).items()),
            PlanFigures(),
        )

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """The values of tensor `key` in the global `region`, as a fresh host array."""
        t = self.layout.tensors[key]
        dtype = DTYPES[t.dtype]
        shape = extents(region)
        large = math.prod(shape) * dtype.itemsize >= MAPPED_BYTES
        out = host_buffer(shape, dtype) if large else np.empty(shape, dtype)
        with self._lock:
            self.read_bytes += out.nbytes
        if out.size == 0:
            return out
        for p in self._parts(key, region):
            what = f"tensor {key!r}" if p.slice.key == key else f"slice {p.slice.key!r}"
            box = out if p.part == region else np.empty(extents(p.part), dtype)
            p.file.read_runs(box.reshape(-1).view(np.uint8), p.runs, what=what)
            if p.part == region:  # the whole request lies in this one slice
                return out
            out[tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(p.part, region))] = box
        return out

    def close(self) -> None:
        for file in self._files.values():
            file.close()
        self._files.clear()

    def __enter__(self) -> SliceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReadAhead:
    """The planned reads of one load, read ahead within `budget` on `workers` threads.

    Example:
        >>> ahead = ReadAhead(reader, ByteBudget(64 << 20))
        >>> ahead.plan([PlannedRead("w", ((0, 4), (0, 8)), 128)])
        >>> host = ahead.read_region("w", ((0, 4), (0, 8)))  # read ahead, taken now
        >>> ahead.close()
    """

    def __init__(
        self,
        reader: RegionReader,
        budget: ByteBudget | None = None,
        workers: int = READ_AHEAD_WORKERS,
    ) -> None:
        self._reader = reader
        self.budget = budget if budget is not None else ByteBudget(DEFAULT_BUDGET_BYTES)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="loader-ahead"
        )
        self._waiting: collections.deque[PlannedRead] = collections.deque()
        self._reading: collections.deque[tuple[PlannedRead, concurrent.futures.Future[np.ndarray]]]
        self._reading = collections.deque()
        #: the reads larger than what the budget allows, each read alone (nothing else held):
        #: the budget's high-water mark is over its limit by the largest of them
        self.over_budget: list[PlannedRead] = []

    def plan(self, reads: Sequence[PlannedRead], max_over_read: float | None = None) -> None:
        """The reads `read_region` will be asked for, in that order: told to the slice reader,
        and reading them starts now."""
        self._reader.plan(reads, max_over_read)
        self._waiting.extend(reads)
        self._top_up()

    def _top_up(self) -> None:
        while self._waiting:
            read = self._waiting[0]
            if not self.budget.try_acquire(read.nbytes):
                if self._reading:
                    return  # the budget is full: the next read starts when one is taken
                self.budget.acquire(read.nbytes)  # nothing held: one read larger than it goes
                if read.nbytes > self.budget.limit_bytes:
                    self.over_budget.append(read)
            self._waiting.popleft()
            future = self._pool.submit(self._reader.read_region, read.key, read.region)
            self._reading.append((read, future))

    def read_region(self, key: str, region: Region) -> np.ndarray:
        """`key`'s `region`: the planned read, once it is in (the reads planned before it stay
        until asked for or closed), or, where it was not planned or not started yet, read now."""
        for at, (read, future) in enumerate(self._reading):
            if (read.key, read.region) == (key, region):
                del self._reading[at]
                try:
                    return future.result()
                finally:
                    self.budget.release(read.nbytes)
                    self._top_up()
        for at, read in enumerate(self._waiting):
            if (read.key, read.region) == (key, region):  # asked before its turn: read now, once
                del self._waiting[at]
                break
        return self._reader.read_region(key, region)

    def close(self) -> None:
        """Drop the reads not started, and wait for those in progress."""
        self._waiting.clear()
        for _, future in self._reading:
            future.cancel()
        self._reading.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def box_runs(offset: int, stored: tuple[int, ...], box: Region, itemsize: int) -> list[ByteRun]:
    """The contiguous byte runs of `box` of a C-contiguous array of shape `stored` at file
    `offset`: `(offset in the box's bytes, offset in the file, length)`, in order.

    Axes after the last partially covered one are contiguous, so each run is one read.
    """
    cut = max((i for i, (r, d) in enumerate(zip(box, stored)) if r != (0, d)), default=-1)
    if cut < 0:  # the whole stored slice
        return [(0, offset, math.prod(stored) * itemsize)]
    strides = [math.prod(stored[i + 1 :]) for i in range(len(stored))]
    run = (box[cut][1] - box[cut][0]) * strides[cut] * itemsize
    outer = [range(a, b) for a, b in box[:cut]]
    runs = []
    for n, index in enumerate(np.ndindex(*[len(r) for r in outer]) if outer else [()]):
        start = (
            sum((outer[i][j]) * strides[i] for i, j in enumerate(index))
            + box[cut][0] * strides[cut]
        )
        runs.append((n * run, offset + start * itemsize, run))
    return runs


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
    """Read `box` of a C-contiguous array of shape `stored` at file `offset` into `out` (or new),
    one `preadv` per contiguous run (`box_runs`)."""
    if out is None:
        out = np.empty(extents(box), dtype)
    raw = out.reshape(-1).view(np.uint8)
    for a, at, n in box_runs(offset, stored, box, out.dtype.itemsize):
        pread_exact(fd, raw[a : a + n], at, where=where)
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
