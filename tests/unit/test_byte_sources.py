"""Byte sources (`loader.pipeline.sources`): the engine reads through the protocol alone.

A checkpoint held in memory (`MemoryCheckpoint`, one module and nothing else) loads through the
pipelined engine exactly, also with rows read once for every device that holds them (the path a
URL takes, here without a link), and in file order where the source asks for it (the path a
digest-checked URL takes); the sizes of a load are worked out once from the options and the
source (`Sizing`). Targets are poisoned, and every tensor is checked bit for bit against the
synthetic checkpoint, so a source that reads nothing fails.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import shapes
from loader.options import Reading
from loader.phases import NULL_PROBE
from loader.pipeline import Pipeline
from loader.pipeline.regions import MemoryBytes
from loader.pipeline.sizing import Sizing, scratch_bytes
from loader.pipeline.sources.memory import MemoryCheckpoint
from loader.placement.leaves import iter_variables
from loader.planning.policy import LoadPolicy
from loader.sequence import LoadArgs, Recipe, run_load
from loader.sharded.rule import AXIS
from tests.interleaved import interleaved

SPEC = shapes.ShapeSpec(
    "test",
    "",
    ("model.safetensors",),
    (
        shapes.TensorSpec("big.weight", "F32", (256, 256), "model.safetensors"),
        shapes.TensorSpec("wide.weight", "F32", (3, 40000), "model.safetensors"),
        shapes.TensorSpec("vec.bias", "F32", (20000,), "model.safetensors"),
        shapes.TensorSpec("a.bias", "F32", (16,), "model.safetensors"),
        shapes.TensorSpec("b.bias", "F32", (16,), "model.safetensors"),
        shapes.TensorSpec("half.weight", "BF16", (64, 48), "model.safetensors"),
    ),
)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return shapes.synthesize(SPEC, tmp_path_factory.mktemp("memory"))


def memory_load(target, blob: bytes, *, options=None, strict=False, **source):
    recipe = Recipe[MemoryCheckpoint](
        lambda: Pipeline(options or Reading(), strict=strict),
        open_source=lambda _path: MemoryCheckpoint(blob, **source),
    )
    args = LoadArgs(strict=strict, policy=LoadPolicy.of(casts="allow"))
    return run_load(recipe, target, "memory.safetensors", NULL_PROBE, args)


def verify(model, ckpt) -> int:
    n = 0
    for path, var in iter_variables(model):
        shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
        n += 1
    return n


@pytest.mark.parametrize("strict", [False, True], ids=["speculating", "strict"])
def test_a_checkpoint_in_memory_loads_exactly_through_the_engine(ckpt, poison, strict):
    model = shapes.model_builder(SPEC)()
    poison(model)
    model, report = memory_load(model, ckpt.read_bytes(), strict=strict)
    assert verify(model, ckpt) == len(SPEC.tensors)
    assert sorted(report.loaded) == sorted(t.name for t in SPEC.tensors)
    assert report.remote is None  # the source's own statistics: none for memory


@pytest.mark.parametrize("shares_rows", [False, True], ids=["per-device", "rows-once"])
def test_rows_several_devices_hold_load_exactly_read_once_or_per_device(
    ckpt, monkeypatch, shares_rows
):
    """A kernel split by columns over 8 devices: every block spans every row. A source whose rows
    are shared (a URL's) reads each stored byte once; one that is not reads rows per device."""
    big = 256 * 256 * 4
    read = []
    real = MemoryBytes.read

    def counted(self, offset, out):
        if self.raw.nbytes == big:
            read.append(out.nbytes)
        real(self, offset, out)

    monkeypatch.setattr(MemoryBytes, "read", counted)
    mesh = jax.make_mesh((8,), (AXIS,))
    with jax.set_mesh(mesh):
        built = shapes.model_builder(SPEC, dtype="bfloat16")()
        kernel = built.big.weight
        kernel.set_value(
            jax.device_put(kernel.get_value(), NamedSharding(mesh, PartitionSpec(None, AXIS)))
        )
        options = Reading(budget=1 << 20)  # strict: no speculative read of it
        model, report = memory_load(
            built, ckpt.read_bytes(), options=options, strict=True, shares_rows=shares_rows
        )
    assert "big.weight" in {cast.path for cast in report.casts}
    assert verify(model, ckpt) == len(SPEC.tensors)
    assert {s.data.shape for s in model.big.weight.get_value().addressable_shards} == {(256, 32)}
    assert sum(read) == big if shares_rows else sum(read) == 8 * big


#: Large tensors (too large to join a run) with runs of small ones between them.
INTERLEAVED = interleaved(3, (384, 1024), 2, (16,))


def test_a_source_that_takes_its_bytes_in_file_order_is_read_in_file_order(
    tmp_path, poison, monkeypatch
):
    """One reader, so the reads come in the queue's order: with `in_file_order` (a URL whose
    sha256 is checked as its bytes arrive) every byte is read after those before it, the runs of
    small tensors between the large ones where they lie."""
    ckpt = shapes.synthesize(INTERLEAVED, tmp_path)
    blob = ckpt.read_bytes()
    starts: list[int] = []
    real = MemoryBytes.read

    def recorded(self, offset, out):
        starts.append(int(self.raw.__array_interface__["data"][0]) + offset)
        real(self, offset, out)

    monkeypatch.setattr(MemoryBytes, "read", recorded)
    model = shapes.model_builder(INTERLEAVED)()
    poison(model)
    model, _ = memory_load(model, blob, strict=True, threads=1, in_file_order=True)
    assert verify(model, ckpt) == len(INTERLEAVED.tensors)
    assert len(starts) >= len(INTERLEAVED.tensors) and starts == sorted(starts)


def test_the_sizes_are_worked_out_once_from_the_options_and_the_source(ckpt):
    source = MemoryCheckpoint(ckpt.read_bytes(), threads=3)
    sizing = Sizing.of(Reading(budget=64 << 20), source, staged=False)
    assert sizing.threads == 3  # the source's own count, `threads=` not given
    assert sizing.scratch_bytes == scratch_bytes(64 << 20, 3, source.total_bytes)
    assert sizing.reserved_bytes == 3 * sizing.scratch_bytes and sizing.ring_slots == 0
    staged = Sizing.of(Reading(budget=64 << 20, threads=2), source, staged=True)
    # the ring (half of what the scratch leaves, slots of one piece, two at least) is taken from
    # the budget when first used; a piece is a quarter of what the scratch leaves
    assert staged.threads == 2 and staged.ring_slots == 2 and staged.slot_bytes == 15 << 20
    assert staged.reserved_bytes == 2 * staged.scratch_bytes
    assert staged.reserved_bytes + staged.ring_bytes + staged.chunk_bytes <= 64 << 20


def test_the_engine_reserves_what_the_sizing_says_before_any_thread_starts(ckpt):
    pipeline = Pipeline(Reading(budget=8 << 20))
    with MemoryCheckpoint(ckpt.read_bytes(), threads=2) as source:
        try:
            pipeline.start(source, NULL_PROBE)
            assert pipeline.sizing is not None and pipeline.budget is not None
            assert pipeline.stats.threads == pipeline.sizing.threads == 2
            assert pipeline.budget.reserved_bytes == pipeline.sizing.reserved_bytes > 0
        finally:
            pipeline.close()
