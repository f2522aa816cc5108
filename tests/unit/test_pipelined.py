"""The `pipelined` strategy and its engine: exact loads, casts, sharding, budget, errors, strict.

Targets are poisoned instances or builders; every tensor is checked against the synthetic
checkpoint (`shapes.verify_tensor`: bit-exact, casts compared with numpy's / ml_dtypes' own), so a
loader that leaves a value untouched fails.
"""

from __future__ import annotations

import dataclasses
import os
import threading

import jax
import ml_dtypes
import numpy as np
import pytest

import loader
import shapes
from loader import strategies
from loader.budget import ByteBudget
from loader.pipeline.cast import cast_into
from loader.placement.leaves import iter_variables
from loader.sharded.rule import AXIS

SPEC = shapes.ShapeSpec(
    "test",
    "",
    ("model.safetensors",),
    (
        shapes.TensorSpec("big.weight", "F32", (256, 256), "model.safetensors"),  # 256 KiB
        shapes.TensorSpec("wide.weight", "F32", (3, 40000), "model.safetensors"),  # rows > scratch
        shapes.TensorSpec("vec.bias", "F32", (20000,), "model.safetensors"),
        shapes.TensorSpec("half.weight", "BF16", (64, 48), "model.safetensors"),
        shapes.TensorSpec("small.scale", "F32", (8,), "model.safetensors"),
    ),
)
SMALL_BUDGET = 64 << 10


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return shapes.synthesize(SPEC, tmp_path_factory.mktemp("pipelined"))


def pipelined(target, path, **kw):
    return strategies.get("pipelined").load(target, path, **kw)


def verify(model, ckpt) -> int:
    n = 0
    for path, var in iter_variables(model):
        shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
        n += 1
    return n


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("loader-pipeline")]


@pytest.mark.parametrize("budget", [None, SMALL_BUDGET])
def test_poisoned_instance_is_filled_exactly(ckpt, poison, budget):
    model = shapes.model_builder(SPEC)()
    poison(model)
    model, report = pipelined(model, ckpt, strict=True, budget=budget)
    assert report.ok and verify(model, ckpt) == len(SPEC.tensors)
    assert report.inflight_peak_bytes <= (budget or loader.pipeline.DEFAULT_BUDGET_BYTES)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
@pytest.mark.parametrize("budget", [None, SMALL_BUDGET])
def test_cast_is_bit_exact_and_reported(ckpt, poison, dtype, budget):
    model = shapes.model_builder(SPEC, dtype=dtype)()
    poison(model)
    with pytest.warns(loader.LoadWarning, match="cast from file dtype"):
        model, report = pipelined(model, ckpt, budget=budget)
    assert len(report.loaded) == len(SPEC.tensors) and report.casts
    assert verify(model, ckpt) == len(SPEC.tensors)
    assert all(np.asarray(v.get_value()).dtype == np.dtype(dtype) for _, v in iter_variables(model))
    assert report.inflight_peak_bytes <= (budget or loader.pipeline.DEFAULT_BUDGET_BYTES)


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_sharded_leaves_over_8_devices(ckpt, dtype):
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.make_mesh((8,), (AXIS,))
    model = jax.eval_shape(lambda: 0)  # noqa: F841 - jax initialised before the mesh
    with jax.set_mesh(mesh):
        built = shapes.model_builder(SPEC, dtype=dtype)()
        kernel = built.big.weight
        kernel.set_value(
            jax.device_put(kernel.get_value(), NamedSharding(mesh, PartitionSpec(None, AXIS)))
        )
        vec = built.vec.bias
        vec.set_value(jax.device_put(vec.get_value(), NamedSharding(mesh, PartitionSpec(AXIS))))
        with pytest.warns() if dtype else _nothing():
            model, report = pipelined(built, ckpt, budget=SMALL_BUDGET)
    assert verify(model, ckpt) == len(SPEC.tensors)
    big = model.big.weight.get_value()
    assert {s.data.shape for s in big.addressable_shards} == {(256, 32)}
    assert report.inflight_peak_bytes <= SMALL_BUDGET


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_same_dtype_buffers_are_adopted_without_copy(ckpt):
    model, _ = pipelined(shapes.model_builder(SPEC), ckpt, strict=True)
    assert model.big.weight.get_value().unsafe_buffer_pointer() % 4096 == 0


def test_tensor_larger_than_the_budget_is_read_in_chunks(ckpt):
    info_bytes = 256 * 256 * 4
    assert info_bytes > SMALL_BUDGET
    model, report = pipelined(
        shapes.model_builder(SPEC, dtype="bfloat16"), ckpt, budget=SMALL_BUDGET
    )
    assert report.inflight_peak_bytes <= SMALL_BUDGET
    assert verify(model, ckpt) == len(SPEC.tensors)


