"""What each planned leaf needs: destination buffers per device, the parts to read, and the value.

Two kinds of job:
- `adopt` (a plain array leaf, with no key_map transform or a declared one that is a strided view
  of the file tensor, `LeafJob.view`, read through by `loader.pipeline.views`): one buffer per
  addressable device, in the leaf's dtype, holding that device's index region. Each buffer is
  handed to its device without a copy (`jax.device_put` of an aligned numpy array aliases it on
  the CPU backend), so it is the model's own memory from the start and does not count against
  the budget.
- `stage` (a PRNG key, a Python scalar, a leaf transformed by a callable): the whole stored
  tensor in one host buffer (counted against the budget), turned into the value by
  `loader.materialize` on the main thread, then dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.sharding import Sharding

from loader.format import TensorInfo
from loader.format.buffers import aligned, prefault
from loader.materialize import apply_transform, assign, host_cast, to_device
from loader.pipeline.regions import Bytes, Region, fill_region, full_region, normalize
from loader.pipeline.views import fill_view, outer_axis
from loader.planning import LoadPlan, Step
from loader.transforms import Chain, View

PART_BYTES = 32 << 20  # a piece is split into parts of about this size, read by different threads


@dataclass
class Piece:
    """One destination buffer: a device's region of the tensor (or the whole tensor)."""

    device: object | None
    region: Region
    dest: np.ndarray


@dataclass
class Part:
    """A unit of work for a reader thread: some rows of one piece (indices along `axis`)."""

    job: LeafJob
    piece: Piece
    rows: slice
    axis: int = 0  # a view job's parts are cut along its outer axis (`views.outer_axis`)


@dataclass
class LeafJob:
    """One planned step, with where its bytes come from and go to."""

    step: Step
    info: TensorInfo
    kind: str  # "adopt" | "stage"
    source: Bytes | None  # None once the job is finished (its buffer is let go)
    pieces: list[Piece] = field(default_factory=list)
    counted_bytes: int = 0  # budget held until the job is finished (staging, speculative source)
    acquire_bytes: int = 0  # budget a reader must take before reading (a staging buffer)
    pending: int = 0
    source_file: str = ""
    view: View | None = None  # a declared transform's result, as a view of the file tensor

    @property
    def where(self) -> str:
        return f"{self.source_file}: tensor {self.step.file_key!r}"


def job_view(step: Step, info: TensorInfo) -> View | None:
    """The step's declared transform as a strided view of the file tensor (None: none, no view)."""
    return step.transform.view(info.shape) if isinstance(step.transform, Chain) else None


def is_adoptable(step: Step, view: View | None = None) -> bool:
    plain = step.transform is None or view is not None
    return step.leaf.kind == "array" and plain and step.sharding is not None


def device_regions(step: Step) -> list[tuple[object, Region]]:
    """(device, index region) for each addressable device the leaf lives on."""
    shape = step.leaf.shape
    regions = []
    for device, index in step.placement().addressable_devices_indices_map(shape).items():
        assert index is not None, f"{step.leaf.where}: jax gave device {device} no index"
        regions.append((device, normalize(index, shape)))
    return regions


def region_shape(region: Region) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in region)


