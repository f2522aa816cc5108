"""`save_sharded` / `load_sharded` in one process (8 simulated devices); the `sharded-dir` one."""

from __future__ import annotations

import contextlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec

import loader
from loader import strategies
from loader.errors import HeaderError, IncompleteCheckpointError
from loader.sharded.directory import convert_to_sharded, load_sharded, save_sharded
from loader.sharded.rule import AXIS
from loader.sharded.slices import read_box
from tests.unit.nnx_models import MLP, Everything, assert_same_leaves, leaf_map


class ShardedMLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, *, dtype=jnp.float32, dout: int = 8):
        rows = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("data", None))
        cols = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "data"))
        self.fc1 = nnx.Linear(16, 24, kernel_init=rows, param_dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(
            24, dout, kernel_init=cols if dout % 8 == 0 else rows, param_dtype=dtype, rngs=rngs
        )


@pytest.fixture
def mesh():
    return jax.make_mesh((8,), ("data",))


@pytest.fixture
def saved(tmp_path, mesh):
    with jax.set_mesh(mesh):
        src = ShardedMLP(nnx.Rngs(0))
    save_sharded(src, tmp_path / "ckpt")
    return src, tmp_path / "ckpt"


def test_layout_one_file_per_process_replicas_written_once(saved):
    _, folder = saved
    assert sorted(os.listdir(folder)) == ["manifest.json", "shard-0-of-1.safetensors"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["process_count"] == 1 and manifest["format_version"] == 1
    tensors = manifest["tensors"]
    assert len(tensors["fc1.kernel"]["slices"]) == 8 and len(tensors["fc1.bias"]["slices"]) == 1
    first = tensors["fc1.kernel"]["slices"][0]
    assert first["key"] == "fc1.kernel@0:2,0:24" and first["index"] == [[0, 2], [0, 24]]


@pytest.mark.parametrize("as_builder", [False, True], ids=["poisoned-instance", "builder"])
def test_round_trip_keeps_the_models_sharding(saved, mesh, poison, as_builder):
    src, folder = saved
    with jax.set_mesh(mesh):
        target = (lambda: ShardedMLP(nnx.Rngs(1))) if as_builder else ShardedMLP(nnx.Rngs(1))
        if not as_builder:
            poison(target)
        model, report = load_sharded(target, folder, strict=True)
    assert report.ok and len(report.loaded) == 4
    assert report.share is None  # a directory's slices: by regions, no choice to report
    assert_same_leaves(model, src)
    assert model.fc2.kernel.get_value().sharding.spec == PartitionSpec(None, "data")


def test_plain_builder_gets_the_rule(saved):
    src, folder = saved
    with pytest.warns(loader.LoadWarning, match="saved with sharding"):
        model, report = load_sharded(_plain, folder)
    assert leaf_map(model) == leaf_map(src)
    bias = model.fc1.bias.get_value()  # (24,): saved replicated, the rule splits it 8 ways
    assert bias.sharding.spec == PartitionSpec(AXIS) and len(bias.addressable_shards) == 8
    assert sorted(c.path for c in report.sharding_changes) == [
        "fc1.bias",
        "fc1.kernel",
        "fc2.bias",
        "fc2.kernel",
    ]


def _plain():
    class Plain(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.fc1 = nnx.Linear(16, 24, rngs=rngs)
            self.fc2 = nnx.Linear(24, 8, rngs=rngs)

    return Plain(nnx.Rngs(1))


@pytest.mark.filterwarnings("ignore::loader.LoadWarning")
def test_every_leaf_kind_round_trips(tmp_path, poison):
    src = Everything(nnx.Rngs(3))
    src.step.set_value(41)
    save_sharded(src, tmp_path / "ckpt")
    target = Everything(nnx.Rngs(9))
    poison(target)
    model, report = load_sharded(target, tmp_path / "ckpt", strict=True)
    assert report.ok
    assert_same_leaves(model, src)
    model, _ = load_sharded(lambda: Everything(nnx.Rngs(9)), tmp_path / "ckpt")
    assert model.step.get_value() == 41 and type(model.step.get_value()) is int


def test_mismatches_are_reported_as_load_model_reports_them(tmp_path, mesh):
    with jax.set_mesh(mesh):
        src = ShardedMLP(nnx.Rngs(0))
        loader.save_model(src, tmp_path / "one.safetensors")
        save_sharded(src, tmp_path / "ckpt")
        other = lambda: ShardedMLP(nnx.Rngs(1), dtype=jnp.bfloat16, dout=5)  # noqa: E731
        with pytest.warns(loader.LoadWarning):
            _, want = loader.load_model(other, tmp_path / "one.safetensors")
        with pytest.warns(loader.LoadWarning):
            model, got = load_sharded(other, tmp_path / "ckpt")
        with pytest.raises(loader.MismatchError, match="fc2.kernel: model expects shape"):
            load_sharded(other, tmp_path / "ckpt", strict=True)
    assert got.problems() == want.problems() and got.problems()
    assert sorted(got.loaded) == sorted(want.loaded)
    assert model.fc1.kernel.get_value().dtype == jnp.bfloat16
    np.testing.assert_array_equal(
        np.asarray(model.fc1.kernel.get_value()),
        np.asarray(src.fc1.kernel.get_value()).astype(jnp.bfloat16),
    )
    assert not np.asarray(
        model.fc2.kernel.get_value()
    ).any()  # not applied: zeros in an abstract model


def test_key_map_with_a_transform(tmp_path):
    src = MLP(nnx.Rngs(0))
    save_sharded(src, tmp_path / "ckpt")

    class Renamed(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.first = nnx.Linear(16, 8, rngs=rngs)  # fc1 transposed
            self.fc2 = nnx.Linear(16, 4, rngs=rngs)

    # first.bias is left unmapped (missing: warned); two leaves on fc2.bias would be refused
    key_map = {"first.kernel": ("fc1.kernel", lambda a: a.T)}
    with pytest.warns(loader.LoadWarning):
        model, report = load_sharded(
            lambda: Renamed(nnx.Rngs(1)), tmp_path / "ckpt", key_map=key_map
        )
    np.testing.assert_array_equal(
        np.asarray(model.first.kernel[...]), np.asarray(src.fc1.kernel[...]).T
    )
    assert "first.kernel" in report.loaded and "fc1.bias" in report.unexpected


@pytest.mark.filterwarnings("ignore::loader.LoadWarning")
def test_missing_manifest_is_an_incomplete_checkpoint(saved):
    _, folder = saved
    (folder / "manifest.json").unlink()
    with pytest.raises(IncompleteCheckpointError, match="no manifest.json.*incomplete"):
        load_sharded(_plain, folder)


@pytest.mark.filterwarnings("ignore::loader.LoadWarning")
def test_damaged_shards_and_manifests_are_refused(saved):
    _, folder = saved
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tensors"]["fc1.kernel"]["slices"].pop()
    (folder / "bad.json").write_text(json.dumps(manifest))
    os.replace(folder / "manifest.json", folder / "good.json")
    os.replace(folder / "bad.json", folder / "manifest.json")
    with pytest.raises(loader.CheckpointError, match="fc1.kernel.*cover 336 of 384 elements"):
        load_sharded(_plain, folder)
    os.replace(folder / "good.json", folder / "manifest.json")
    shard = folder / "shard-0-of-1.safetensors"
    shard.write_bytes(shard.read_bytes()[:-4])
    with pytest.raises(HeaderError, match="shard-0-of-1"):
        load_sharded(_plain, folder)


def test_read_box_reads_exactly_the_box(tmp_path):
    data = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    path = tmp_path / "raw"
    path.write_bytes(b"xx" + data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    with contextlib.closing(_Closer(fd)):
        for box in [
            ((0, 4), (0, 6), (0, 5)),
            ((1, 3), (0, 6), (0, 5)),
            ((1, 3), (2, 5), (0, 5)),
            ((0, 4), (0, 6), (1, 4)),
            ((3, 4), (5, 6), (4, 5)),
            ((0, 4), (1, 2), (0, 5)),
        ]:
            got = read_box(fd, 2, data.shape, box, None, dtype=data.dtype, where="raw")
            np.testing.assert_array_equal(got, data[tuple(slice(a, b) for a, b in box)])


class _Closer:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


class _Recorder:
    def __init__(self) -> None:
        self.phases: list[str] = []
        self.substeps: set[str] = set()

    @contextlib.contextmanager
    def phase(self, name: str):
        self.phases.append(name)
        yield

    def add_time(self, substep: str, seconds: float) -> None:
        self.substeps.add(substep)


def test_strategy_prepares_and_loads_with_phases(tmp_path, mesh):
    info = strategies.get("sharded-dir")
    assert (info.checkpoint, info.multiprocess) == ("sharded-dir", True)
    src = _plain()
    loader.save_model(src, tmp_path / "one.safetensors")
    folder = info.prepare()(tmp_path / "one.safetensors", tmp_path / "dir", _plain)
    probe = _Recorder()
    model, report = info.load(_plain, folder, probe, strict=True)
    assert report.ok, report.problems()
    assert_same_leaves(model, src)
    assert probe.phases == ["build", "stream"] and probe.substeps == {"read", "cast", "transfer"}
    kernel = model.fc1.kernel.get_value()
    assert len(kernel.sharding.device_set) == 8 and not kernel.sharding.is_fully_replicated


def test_convert_is_streaming_and_deduplicated(tmp_path):
    src = _plain()
    loader.save_model(src, tmp_path / "one.safetensors")
    convert_to_sharded(tmp_path / "one.safetensors", tmp_path / "dir")
    manifest = json.loads((tmp_path / "dir" / "manifest.json").read_text())
    assert [len(t["slices"]) for t in manifest["tensors"].values()] == [
        8,
        8,
        8,
        8,
    ]  # rule: all split
    shard = tmp_path / "dir" / "shard-0-of-1.safetensors"
    assert shard.stat().st_size < (tmp_path / "one.safetensors").stat().st_size + 4096