def test_truncated_file_names_the_tensor_and_leaves_no_thread(ckpt, tmp_path):
    """The file passes the header check, then loses its tail while the model is built."""
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(
        ckpt.read_bytes() if ckpt.is_file() else (ckpt / "model.safetensors").read_bytes()
    )
    build = shapes.model_builder(SPEC)

    def truncating_builder():
        os.truncate(bad, bad.stat().st_size - 1000)  # the last tensor loses its tail
        return build()

    with pytest.raises(
        loader.CheckpointError, match=r"model\.safetensors: tensor '\w+\.\w+'.*truncated"
    ):
        pipelined(truncating_builder, bad, strict=True)
    assert reader_threads() == []


def test_an_exception_in_a_reader_thread_surfaces_naming_the_tensor(ckpt, monkeypatch):
    from loader.pipeline import jobs  # a reader thread's part: `jobs.read_row_part`

    real = jobs.fill_region

    def failing(src, shape, dtype, region, dst, scratch, offset=0):
        if tuple(shape) == (3, 40000):
            raise RuntimeError("disk on fire")
        return real(src, shape, dtype, region, dst, scratch, offset)

    monkeypatch.setattr(jobs, "fill_region", failing)
    with pytest.raises(loader.CheckpointError, match=r"tensor 'wide\.weight'.*disk on fire"):
        pipelined(shapes.model_builder(SPEC, dtype="bfloat16"), ckpt, budget=SMALL_BUDGET)
    assert reader_threads() == []


def test_strict_refuses_before_any_tensor_is_read(ckpt, monkeypatch):
    wrong = shapes.ShapeSpec(SPEC.source, "", SPEC.files, SPEC.tensors[:-1])  # the model lacks one
    calls = []
    real = os.preadv
    monkeypatch.setattr(os, "preadv", lambda *a: calls.append(a) or real(*a))
    with pytest.raises(loader.MismatchError) as err:
        pipelined(shapes.model_builder(wrong), ckpt, strict=True)
    assert err.value.report.unexpected == ["small.scale"]
    assert calls == []
    assert reader_threads() == []
    pipelined(shapes.model_builder(SPEC), ckpt, strict=True)  # the spy does see a real load's reads
    assert calls


def test_sharded_checkpoint_files_are_read_concurrently(tmp_path):
    files = ("a.safetensors", "b.safetensors")
    spec = shapes.ShapeSpec(
        "test",
        "",
        files,
        tuple(shapes.TensorSpec(f"l{i}.w", "F32", (64, 64), files[i % 2]) for i in range(6)),
    )
    path = shapes.synthesize(spec, tmp_path / "ck")
    model, report = pipelined(shapes.model_builder(spec), path, strict=True)
    assert report.ok and verify(model, path) == 6


def test_cast_into_rounds_like_ml_dtypes():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    special = np.array(
        [1.0039062, 1.01171875, 3.4e38, np.inf, -np.inf, -0.0, 1e-40, np.nan], np.float32
    )
    for src in (bits.view(np.float32), special):
        dst = np.empty(src.shape, ml_dtypes.bfloat16)
        cast_into(dst, src.copy(), scratch_writable=True)
        want = src.astype(ml_dtypes.bfloat16).view(np.uint16)
        nan = np.isnan(src)
        assert np.array_equal(dst.view(np.uint16)[~nan], want[~nan])
        assert np.isnan(dst.astype(np.float32)[nan]).all()
    b16 = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    out = np.empty(b16.shape, np.float32)
    cast_into(out, b16)
    assert np.array_equal(out.view(np.uint32), b16.astype(np.float32).view(np.uint32))


def test_budget_waits_for_releases_and_records_its_high_water():
    budget = ByteBudget(100, reserved_bytes=20)
    budget.acquire(60)
    assert not budget.try_acquire(30)
    got = threading.Event()
    t = threading.Thread(target=lambda: (budget.acquire(30), got.set()))
    t.start()
    assert not got.wait(0.2)
    budget.release(60)
    assert got.wait(5)
    t.join()
    assert budget.high_water_bytes == 80


