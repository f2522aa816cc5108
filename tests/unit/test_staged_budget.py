"""The budget is a bound on the staged path at a small budget (forced on the CPU backend), counted
two ways: by the engine's own accounting (`LoadReport.inflight_peak_bytes`), and independently, by
the host bytes that are alive at once as the `mmap` and the staging ring's allocations say (the
file's windows mapped for chunks sent straight from its pages, and the ring's slots), whatever the
engine believes it holds.

The checkpoint's leaves are several times the budget, so a path that maps a shard's worth of pages
(a large window kept alive by a chunk in flight, a whole leaf mapped) fails here.

A cast onto the devices compiles no device program per tensor shape: its leaves go in the same
pieces as a plain load's, so it compiles what the plain load compiles, no more; each piece is cast
into its slot by several readers side by side, bit-exact. A larger budget never makes a piece
larger, nor puts more bytes in flight than `MAX_FLIGHT_BYTES`.
"""

from __future__ import annotations

import gc
import mmap
import threading
import types
import warnings
import weakref

import numpy as np
import pytest

import loader
import shapes
from loader.options import Reading
from loader.pipeline import file_pages, programs, ring, ring_job, sizing
from loader.pipeline.sizing import Sizing
from loader.pipeline.sources.memory import MemoryCheckpoint
from loader.placement.leaves import iter_variables
from tests.unit.test_staged import LateTransfer
from tests.unit.test_staged_device_path import Compiles

F = "model.safetensors"
MIB = 1 << 20
BUDGET = 16 * MIB
#: What may be alive beside the budget: the file's current window mapped and the one before it
#: (chunks still in flight from it), at most 16 MiB each.
ALLOWANCE = 32 * MIB
#: 96 MiB of float32 in three leaves, the largest 4x the budget.
LARGE = shapes.ShapeSpec(
    "large",
    "",
    (F,),
    (
        shapes.TensorSpec("a.weight", "F32", (4096, 4096), F),
        shapes.TensorSpec("n.scale", "F32", (4096,), F),
        shapes.TensorSpec("b.weight", "F32", (2048, 4096), F),
    ),
)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    return shapes.synthesize(LARGE, tmp_path_factory.mktemp("large"))


class Alive:
    """Host bytes alive at once, by their allocations: each file window `mmap`ed by the loader's
    file pages (until it is unmapped) and each staging ring slot (until it is freed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def born(self, obj: object, nbytes: int) -> None:
        with self.lock:
            self.now += nbytes
            self.peak = max(self.peak, self.now)
        weakref.finalize(obj, self._gone, nbytes)

    def _gone(self, nbytes: int) -> None:
        with self.lock:
            self.now -= nbytes


@pytest.fixture
def alive(monkeypatch):
    seen = Alive()

    class Window(mmap.mmap):
        def __init__(self, fd: int, length: int, **kw: object) -> None:
            seen.born(self, length)

    pages = types.SimpleNamespace(**{k: getattr(mmap, k) for k in dir(mmap) if k.isupper()})
    pages.mmap = Window  # the file pages' own `mmap` only (host buffers map memory too)
    monkeypatch.setattr(file_pages, "mmap", pages)
    real_aligned = ring.aligned

    def slot(shape, dtype):
        raw = real_aligned(shape, dtype)
        seen.born(raw.base if raw.base is not None else raw, raw.nbytes)
        return raw

    monkeypatch.setattr(ring, "aligned", slot)
    return seen


@pytest.fixture
def fresh_programs(monkeypatch):
    """No program compiled by an earlier test counts as already there."""
    monkeypatch.setattr(programs, "_COMPILED", {})


def verify(model, path) -> None:
    for key, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, key)), np.asarray(var.get_value()))


@pytest.mark.parametrize("dtype", [None, "bfloat16"], ids=["mapped", "cast"])
def test_host_bytes_alive_stay_within_the_budget_at_16_mib(large, poison, alive, dtype):
    model = shapes.model_builder(LARGE, dtype=dtype)()
    poison(model)
    file_pages.MAPPED.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.LoadWarning)  # the cast, expected
        model, report = loader.load_model(model, large, staging=True, budget=BUDGET)
    verify(model, large)
    assert report.staging_memory == ("mapped" if dtype is None else "pageable")
    # the engine's own accounting: the budget, and the file's pages mapped beside it
    assert 0 < report.inflight_peak_bytes <= BUDGET
    assert file_pages.MAPPED.peak_bytes <= ALLOWANCE + (BUDGET if dtype is None else 0)
    assert 0 < alive.peak <= BUDGET + ALLOWANCE, alive.peak / MIB  # what was alive at once
    gc.collect()
    assert alive.now == 0  # nothing left mapped or allocated once the load is done


#: Three leaves of three shapes, each 16-18 MiB as bfloat16: one piece at `CAST_BUDGET` (a ring
#: slot no smaller than a mapped chunk), so neither a plain nor a cast load assembles them.
ONE_PIECE = shapes.ShapeSpec(
    "one-piece",
    "",
    (F,),
    (
        shapes.TensorSpec("a.weight", "F32", (2100, 4096), F),
        shapes.TensorSpec("b.weight", "F32", (4096, 2200), F),
        shapes.TensorSpec("c.weight", "F32", (3000, 3000), F),
        *(shapes.TensorSpec(f"s{i}.weight", "F32", (8 + i, 24 + 2 * i), F) for i in range(8)),
    ),
)
CAST_BUDGET = 80 * MIB  # with 2 threads: pieces of 18.75 MiB


def test_a_cast_compiles_no_device_program_per_tensor_shape(tmp_path, poison, fresh_programs):
    """F32 -> BF16 on the staged path: leaves of many shapes, each one piece in the model's
    dtype, go whole (cast on the host into a slot of one piece) and compile nothing, as a plain
    load of one-piece leaves does; counted by jax's own compile events."""
    path = shapes.synthesize(ONE_PIECE, tmp_path)
    model = shapes.model_builder(ONE_PIECE, dtype="bfloat16")()
    poison(model)  # (building and poisoning compile: not counted)
    with Compiles() as compiles, warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.LoadWarning)  # the cast, expected
        model, report = loader.load_model(
            model, path, staging=True, budget=CAST_BUDGET, threads=2, casts="allow"
        )
    verify(model, path)
    assert report.staging_memory == "pageable"
    assert report.device_programs == 0 and compiles.count == 0, compiles.count


