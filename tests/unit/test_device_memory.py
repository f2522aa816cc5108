"""Device memory per phase and the bytes each device received, from the child to the summary.

The CPU backend's `memory_stats()` is None, so per-device memory is tested with a fake provider;
the received-bytes accounting is tested for real on the 8 simulated CPU devices (conftest): a
sharded load receives exactly its shards, a load that lands whole tensors on device 0 before
resharding is flagged, and the row and the summary carry it.
"""

from __future__ import annotations

import dataclasses
import uuid

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import loader
import shapes
from bench.child import traffic
from bench.child.phase_probe import MemoryProbe
from bench.records.wire import ChildResult, ChildTask
from bench.run.children import ChildOutcome
from bench.run.rows import RowContext, result_records
from loader.sharded.rule import AXIS

F = "model.safetensors"
SPEC = shapes.ShapeSpec(
    "test",
    "",
    (F,),
    (
        shapes.TensorSpec("big.weight", "F32", (256, 64), F),
        shapes.TensorSpec("vec.bias", "F32", (4096,), F),
    ),
)
GIB = 1 << 30


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return shapes.synthesize(SPEC, tmp_path_factory.mktemp("traffic"))


def test_per_device_memory_is_recorded_per_phase_with_its_high_water_mark():
    state = {"cuda:0": (100, 100), "cuda:1": (50, 50)}
    probe = MemoryProbe(use_hwm=False, device_memory=lambda: dict(state))
    with probe.measure():
        with probe.phase("read"):
            state.update({"cuda:0": (600, 900), "cuda:1": (300, 300)})
        with probe.phase("transfer"):
            state.update({"cuda:0": (400, 900), "cuda:1": (350, 400)})
    res = probe.result()
    read, transfer = res.phases
    assert read.device_bytes_in_use_by_device == {"cuda:0": 600, "cuda:1": 300}
    assert transfer.device_peak_bytes_by_device == {"cuda:0": 900, "cuda:1": 400}
    assert (transfer.device_bytes_in_use, transfer.device_peak_bytes_in_use) == (750, 1300)
    assert res.total.device_peak_bytes_by_device == {"cuda:0": 900, "cuda:1": 400}


def _sharded_model(dtype=None):
    mesh = jax.make_mesh((8,), (AXIS,))
    with jax.set_mesh(mesh):
        built = shapes.model_builder(SPEC, dtype=dtype)()
        for leaf, spec in ((built.big.weight, PartitionSpec(None, AXIS)), (built.vec.bias, None)):
            sharding = NamedSharding(mesh, spec if spec is not None else PartitionSpec(AXIS))
            leaf.set_value(
                jax.device_put(np.zeros(leaf.get_value().shape, leaf.get_value().dtype), sharding)
            )
    return built