def test_the_probe_and_the_rows_say_which_phases_overlapped(ckpt):
    """A pipelined build runs inside its stream: the probe records it, the dashboard says it."""
    import pandas as pd

    from bench.child.phase_probe import MemoryProbe
    from dashboard.data import overlapping_phases

    probe = MemoryProbe()
    with probe.measure():
        strategies.get("pipelined").load(shapes.model_builder(SPEC), ckpt, probe)
    phases = {p.name: p for p in probe.result().phases}
    assert phases["build"].overlaps == ("stream",) and phases["stream"].overlaps == ("build",)
    assert phases["build"].wall_s <= phases["stream"].wall_s
    rows = pd.DataFrame(
        {
            "strategy": "pipelined",
            "phase": list(phases),
            "phase_overlaps": [np.array(p.overlaps) for p in phases.values()],
        }
    )
    assert overlapping_phases(rows) == {"pipelined": ["build ∥ stream"]}


def test_load_model_passes_the_budget(ckpt):
    model, report = loader.load_model(
        shapes.model_builder(SPEC), ckpt, strict=True, strategy="pipelined", budget=SMALL_BUDGET
    )
    assert report.ok and 0 < report.inflight_peak_bytes <= SMALL_BUDGET
    assert verify(model, ckpt) == len(SPEC.tensors)


def test_load_model_runs_pipelined_by_default(ckpt, poison):
    """No strategy named: the default path reports its in-flight high-water mark (only the
    pipelined engine does), and fills a poisoned instance exactly."""
    model = shapes.model_builder(SPEC, dtype="bfloat16")()
    poison(model)
    with pytest.warns(loader.LoadWarning, match="cast from file dtype"):
        model, report = loader.load_model(model, ckpt)
    assert loader.load.DEFAULT_STRATEGY == "pipelined"
    assert 0 < report.inflight_peak_bytes <= loader.pipeline.DEFAULT_BUDGET_BYTES
    assert verify(model, ckpt) == len(SPEC.tensors)


def test_huge_tensor_at_small_scale_stays_within_the_budget(tmp_path, poison):
    """The `huge-tensor` case scaled down: one fp32 tensor 16x the budget into a bf16 model."""
    spec = shapes.ShapeSpec(
        "test",
        "",
        ("model.safetensors",),
        (shapes.TensorSpec("huge.weight", "F32", (512, 512), "model.safetensors"),),
    )
    path = shapes.synthesize(spec, tmp_path / "huge")
    model = shapes.model_builder(spec, dtype="bfloat16")()
    poison(model)
    assert 512 * 512 * 4 == 16 * SMALL_BUDGET
    with pytest.warns(loader.LoadWarning, match="cast from file dtype"):
        model, report = pipelined(model, path, budget=SMALL_BUDGET)
    assert verify(model, path) == 1
    assert model.huge.weight.get_value().dtype == ml_dtypes.bfloat16
    assert 0 < report.inflight_peak_bytes <= SMALL_BUDGET


def test_fill_before_start_is_refused_with_a_clear_error(ckpt):
    from loader.format.source import CheckpointSource
    from loader.phases import NULL_PROBE
    from loader.pipeline import Pipeline
    from loader.planning.plan import LoadPlan

    engine = Pipeline()
    with CheckpointSource(ckpt) as source, pytest.raises(RuntimeError, match="before fill"):
        engine.fill(LoadPlan(), source, NULL_PROBE)
    engine.close()


def test_the_budget_in_effect_is_recorded_even_when_none_was_given():
    """The summary shows `in flight / 256.0 MiB`, not `/ default`: the child names the budget."""
    from bench import strategies
    from bench.child.worker import budget_in_effect
    from bench.records.wire import ChildTask
    from loader.pipeline import DEFAULT_BUDGET_BYTES

    catalog = strategies.catalog()
    task = ChildTask("pipelined", "gpt2", "/c/m.safetensors", "/c/m.safetensors", None)
    assert budget_in_effect(catalog["pipelined"], task) == DEFAULT_BUDGET_BYTES
    given = dataclasses.replace(task, options={"budget": 64 << 20})
    assert budget_in_effect(catalog["pipelined"], given) == 64 << 20
    assert budget_in_effect(catalog["eager"], task) is None  # takes no budget


class _CountingBytes:
    """A tensor's bytes in memory that counts how often each byte is read."""

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw.reshape(-1).view(np.uint8)
        self.reads = np.zeros(self.raw.size, np.int64)

    def read(self, offset: int, out: np.ndarray) -> None:
        out[...] = self.raw[offset : offset + out.nbytes]
        self.reads[offset : offset + out.nbytes] += 1