def test_a_larger_budget_never_makes_a_piece_larger_nor_puts_more_in_flight_than_the_link_needs(
    large,
):
    source = MemoryCheckpoint(large.read_bytes(), threads=8)
    budgets = [b * MIB for b in (16, 64, 256, 1024, 4096)]
    sized = [Sizing.of(Reading(budget=b), source, staged=True) for b in budgets]
    pieces = [s.chunk_bytes for s in sized]
    assert pieces == sorted(pieces) and pieces[-1] == sizing.MAX_CHUNK_BYTES
    assert all(s.slot_bytes == s.chunk_bytes for s in sized)  # a cast goes in the same pieces
    assert [s.flight_bytes for s in sized] == [min(b, sizing.MAX_FLIGHT_BYTES) for b in budgets]
    assert all(s.reserved_bytes + s.ring_bytes + s.chunk_bytes <= s.budget_bytes for s in sized)


def test_the_bytes_in_flight_stop_at_what_the_link_needs_whatever_the_budget(
    large, poison, monkeypatch
):
    """With a budget far above `MAX_FLIGHT_BYTES` (made small here), the mapped chunks in flight
    at once (a transfer that completes late counts them) stay within it."""
    fake = LateTransfer(delay=0.01)
    monkeypatch.setattr(ring, "pageable_transfer", fake)
    monkeypatch.setattr(sizing, "MAX_CHUNK_BYTES", 4 * MIB)
    monkeypatch.setattr(sizing, "MAX_FLIGHT_BYTES", 12 * MIB)  # three pieces
    model = shapes.model_builder(LARGE)()
    poison(model)
    model, report = loader.load_model(model, large, staging=True, budget=1 << 30, threads=2)
    verify(model, large)
    assert report.staging_memory == "mapped"
    assert 4 * MIB < fake.max_live_bytes <= 12 * MIB, fake.max_live_bytes / MIB


def casts_spec(dtype: str) -> shapes.ShapeSpec:
    """Leaves of `dtype` (a safetensors name) to cast: one of many pieces, each of many shares; one
    whose row is larger than a piece; odd shapes."""
    return shapes.ShapeSpec(
        "casts",
        "",
        (F,),
        (
            shapes.TensorSpec("big.weight", dtype, (300, 256), F),
            shapes.TensorSpec("wide.weight", dtype, (3, 70000), F),
            shapes.TensorSpec("odd.weight", dtype, (37, 3, 29), F),
            shapes.TensorSpec("vec.bias", dtype, (5001,), F),
        ),
    )


@pytest.mark.parametrize(
    ("file_dtype", "model_dtype"),
    [("F32", "bfloat16"), ("BF16", "float32"), ("F16", "bfloat16")],
)
def test_casts_filled_by_readers_side_by_side_are_bit_exact(
    tmp_path, poison, monkeypatch, file_dtype, model_dtype
):
    """Each piece of a cast is filled into its slot by several readers (a share each, made small
    here), the last of them starting the transfer: the values are those of numpy / ml_dtypes'
    own `astype` (`shapes.verify_tensor`), and a transfer that reads its slot late sees no slot
    reused under it."""
    spec = casts_spec(file_dtype)
    path = shapes.synthesize(spec, tmp_path)
    monkeypatch.setattr(ring_job, "SHARE_BYTES", 8 << 10)
    fake = LateTransfer(delay=0.005)
    monkeypatch.setattr(ring, "pageable_transfer", fake)
    shares = []
    real_fill = ring_job.RingJob.fill_share
    monkeypatch.setattr(
        ring_job.RingJob,
        "fill_share",
        lambda self, source, share, scratch: (
            shares.append(share) or real_fill(self, source, share, scratch)
        ),
    )
    model = shapes.model_builder(spec, dtype=model_dtype)()
    poison(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.LoadWarning)  # the cast, expected
        model, report = loader.load_model(
            model, path, staging=True, budget=1 << 20, threads=3, casts="allow"
        )
    verify(model, path)
    assert all(
        np.dtype(v.get_value().dtype) == np.dtype(model_dtype) for _, v in iter_variables(model)
    )
    assert report.staging_memory == "pageable" and fake.corrupted == 0
    chunks = {id(share.fill) for share in shares}
    assert len(shares) > 2 * len(chunks) > 0  # several readers' shares a slot
