"""A float cast on the staged path is done on the device: the file's bytes go straight from its
mapped pages, and one program per leaf shape converts them there, for the shapes whose leaves
hold enough bytes to pay for their program (`ring_job.cast_shapes`).

The CPU backend's device is the host, so there a cast goes through the ring; these tests make the
loader treat the CPU device as an accelerator (`device_is_host`), which runs the same programs on
it. The bytes in flight before a narrowing cast are bounded so that the device's peak stays near
the model's (`RingSender.cast_cap`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import loader
import shapes
from loader.pipeline import ring, ring_job
from loader.placement.leaves import iter_variables

F = "model.safetensors"
MIB = 1 << 20


def _spec(dtype: str) -> shapes.ShapeSpec:
    def t(name: str, shape: tuple[int, ...]) -> shapes.TensorSpec:
        return shapes.TensorSpec(name, dtype, shape, F)

    tensors = [
        *(t(f"layer{i}.up.weight", (512, 1024)) for i in range(3)),  # 2 MiB in F32: one shape
        *(t(f"layer{i}.down.weight", (1024, 512)) for i in range(3)),  # a second shape
        t("embed.weight", (4096, 1024)),  # 16 MiB in F32: several chunks at this budget
        *(t(f"layer{i}.norm.scale", (1024,)) for i in range(3)),  # small: cast on the host
    ]
    return shapes.ShapeSpec("device-cast", "", (F,), tuple(tensors))


@pytest.fixture
def on_device(monkeypatch):
    """The CPU device taken for an accelerator, and a shape's mebibyte worth a program: casts go
    to the device programs."""
    monkeypatch.setattr(ring_job, "device_is_host", lambda device: False)
    monkeypatch.setattr(ring_job, "DEVICE_CAST_SHAPE_BYTES", MIB)


def _load(spec, path, dtype, poison, budget=16 * MIB):
    model = shapes.model_builder(spec, dtype=dtype)()
    poison(model)
    with pytest.warns(loader.LoadWarning, match="cast from file dtype"):
        return loader.load_model(model, path, staging=True, budget=budget)


@pytest.mark.parametrize(("stored", "dtype"), [("F32", "bfloat16"), ("BF16", "float32")])
def test_a_cast_on_the_device_is_bit_exact_and_compiles_per_shape(
    tmp_path, poison, on_device, stored, dtype
):
    spec = _spec(stored)
    path = shapes.synthesize(spec, tmp_path)
    model, report = _load(spec, path, dtype, poison)
    for key, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, key)), np.asarray(var.get_value()))
    large = {t.name for t in spec.tensors if math.prod(t.shape) * 4 >= MIB}
    # (a BF16 file holds three of a 1 MiB shape: over the threshold; its three scales are 6 KiB)
    assert set(report.device_cast) == large
    assert report.staging_memory == ring.PAGEABLE  # the small ones, cast on the host
    # one program per shape (two whole shapes, the embedding's buffer and its update), not one
    # per tensor (seven)
    assert 0 < report.device_programs <= 4 < len(large)
    # the file's bytes crossed once (the device got the file's dtype: counted as sent)
    received, resent = report.device_received_bytes, report.device_resent_bytes
    assert {d: n - resent.get(d, 0) for d, n in received.items()} == report.device_expected_bytes


def test_a_plain_load_is_not_cast_on_the_device(tmp_path, poison, on_device):
    spec = _spec("F32")
    path = shapes.synthesize(spec, tmp_path)
    model = shapes.model_builder(spec)()
    poison(model)
    _, report = loader.load_model(model, path, staging=True, budget=16 * MIB)
    assert report.device_cast == [] and report.staging_memory == ring.MAPPED


def test_a_shape_too_small_to_pay_for_its_program_is_cast_on_the_host(
    tmp_path, poison, on_device, monkeypatch
):
    monkeypatch.setattr(ring_job, "DEVICE_CAST_SHAPE_BYTES", 8 * MIB)  # up/down hold 6 MiB each
    spec = _spec("F32")
    path = shapes.synthesize(spec, tmp_path)
    _, report = _load(spec, path, "bfloat16", poison)
    assert report.device_cast == ["embed.weight"]  # 16 MiB


def test_on_the_cpu_backend_a_cast_stays_in_the_ring(tmp_path, poison):
    spec = _spec("F32")
    path = shapes.synthesize(spec, tmp_path)
    _, report = _load(spec, path, "bfloat16", poison)
    assert report.device_cast == [] and report.device_programs <= 2  # the embedding's assembly


def test_the_bytes_in_flight_before_a_narrowing_cast_shrink_to_what_is_left():
    sender = ring.RingSender((2, MIB), MIB, loader.budget.ByteBudget(64 * MIB), compile_threads=1)
    sender.leaf_bytes = 100 * MIB
    assert sender.cast_cap(MIB, 1.0) is None and sender.cast_cap(MIB, 0.5) is None  # widening
    early = sender.cast_cap(MIB, 2.0)
    sender.sent_leaf_bytes = 99 * MIB
    late = sender.cast_cap(MIB, 2.0)
    # float32 into bfloat16: in flight T with T/2 <= left + 1% of the model
    assert early == pytest.approx(2 * (99 * MIB + MIB))
    assert late == pytest.approx(2 * (0 + MIB))


def test_admission_lands_the_oldest_transfers_past_the_cap():
    flight = ring.MappedFlight(loader.budget.ByteBudget(64 * MIB))

    class Transfer:
        waited = False

        def is_ready(self):
            return False

        def block_until_ready(self):
            self.waited = True

    first = Transfer()
    flight.admit(4 * MIB)
    flight.launched_many([(first, 4 * MIB, None)])
    flight.admit(4 * MIB, cap=16 * MIB)
    assert not first.waited  # 8 MiB fit under 16
    flight.launched_many([(Transfer(), 4 * MIB, None)])
    flight.admit(4 * MIB, cap=6 * MIB)
    assert first.waited  # 12 MiB would not fit: the oldest landed first


def test_a_file_that_refuses_mmap_still_casts_on_the_device(
    tmp_path, poison, on_device, unmappable_files
):
    """A file system that refuses `mmap`: the chunks come through ring slots, in the file's dtype,
    and the device converts them as it does mapped ones."""
    spec = _spec("F32")
    path = shapes.synthesize(spec, tmp_path)
    model, report = _load(spec, path, "bfloat16", poison)
    for key, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, key)), np.asarray(var.get_value()))
    assert len(report.device_cast) == 7 and report.staging_memory == ring.PAGEABLE