@pytest.mark.parametrize("staging", [False, True])
def test_a_sharded_load_sends_each_device_only_its_shards(ckpt, staging):
    model = _sharded_model()
    watch = traffic.DeviceTraffic()
    with watch.watching():
        model, _ = loader.load_model(model, ckpt, staging=staging, budget=1 << 20)
    want = traffic.expected(model)
    shard = (256 * 8 + 4096 // 8) * 4
    assert want == {str(d): shard for d in jax.devices()}
    assert watch.received == want and traffic.overreceived(watch.received, want) == []


def test_a_whole_tensor_on_device_0_before_the_reshard_is_flagged(ckpt):
    """The tpu-inference #1989 pattern: device_put to the default device, then reshard."""
    model = _sharded_model()
    watch = traffic.DeviceTraffic()
    with watch.watching():
        for var in (model.big.weight, model.vec.bias):
            target = var.get_value().sharding
            name = "big.weight" if var is model.big.weight else "vec.bias"
            host = shapes.tensor_values(SPEC, name)
            var.set_value(jax.device_put(jax.device_put(host, jax.devices()[0]), target))
    assert traffic.overreceived(watch.received, traffic.expected(model)) == [str(jax.devices()[0])]


def _result(received, expected, status="ok", **kw) -> ChildResult:
    from bench.records.wire import Measurement, PhaseMeasure

    total = PhaseMeasure("total", 1, 1.0, 2 * GIB, 2 * GIB, 2 * GIB, 0)
    total = dataclasses.replace(
        total, device_peak_bytes_by_device={"cuda:0": GIB, "cuda:1": 3 * GIB}
    )
    m = Measurement(GIB, "hwm", total, (dataclasses.replace(total, name="read", order=0),))
    m = dataclasses.replace(m, device_received_bytes=received, device_expected_bytes=expected)
    return ChildResult(status, measurement=m, **kw)


def _ctx(strategy: str = "pipelined") -> RowContext:
    from bench import strategies
    from bench.limits.pagecache import CacheOutcome
    from bench.limits.situation import Situation
    from bench.run.matrix import Checkpoint, Task

    checkpoint = Checkpoint("gpt2", None, 0, "/c/model.safetensors", GIB, GIB, 3)
    task = Task(checkpoint, strategies.catalog()[strategy], repeat=0, processes=1, devices=2)
    return RowContext("run", uuid.uuid4().hex, task, Situation(CacheOutcome("warm")))


CTX = _ctx()


def test_rows_carry_the_device_peak_and_flag_a_device_that_received_more():
    outcome = ChildOutcome(
        "ok", None, _result({"cuda:0": 2 * GIB, "cuda:1": GIB}, {"cuda:0": GIB, "cuda:1": GIB})
    )
    rows = [r for r in result_records(CTX, [outcome]) if hasattr(r, "phase")]
    total = rows[-1]
    assert total.device_peak_bytes == 3 * GIB
    assert total.device_overreceived == ["cuda:0"]
    assert total.device_received_bytes == {"cuda:0": 2 * GIB, "cuda:1": GIB}


def test_rows_do_not_flag_the_rows_a_loader_sent_twice_by_design():
    """A staged load's last chunk of a leaf overlaps the one before (`device_resent_bytes`): a
    device that received its shards plus those rows got no copy; one more byte is one."""
    shards = {"cuda:0": GIB, "cuda:1": GIB}
    for extra, flagged in ((4096, []), (4097, ["cuda:0"])):
        result = _result({"cuda:0": GIB + extra, "cuda:1": GIB}, shards)
        measured = dataclasses.replace(result.measurement, device_resent_bytes={"cuda:0": 4096})
        outcome = ChildOutcome("ok", None, dataclasses.replace(result, measurement=measured))
        rows = [r for r in result_records(CTX, [outcome]) if hasattr(r, "phase")]
        assert rows[-1].device_overreceived == flagged
        assert rows[-1].device_resent_bytes == {"cuda:0": 4096}


def test_summary_shows_the_device_peak_beside_the_host_peak_and_the_copy(tmp_path):
    from bench.analysis.summary import json_summary, tables
    from bench.records.results import read_results
    from bench.records.schema import to_json_line

    lines = []
    for strategy, received in (("pipelined", {"cuda:0": GIB}), ("eager", {"cuda:0": 2 * GIB})):
        outcome = ChildOutcome("ok", None, _result(received, {"cuda:0": GIB}))
        ctx = _ctx(strategy)
        lines += [to_json_line(r) for r in result_records(ctx, [outcome]) if hasattr(r, "phase")]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    text = tables(read_results(path))
    assert "device peak" in text and "3.00 GiB +copy" in text and text.count("+copy") == 1
    by = {r["strategy"]: r for r in json_summary(read_results(path))}
    assert by["eager"]["device_overreceived"] and not by["pipelined"]["device_overreceived"]
    assert by["pipelined"]["device_peak_bytes"] == 3 * GIB


def test_a_device_oom_is_an_oom_row_of_kind_device(monkeypatch):
    from bench.child import worker

    def full(task, started=None):
        raise loader.errors.DeviceOutOfMemoryError(
            "m.safetensors: tensor 'w': device cuda:0 ran out of memory receiving 8 bytes (0 free)"
        )

    monkeypatch.setattr(worker, "measure", full)
    result = worker.run(ChildTask("pipelined", "gpt2", "x", "x"))
    assert (result.status, result.oom_kind) == ("oom", "device")
    (row,) = [r for r in result_records(CTX, [ChildOutcome(result.status, result.error, result)])]
    assert (row.status, row.oom_kind) == ("oom", "device") and "cuda:0" in row.error


def test_a_pinned_host_hop_counts_once_on_the_device():
    """Host -> pinned_host (host memory: not received) -> device (received), as the staged
    path's pinned transfer does on a GPU; the CPU backend cannot make the second hop, so the
    counting is fed the arrays directly."""
    from jax.sharding import SingleDeviceSharding

    device = jax.devices()[0]
    host = np.ones(1000, np.float32)
    pinned = jax.device_put(host, SingleDeviceSharding(device, memory_kind="pinned_host"))
    placed = jax.device_put(host, device)
    watch = traffic.DeviceTraffic()
    watch._count(host, pinned)
    watch._count(pinned, placed)
    assert watch.received == {str(device): 4000}


def test_device_columns_read_rows_written_before_the_transient_copy_flag():
    """An older results file has no `device_overreceived` (NaN once read): no crash, no flag."""
    import pandas as pd

    from bench.analysis.device_summary import _any_device

    assert not _any_device(float("nan")) and not _any_device(None) and not _any_device([])
    assert _any_device(["cuda:0"]) and _any_device(pd.Series(["cuda:0"]).to_numpy())


def test_rows_record_the_backend_the_child_loaded_on():
    """Every row of a result names the child's jax backend (`cpu` here), so an answer can say
    where the weights lived; a child that never reported (no result) leaves it unknown."""
    from bench.child.worker import init_backend
    from bench.vocabulary import backend_note

    result = dataclasses.replace(_result({"cuda:0": GIB}, {"cuda:0": GIB}), backend=init_backend())
    rows = [
        r for r in result_records(CTX, [ChildOutcome("ok", None, result)]) if hasattr(r, "phase")
    ]
    assert rows and {r.backend for r in rows} == {jax.default_backend()} == {"cpu"}
    (crashed,) = result_records(CTX, [ChildOutcome("crashed", "signal 9", None)])
    assert crashed.backend is None
    assert backend_note("cpu") == "CPU backend: the weights live in host RAM"
    assert "Backend not recorded" in backend_note(None)
