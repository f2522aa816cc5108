"""Jobs: one planned leaf on its way from the file to the model, in one of three ways.

A `Job` is what the engine (`loader.pipeline.engine`) asks of a leaf: its `parts` (the units the
reader threads read, in any order, on any thread), `read` (fill one part; the seconds it took) and
`finish` (on the main thread, once every part is read: give the leaf its value and let go of its
buffers and its budget). Each way a leaf travels is one class, carrying its own behaviour:

- `AdoptJob` (a plain array leaf, with no key_map transform or a declared one that is a strided
  view of the file tensor, `AdoptJob.view`, read through by `loader.pipeline.views`): one buffer
  per addressable device, in the leaf's dtype, holding that device's index region. Each buffer is
  handed to its device without a copy (`jax.device_put` of an aligned numpy array aliases it on
  the CPU backend), so it is the model's own memory from the start and does not count against
  the budget. From a remote source, rows that several devices hold (a kernel split by columns, a
  replicated leaf; through a view, a transposed kernel split by rows) are read once for all of
  them (`SharedRows`): each byte crosses the link once. So are the rows of a fused tensor that
  several leaves are cut from (GPT-2's q, k, v), read once for all their jobs
  (`loader.pipeline.fused`).
- `HostCopyJob` (a PRNG key, a Python scalar, a leaf transformed by a callable): the whole stored
  tensor copied into one host buffer (counted against the budget), turned into the value by
  `loader.placement.materialize` on the main thread, then dropped.
- `loader.pipeline.stacked.LayerJob` (a layer of a stacked leaf, `loader.Stack`): an `AdoptJob`
  into the layer's slices of the stacked leaf's buffers, placed once its last layer is in.
- `loader.pipeline.ring_job.RingJob` (an adoptable leaf on a backend that does not adopt host
  buffers, or with `staging=True`): each device's region streamed in chunks through the staging
  ring (`loader.pipeline.ring`) onto the device.

A job's bytes come from a `loader.pipeline.regions.Bytes` (made by the load's byte source,
`loader.pipeline.sources`, or a speculative read made before the plan); whether rows several devices
hold are read once for all of them is the `Bytes`' to say (`shares_rows`). A new kind of source is a
new `ByteSource`, a new way for a leaf to travel a new `Job` (its type chosen once, when the job is
made: `loader.pipeline.job_types`). What differs between the ways is a member each answers, so
that nothing outside them asks a job its kind: whether its parts wait for device programs
(`needs_programs`), the bytes a part puts on its devices (`device_bytes`), whether a part goes
straight from mapped pages (`mapped`: a `MappedPart`, chosen when a `RingJob` is made), and
whether a run or fused rows may read it (`joins_run`, `fusable`: itself, an `AdoptJob`). The
engine queues `Work`: one part of one job (`JobPart`), or a run of small whole jobs read at once
(`loader.pipeline.order.Run`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import jax
import numpy as np
from jax.sharding import Sharding

from loader.budget import ByteBudget
from loader.errors import CheckpointError
from loader.format import TensorInfo
from loader.format.buffers import aligned, prefault
from loader.pipeline.regions import (
    Bytes,
    Region,
    Target,
    by_rows,
    fill_region,
    fill_regions,
    full_region,
    normalize,
    region_shape,
)
from loader.pipeline.ring import host_memory
from loader.pipeline.ring_chunks import Chunk
from loader.pipeline.speculation import Speculated
from loader.pipeline.views import fill_view, fill_views, outer_axis
from loader.placement.casts import CastValueError
from loader.placement.leaves import Leaf, LeafKind
from loader.placement.materialize import apply_transform, assign, host_cast, to_device
from loader.planning.plan import LoadPlan, Step
from loader.transforms import Chain, View

PART_BYTES = 32 << 20  # a piece is split into parts of about this size, read by different threads


def reader_error(where: str, exc: BaseException) -> CheckpointError:
    """The error to raise on the main thread for a failure in a reader thread."""
    if isinstance(exc, CastValueError):  # a value check in the cast: name the tensor
        return exc.at(where)
    if isinstance(exc, CheckpointError):  # already names the file and tensor (the byte source)
        return exc
    err = CheckpointError(f"{where}: reading failed ({type(exc).__name__}: {exc})")
    err.__cause__ = exc
    return err


P = TypeVar("P")


class Job(Protocol[P]):
    """One planned leaf on its way from the file to the model: what the engine asks of it.

    Attributes:
        step: the planned step (the leaf, its file key, sharding and transform).
        file: the file its bytes are read from (parts are queued by file, files in turn).
        where: the file and tensor, for error messages.
        casts: its reads convert the file's dtype (their time is `cast`, else `read`).
        holds_budget: it holds budgeted bytes until finished (its parts are queued first, so a
            reader waiting for budget waits only for parts already taken).
    """

    step: Step

    @property
    def file(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def casts(self) -> bool: ...

    @property
    def holds_budget(self) -> bool: ...

    @property
    def needs_programs(self) -> bool:
        """A shard of it is assembled or transposed on its device by a compiled program (the
        staged path's `RingJob`): its parts are queued after most others, while they compile."""
        ...

    @property
    def shard_bytes(self) -> int:
        """The bytes of its largest device shard sent through the staged path (else 0)."""
        ...

    @property
    def fusable(self) -> AdoptJob | None:
        """Itself, where it reads one stored tensor through a view into buffers its devices
        adopt, so that leaves cut from the same tensor may read its rows once together
        (`loader.pipeline.fused`); else None."""
        ...

    def joins_run(self, small_bytes: int) -> AdoptJob | None:
        """Itself, where it reads one whole tensor of at most `small_bytes` in the file's dtype
        into one buffer its device adopts, so that a run of adjacent ones is read at once
        (`loader.pipeline.order.coalesce`); else None."""
        ...

    def parts(self) -> Sequence[P]:
        """The parts still to read (none: the job is ready to finish)."""
        ...

    def device_bytes(self, part: P) -> int:
        """The bytes `part` puts on its devices through the staged path (else 0)."""
        ...

    def mapped(self, work: JobPart[P]) -> MappedPart | None:
        """`work` (one of its parts) as planned to go straight from mapped file pages to its
        device, sent by `loader.pipeline.mapped_send`; None: a reader thread reads it."""
        ...

    def read(self, part: P, scratch: np.ndarray) -> float:
        """Fill one part (on a reader thread, `scratch` its own); the seconds spent reading."""
        ...

    def finish(self, plan: LoadPlan) -> None:
        """Give the leaf its value and record it (main thread); let go of buffers and budget."""
        ...


class Work(Protocol):
    """What a reader thread takes off the queue: `read` it, then each of `jobs` has one part
    fewer to wait for."""

    @property
    def jobs(self) -> Sequence[Job[Any]]: ...

    @property
    def where(self) -> str: ...

    @property
    def casts(self) -> bool: ...

    @property
    def device_bytes(self) -> int:
        """The bytes it puts on devices through the staged path (0 for other work)."""
        ...

    def mapped(self) -> MappedPart | None:
        """Itself as a part that goes straight from mapped pages (no reader reads it), or None."""
        ...

    def read(self, scratch: np.ndarray) -> float: ...


class MapsChunks(Protocol):
    """A job whose chunks may go straight from mapped file pages to their devices (the staged
    path's `loader.pipeline.ring_job.RingJob`): what `loader.pipeline.mapped_send` asks of it."""

    @property
    def where(self) -> str: ...

    def map_chunk(
        self, part: Chunk, offset: int, nbytes: int
    ) -> tuple[np.ndarray, np.ndarray] | None: ...

    def through_ring(self, part: Chunk, scratch: np.ndarray) -> float: ...

    def is_whole(self, part: Chunk, *, on_host: bool) -> bool: ...

    def arrived(
        self, part: Chunk, handle: object, *, on_host: bool
    ) -> tuple[object | None, bool]: ...

    def fold_arrived(self) -> bool: ...


@dataclass(frozen=True)
class MappedPart:
    """A queued part planned to go straight from mapped pages: a chunk of `job`, at `offset` in
    its source, `nbytes` long (`Work.mapped`)."""

    work: Work
    job: MapsChunks
    chunk: Chunk
    offset: int
    nbytes: int


@dataclass(frozen=True)
class JobPart(Generic[P]):
    """One part of one job, as `Work`."""

    job: Job[P]
    part: P

    @property
    def jobs(self) -> tuple[Job[P]]:
        return (self.job,)

    @property
    def where(self) -> str:
        return self.job.where

    @property
    def casts(self) -> bool:
        return self.job.casts

    @property
    def device_bytes(self) -> int:
        return self.job.device_bytes(self.part)

    def mapped(self) -> MappedPart | None:
        return self.job.mapped(self)

    def read(self, scratch: np.ndarray) -> float:
        return self.job.read(self.part, scratch)


@dataclass
class Piece:
    """One destination buffer: a device's region of the tensor (or the whole tensor)."""

    device: object | None
    region: Region
    dest: np.ndarray


@dataclass(frozen=True)
class Part:
    """Some rows of one piece (indices along `axis`): what one reader fills at a time."""

    piece: Piece
    rows: slice
    axis: int = 0  # a view's parts are cut along its outer axis (`views.outer_axis`)


@dataclass(frozen=True)
class SharedRows:
    """Rows of the stored tensor that several pieces hold (the column blocks of a kernel split
    over devices all span its rows; a replicated leaf's pieces are all of it): read once, and
    every piece's region of them cut from that one read (`regions.fill_regions`). Through a
    view, the rows are indices along its outer axis (`views.fill_views`)."""

    pieces: tuple[Piece, ...]
    rows: slice
    axis: int = 0


def job_view(step: Step, info: TensorInfo) -> View | None:
    """The step's declared transform as a strided view of the file tensor (None: none, no view)."""
    return step.transform.view(info.shape) if isinstance(step.transform, Chain) else None


def is_adoptable(step: Step, view: View | None = None) -> bool:
    """An array leaf with a sharding, read as stored or through a view: its buffers can be the
    model's own (`AdoptJob`, `RingJob`); anything else goes through a `HostCopyJob`."""
    plain = step.transform is None or view is not None
    return step.leaf.kind is LeafKind.ARRAY and plain and step.sharding is not None


def device_regions(step: Step) -> tuple[tuple[object, Region], ...]:
    """(device, index region) for each addressable device the leaf lives on (shared: not to be
    changed by the caller)."""
    return _device_regions(step.placement(), step.leaf.shape)


@functools.lru_cache(maxsize=1024)
def _device_regions(
    sharding: Sharding, shape: tuple[int, ...]
) -> tuple[tuple[object, Region], ...]:
    """`device_regions` per (sharding, shape): a load asks it of each step several times (its
    job, the host bytes, the device-fit check), and a model's leaves share a few of each."""
    regions = []
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        assert index is not None, f"jax gave device {device} no index of {shape} by {sharding}"
        regions.append((device, normalize(index, shape)))
    return tuple(regions)


def _leaf_bytes(leaf: Leaf) -> int:
    shape, dtype = leaf.stored_shape_dtype()
    return math.prod(shape) * np.dtype(dtype).itemsize


def host_bytes(step: Step) -> int:
    """The host RAM a step's leaf takes once loaded: its bytes on each addressable device whose
    memory is the host's (the CPU backend's; a leaf replicated over 8 such devices, 8 times),
    nothing on an accelerator's (the ring path leaves only its ring on the host)."""
    nbytes = _leaf_bytes(step.leaf)
    if step.sharding is None:  # a Python scalar
        return nbytes
    size = math.prod(step.leaf.shape)
    if size == 0:
        return 0
    on_host = sum(
        math.prod(region_shape(region))
        for device, region in device_regions(step)
        if host_memory(device)
    )
    return nbytes * on_host // size


def model_bytes_per_device(steps: list[Step]) -> dict[object, int]:
    """The bytes each device will hold of the planned leaves (their regions, in the model's
    dtypes)."""
    need: dict[object, int] = {}
    for step in steps:
        if step.sharding is None:  # a Python scalar: no device memory
            continue
        itemsize = np.dtype(step.leaf.dtype).itemsize
        for device, region in device_regions(step):
            need[device] = need.get(device, 0) + math.prod(region_shape(region)) * itemsize
    return need


def tensor_where(file: str, step: Step) -> str:
    """The file and tensor a job reads, as its errors name them."""
    return f"{file}: tensor {step.file_key!r}"


def cut_parts(pieces: list[Piece], part_bytes: float, view: View | None = None) -> list[Part]:
    """Each piece cut into parts of about `part_bytes`: along axis 0, or a view's outer axis."""
    parts = []
    for piece in pieces:
        if piece.dest.size == 0:
            continue
        axis = outer_axis(view.restrict(piece.region)) if view is not None else 0
        rows = piece.region[axis] if piece.region else slice(0, 1)
        parts += [Part(piece, r, axis) for r in _cut_rows(rows, piece.dest.nbytes, part_bytes)]
    return parts


def _cut_rows(rows: slice, nbytes: float, part_bytes: float) -> list[slice]:
    """`rows` (holding `nbytes`) cut into about equal slices of about `part_bytes` each."""
    n_rows = rows.stop - rows.start
    k = max(1, min(n_rows, math.ceil(nbytes / part_bytes)))
    bounds = [rows.start + (n_rows * i) // k for i in range(k + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def shared_parts(
    pieces: list[Piece], row_bytes: int, part_bytes: float, axis: int = 0
) -> list[SharedRows]:
    """The pieces grouped by the rows (along `axis`) they hold (`by_rows`), each group's rows
    cut into parts of about `part_bytes` of the file (`row_bytes` a row)."""
    pieces = [piece for piece in pieces if piece.dest.size]
    return [
        SharedRows(tuple(pieces[i] for i in group), rows, axis)
        for (start, stop), group in by_rows([piece.region for piece in pieces], axis).items()
        for rows in _cut_rows(slice(start, stop), (stop - start) * row_bytes, part_bytes)
    ]


def _row_target(piece: Piece, rows: slice) -> Target:
    """The piece's region within `rows` of the stored tensor, and those rows of its buffer
    (prefaulted)."""
    if not piece.region:  # a 0-d tensor
        prefault(piece.dest)
        return (), piece.dest
    first = piece.region[0].start
    dest = piece.dest[rows.start - first : rows.stop - first]
    prefault(dest)
    return (rows, *piece.region[1:]), dest


def read_rows(source: Bytes, info: TensorInfo, part: Part, scratch: np.ndarray) -> np.ndarray:
    """Fill one part (rows of a piece) straight from the stored tensor; the destination filled."""
    region, dest = _row_target(part.piece, part.rows)
    fill_region(source, info.shape, info.np_dtype, region, dest, scratch)
    return dest


def read_shared_rows(
    source: Bytes, info: TensorInfo, view: View | None, part: SharedRows, scratch: np.ndarray
) -> None:
    """Fill every piece's share of some rows of the stored tensor (of `view`'s outer axis),
    reading those rows once."""
    if view is None:
        targets = [_row_target(piece, part.rows) for piece in part.pieces]
        fill_regions(source, info.shape, info.np_dtype, targets, scratch)
        return
    k, rows = part.axis, part.rows
    targets = []
    for piece in part.pieces:
        first = piece.region[k].start
        if rows.start == first:  # the whole piece once (its parts write strided blocks of it)
            prefault(piece.dest)
        index = (slice(None),) * k + (slice(rows.start - first, rows.stop - first),)
        targets.append(((*piece.region[:k], rows, *piece.region[k + 1 :]), piece.dest[index]))
    fill_views(source, info.np_dtype, view, targets, scratch)


def read_view_rows(
    source: Bytes, info: TensorInfo, view: View, part: Part, scratch: np.ndarray
) -> np.ndarray:
    """Fill one part of a piece through `view` (`loader.pipeline.views`); the destination filled."""
    piece, axis = part.piece, part.axis
    first = piece.region[axis].start
    if part.rows.start == first:  # the whole piece once (its parts write strided blocks of it)
        prefault(piece.dest)
    index = (slice(None),) * axis + (slice(part.rows.start - first, part.rows.stop - first),)
    region = (*piece.region[:axis], part.rows, *piece.region[axis + 1 :])
    dest = piece.dest[index]
    fill_view(source, info.np_dtype, view.restrict(region), dest, scratch)
    return dest


class OffTheStagedPath:
    """What a job whose buffers stay host memory answers about the staged path (`RingJob`'s):
    no device program, no bytes through the ring, no part from mapped pages."""

    needs_programs = False
    shard_bytes = 0

    def device_bytes(self, part: object) -> int:
        return 0

    def mapped(self, work: JobPart[Any]) -> MappedPart | None:
        return None


@dataclass(eq=False)
class AdoptJob(OffTheStagedPath):
    """A leaf read into one buffer per addressable device, in its dtype, that the device adopts.

    A speculative buffer (the whole tensor in the file's dtype, read before the plan) becomes the
    buffer itself when the leaf lives whole on one device in that dtype: its budget is released
    at once, and a filled one leaves nothing to read. Otherwise it is only a source to cast or
    slice from, held in the budget until the job is finished.
    """

    step: Step
    info: TensorInfo
    source: Bytes | None  # None once the job is finished (its buffer is let go)
    pieces: list[Piece]
    file: str
    budget: ByteBudget
    view: View | None = None  # a declared transform's result, as a view of the file tensor
    held_bytes: int = 0  # a speculative source's budget, released at finish
    read_already: bool = False  # the speculative buffer is the filled destination: no parts
    from_speculation: bool = False  # its source is a speculative read's buffer, in memory
    #: its parts read at most this (`Sizing.max_part_bytes`: one request, where the source takes
    #: its bytes in file order); they are about `PART_BYTES` where that is less
    max_part_bytes: float = math.inf

    @classmethod
    def start(
        cls,
        step: Step,
        info: TensorInfo,
        source: Bytes,
        file: str,
        budget: ByteBudget,
        *,
        view: View | None = None,
        spec: Speculated | None = None,
    ) -> AdoptJob:
        """The job of an adoptable step, reusing (or reading from) `spec` if there is one."""
        pieces, reused = _adopt_pieces(step, spec.buffer if spec and view is None else None)
        job = cls(step, info, source, pieces, file, budget, view=view)
        job.from_speculation = spec is not None and spec.filled
        if reused:
            budget.release(info.nbytes)  # the speculative buffer is the model's own now
            job.read_already = spec is not None and spec.filled
        elif spec is not None:
            job.held_bytes = info.nbytes  # a source to cast or slice from; freed at finish
        return job

    @property
    def where(self) -> str:
        return tensor_where(self.file, self.step)

    @property
    def casts(self) -> bool:
        return bool(np.dtype(self.step.leaf.dtype) != self.info.np_dtype)

    @property
    def holds_budget(self) -> bool:
        return self.held_bytes > 0

    @property
    def fusable(self) -> AdoptJob | None:
        return self if self.view is not None and self.source is not None else None

    def joins_run(self, small_bytes: int) -> AdoptJob | None:
        """Itself where it is read whole from the file in its own dtype onto one device, in one
        part, at most `small_bytes` (not a layer of a stacked leaf: its destination is a slice
        of the leaf, not a run's arena). Such a job reads from the byte source: a speculative
        buffer it would read from instead holds budget (`holds_budget`) or is its destination
        already (`read_already`)."""
        if self.view is not None or self.read_already:
            return None
        if self.step.layer is not None or len(self.pieces) != 1:
            return None
        piece = self.pieces[0]
        alone = (
            piece.region == full_region(self.info.shape)
            and piece.dest.dtype == self.info.np_dtype
            and 0 < self.info.nbytes <= small_bytes
            and not self.holds_budget
        )
        return self if alone else None

    @property
    def reads_rows_once(self) -> bool:
        """Its pieces' rows are read once for all of them (`SharedRows`), not piece by piece:
        where its bytes say so (`Bytes.shares_rows`: a remote source's, where every byte read
        again is a request over the link again; a local file's are page-cache reads)."""
        leaf_axes = self.view is None or all(piece.region for piece in self.pieces)
        shares = self.source is not None and self.source.shares_rows
        return len(self.pieces) > 1 and leaf_axes and shares

    def parts(self) -> list[Part] | list[SharedRows]:
        """The parts to read, in row order, of about `PART_BYTES` (at most `max_part_bytes`)."""
        if self.read_already:
            return []
        part_bytes = min(PART_BYTES, self.max_part_bytes)
        if self.reads_rows_once:
            itemsize, view = self.info.np_dtype.itemsize, self.view
            if view is None:
                row_bytes = math.prod(self.info.shape[1:]) * itemsize
                return shared_parts(self.pieces, row_bytes, part_bytes)
            k = outer_axis(view)
            return shared_parts(self.pieces, view.strides[k] * itemsize, part_bytes, k)
        return cut_parts(self.pieces, part_bytes, self.view)

    def read(self, part: Part | SharedRows, scratch: np.ndarray) -> float:
        assert self.source is not None, f"{self.where}: read after the job was finished"
        t0 = time.perf_counter()
        if isinstance(part, SharedRows):
            read_shared_rows(self.source, self.info, self.view, part, scratch)
        elif self.view is not None:  # a declared transform: read through its view, in chunks
            read_view_rows(self.source, self.info, self.view, part, scratch)
        else:
            read_rows(self.source, self.info, part, scratch)
        return time.perf_counter() - t0

    def finish(self, plan: LoadPlan) -> None:
        step = self.step
        assign(step.leaf, placed(step.leaf.shape, step.placement(), self.pieces))
        plan.report.loaded.append(step.leaf.key)
        self.let_go()

    def let_go(self) -> None:
        """Drop the job's buffers and source, and give back the budget it holds."""
        self.pieces.clear()
        self.source = None
        self.budget.release(self.held_bytes)
        self.held_bytes = 0


def placed(shape: tuple[int, ...], sharding: Sharding, pieces: list[Piece]) -> jax.Array:
    """The array of `shape` from its filled device buffers, each handed to its device (adopted
    without a copy on the CPU backend)."""
    if len(pieces) == 1 and pieces[0].region == full_region(shape):
        whole: jax.Array = jax.device_put(pieces[0].dest, sharding)
        return whole
    arrays = [jax.device_put(p.dest, p.device) for p in pieces]
    return jax.make_array_from_single_device_arrays(shape, sharding, arrays)


def _adopt_pieces(step: Step, spec: np.ndarray | None) -> tuple[list[Piece], bool]:
    """Destination buffers in the leaf's dtype, and whether the speculative buffer is one of them
    (the leaf lives whole on one device in the file's dtype)."""
    dtype = np.dtype(step.leaf.dtype)
    regions = device_regions(step)
    whole = len(regions) == 1 and regions[0][1] == full_region(step.leaf.shape)
    if whole and spec is not None and spec.dtype == dtype:
        return [Piece(regions[0][0], regions[0][1], spec.reshape(step.leaf.shape))], True
    return [Piece(d, r, aligned(region_shape(r), dtype)) for d, r in regions], False


@dataclass(eq=False)
class HostCopyJob(OffTheStagedPath):
    """A leaf whose whole stored tensor is copied into one host buffer (in the file's dtype),
    then made its value on the main thread (`loader.placement.materialize`: a transform by a
    callable, a PRNG key, a Python scalar). The buffer is counted in the budget until the job is
    finished: a speculative buffer's bytes are already held; otherwise the reader takes them before
    it reads."""

    step: Step
    info: TensorInfo
    source: Bytes | None  # None once the job is finished
    buffer: np.ndarray | None  # the whole tensor, in the file's dtype; None once finished
    file: str
    budget: ByteBudget
    held_bytes: int = 0  # budget held until finished
    needed_bytes: int = 0  # budget the reader takes before reading
    read_already: bool = False

    @classmethod
    def start(
        cls,
        step: Step,
        info: TensorInfo,
        source: Bytes,
        file: str,
        budget: ByteBudget,
        *,
        spec: Speculated | None = None,
    ) -> HostCopyJob:
        """The job of a step that is not adoptable, reading into `spec`'s buffer if there is one."""
        if spec is not None:
            buffer = spec.buffer.reshape(info.shape)
            held, filled = info.nbytes, spec.filled
            return cls(step, info, source, buffer, file, budget, held, read_already=filled)
        buffer = aligned(info.shape, info.np_dtype)
        return cls(step, info, source, buffer, file, budget, needed_bytes=info.nbytes)

    @property
    def where(self) -> str:
        return tensor_where(self.file, self.step)

    @property
    def casts(self) -> bool:
        return False  # read in the file's dtype; the cast, if any, is at finish

    @property
    def holds_budget(self) -> bool:
        return self.held_bytes > 0

    fusable = None  # the whole tensor, into its own host buffer

    def joins_run(self, small_bytes: int) -> AdoptJob | None:
        return None

    def parts(self) -> list[Part]:
        if self.read_already or self.buffer is None:
            return []
        return cut_parts([Piece(None, full_region(self.info.shape), self.buffer)], math.inf)

    def read(self, part: Part, scratch: np.ndarray) -> float:
        assert self.source is not None, f"{self.where}: read after the job was finished"
        if self.needed_bytes:  # one part only: no other reader takes these bytes
            self.budget.acquire(self.needed_bytes)
            self.held_bytes, self.needed_bytes = self.needed_bytes, 0
        t0 = time.perf_counter()
        read_rows(self.source, self.info, part, scratch)
        return time.perf_counter() - t0

    def finish(self, plan: LoadPlan) -> None:
        step, buffer = self.step, self.buffer
        assert buffer is not None, f"{self.where}: finished twice"
        self.buffer = self.source = None
        try:
            host = apply_transform(step, buffer, plan)
            if host is not None:  # None: a transform produced the wrong shape (reported)
                assign(step.leaf, to_device(step, host_cast(step.leaf, host)))
                plan.report.loaded.append(step.leaf.key)
        finally:
            self.budget.release(self.held_bytes)
            self.held_bytes = 0