@pytest.mark.parametrize(
    "scratch_bytes", [64, 1 << 10, 1 << 20], ids=["row>scratch", "rows", "all"]
)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["same", "cast"])
def test_fill_regions_reads_each_stored_byte_once(scratch_bytes, dtype):
    """Column blocks (each spanning all rows), a 2x2 grid and replicas: every target filled
    exactly, every stored byte read once (`regions.fill_regions`)."""
    from loader.pipeline.regions import fill_regions, full_region

    stored = np.arange(12 * 40, dtype=np.float32).reshape(12, 40) / 7
    cases = {
        "columns": [(slice(0, 12), slice(c, c + 10)) for c in range(0, 40, 10)],
        "grid": [(slice(r, r + 6), slice(c, c + 20)) for r in (0, 6) for c in (0, 20)],
        "replicas": [full_region(stored.shape)] * 3,
    }
    for name, regions in cases.items():
        src = _CountingBytes(stored)
        targets = [
            (r, np.zeros((r[0].stop - r[0].start, r[1].stop - r[1].start), dtype)) for r in regions
        ]
        scratch = np.empty(scratch_bytes, np.uint8)
        fill_regions(src, stored.shape, stored.dtype, targets, scratch)
        for region, dst in targets:
            np.testing.assert_array_equal(dst, stored[region].astype(dtype), err_msg=name)
        assert (src.reads == 1).all(), name


@pytest.mark.parametrize(
    "scratch_bytes", [64, 1 << 10, 1 << 20], ids=["row>scratch", "rows", "all"]
)
def test_fill_views_reads_each_stored_byte_once(scratch_bytes):
    """A transposed leaf (12, 40) of a stored (40, 12) tensor, its rows split in 3 (each a column
    block of the file, spanning every file row) and replicated: filled exactly, each stored byte
    read once while one file row fits the scratch (`views.fill_views`)."""
    from loader.pipeline.views import fill_views
    from loader.transforms import View

    stored = np.arange(40 * 12, dtype=np.float32).reshape(40, 12) / 7
    view = View((12, 40), (1, 12))
    for name, regions in {
        "row blocks": [(slice(r, r + 4), slice(0, 40)) for r in (0, 4, 8)],
        "replicas": [(slice(0, 12), slice(0, 40))] * 2,
    }.items():
        src = _CountingBytes(stored)
        targets = [(r, np.zeros((r[0].stop - r[0].start, 40), np.float32)) for r in regions]
        fill_views(src, stored.dtype, view, targets, np.empty(scratch_bytes, np.uint8))
        for region, dst in targets:
            np.testing.assert_array_equal(dst, stored.T[region], err_msg=name)
        if 12 * 4 <= scratch_bytes:
            assert (src.reads == 1).all(), name


def test_fused_rows_are_read_once_for_every_leaf_cut_from_them():
    """q, k, v cut from a fused (rows, 3 * cols) tensor (a Slice of the last axis, one of them
    transposed): `fill_rows` reads each stored byte once, a scratch-sized block of rows at a
    time, and fills every leaf bit-exactly (the last one cast in place in the scratch)."""
    from loader.pipeline.fused import RowTarget, fill_rows
    from loader.pipeline.regions import MemoryBytes
    from loader.pipeline.views import row_axis
    from loader.transforms import View

    rows, cols = 10, 4
    stored = np.arange(rows * 3 * cols, dtype=np.float32).reshape(rows, 3 * cols)
    read: list[tuple[int, int]] = []

    class Counting(MemoryBytes):
        def read(self, offset: int, out: np.ndarray) -> None:
            read.append((offset, out.nbytes))
            super().read(offset, out)

    row = 3 * cols
    views = [View((rows, cols), (row, 1), j * cols) for j in range(2)]
    views.append(View((cols, rows), (1, row), 2 * cols))  # v, transposed
    assert [row_axis(v, row) for v in views] == [0, 0, 1]
    assert row_axis(View((2, row), (row, 1)), row) == 0  # whole rows: one per index
    assert row_axis(View((rows // 2, cols), (2 * row, 1)), row) is None  # every other row
    dests = [np.zeros((rows, cols), np.float32), np.zeros((rows, cols), np.float32)]
    dests.append(np.zeros((cols, rows), ml_dtypes.bfloat16))
    axes = [row_axis(v, row) for v in views]
    targets = [RowTarget(v, d, k, 0) for v, d, k in zip(views, dests, axes) if k is not None]
    scratch = np.zeros(3 * row * 4, np.uint8)  # three rows a block
    fill_rows(Counting(stored), stored.dtype, row, slice(0, rows), targets, scratch)
    np.testing.assert_array_equal(dests[0], stored[:, :cols])
    np.testing.assert_array_equal(dests[1], stored[:, cols : 2 * cols])
    np.testing.assert_array_equal(dests[2], stored[:, 2 * cols :].T.astype(ml_dtypes.bfloat16))
    assert sum(n for _, n in read) == stored.nbytes  # each byte once
    assert len(read) == 4  # rows 0-2, 3-5, 6-8, 9