def split_parts(job: LeafJob) -> list[Part]:
    """Each piece cut along axis 0 into parts of about `PART_BYTES` (a staged job: its chunks)."""
    if job.kind == "staged":  # loader.pipeline.staged.StagedJob
        return job.staged_parts()  # type: ignore[attr-defined,no-any-return]
    parts = []
    part_bytes = PART_BYTES if job.kind == "adopt" else float("inf")  # a staging job: one part
    for piece in job.pieces:
        if piece.dest.size == 0:
            continue
        axis = outer_axis(job.view.restrict(piece.region)) if job.view is not None else 0
        rows = piece.region[axis] if piece.region else slice(0, 1)
        n_rows = rows.stop - rows.start
        k = max(1, min(n_rows, math.ceil(piece.dest.nbytes / part_bytes)))
        bounds = [rows.start + (n_rows * i) // k for i in range(k + 1)]
        parts += [Part(job, piece, slice(a, b), axis) for a, b in zip(bounds, bounds[1:]) if b > a]
    return parts


def read_row_part(part: Part, scratch: np.ndarray) -> np.ndarray:
    """Fill one part (rows of a piece) of a job without a view; the destination it filled."""
    job, piece = part.job, part.piece
    rows0 = piece.region[0].start if piece.region else 0
    dest = (
        piece.dest[part.rows.start - rows0 : part.rows.stop - rows0] if piece.region else piece.dest
    )
    prefault(dest)
    region = (part.rows, *piece.region[1:]) if piece.region else ()
    assert job.source is not None, f"{job.where}: read after the job was finished"
    fill_region(job.source, job.info.shape, job.info.np_dtype, region, dest, scratch)
    return dest


def read_view_part(part: Part, scratch: np.ndarray) -> np.ndarray:
    """Fill one part of a view job (see `loader.pipeline.views`); the destination it filled."""
    job, piece, axis = part.job, part.piece, part.axis
    assert job.view is not None and job.source is not None, f"{job.where}: no view or source"
    first = piece.region[axis].start
    if part.rows.start == first:  # the whole piece once (its parts write strided blocks of it)
        prefault(piece.dest)
    index = (slice(None),) * axis + (slice(part.rows.start - first, part.rows.stop - first),)
    region = (*piece.region[:axis], part.rows, *piece.region[axis + 1 :])
    dest = piece.dest[index]
    fill_view(job.source, job.info.np_dtype, job.view.restrict(region), dest, scratch)
    return dest


def finish(job: LeafJob, plan: LoadPlan) -> None:
    """Give the leaf its value from the filled buffers, and record it as loaded."""
    step = job.step
    if job.kind == "adopt":
        assign(step.leaf, placed(step.leaf.shape, step.placement(), job.pieces))
    else:
        host = apply_transform(step, job.pieces[0].dest, plan)
        if host is None:  # a transform produced the wrong shape: reported and skipped
            return
        assign(step.leaf, to_device(step, host_cast(step.leaf, host)))
    plan.report.loaded.append(step.leaf.key)


def placed(shape: tuple[int, ...], sharding: Sharding, pieces: list[Piece]) -> jax.Array:
    """The array of `shape` from its filled device buffers, each handed to its device (adopted
    without a copy on the CPU backend)."""
    if len(pieces) == 1 and pieces[0].region == full_region(shape):
        whole: jax.Array = jax.device_put(pieces[0].dest, sharding)
        return whole
    arrays = [jax.device_put(p.dest, p.device) for p in pieces]
    return jax.make_array_from_single_device_arrays(shape, sharding, arrays)


def adopt_pieces(step: Step, spec: np.ndarray | None) -> tuple[list[Piece], bool]:
    """Destination buffers in the leaf's dtype, and whether the speculative buffer is one of them.

    A speculative buffer (the whole tensor in the file's dtype) is reused when the leaf lives on
    one device in that dtype; otherwise it is only a source to cast or slice from.
    """
    dtype = np.dtype(step.leaf.dtype)
    regions = device_regions(step)
    whole = len(regions) == 1 and regions[0][1] == full_region(step.leaf.shape)
    if whole and spec is not None and spec.dtype == dtype:
        return [Piece(regions[0][0], regions[0][1], spec.reshape(step.leaf.shape))], True
    return [Piece(d, r, aligned(region_shape(r), dtype)) for d, r in regions], False


def stage_piece(info: TensorInfo, spec: np.ndarray | None) -> Piece:
    dest = spec if spec is not None else aligned(info.shape, info.np_dtype)
    return Piece(None, full_region(info.shape), dest.reshape(info.shape))
