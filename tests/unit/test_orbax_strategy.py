"""The `orbax` strategy: a streaming conversion with the same content on 1 and 8 devices, and a
restore into the model's own shardings that reports mismatches as every other strategy does."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx
from jax.sharding import PartitionSpec
from safetensors.numpy import save

import loader
from loader import strategies
from loader.format.atomic import atomic_write_bytes
from loader.sharded.rule import AXIS
from loader.strategies import orbax as orbax_strategy
from tests.unit.nnx_models import Everything, assert_same_leaves

ORBAX = strategies.get("orbax")


def _mesh(devices: int):
    return jax.make_mesh((devices,), (AXIS,), devices=jax.devices()[:devices])


class ShardedMLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, *, dtype=jnp.float32, dout: int = 8):
        rows = nnx.with_partitioning(nnx.initializers.lecun_normal(), (AXIS, None))
        self.fc1 = nnx.Linear(16, 24, kernel_init=rows, param_dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(24, dout, kernel_init=rows, param_dtype=dtype, rngs=rngs)


@pytest.fixture
def mixed(tmp_path):
    """A file of assorted dtypes and shapes, including a 0-d and a zero-size tensor."""
    rng = np.random.default_rng(0)
    tensors = {
        "a.weight": rng.standard_normal((16, 24)).astype(np.float32),
        "a.bias": rng.standard_normal((24,)).astype(ml_dtypes.bfloat16),
        "b.ids": rng.integers(-5, 5, (3, 8), dtype=np.int64),
        "b.step": np.asarray(7, np.int64),
        "b.empty": np.zeros((0, 4), np.float32),
    }
    path = tmp_path / "mixed.safetensors"
    atomic_write_bytes(path, save(tensors))
    return path, tensors


def _raw(path) -> dict[str, np.ndarray]:
    """Every array of an Orbax checkpoint, restored as host arrays (no sharding involved)."""
    item = path / "state"
    tree = ocp.PyTreeCheckpointer().metadata(item).item_metadata.tree
    abstract = {
        k: jax.ShapeDtypeStruct(m.shape, m.dtype) for k, m in tree.items()
    }  # no sharding: numpy
    args = ocp.args.PyTreeRestore(abstract, ocp.checkpoint_utils.construct_restore_args(abstract))
    return ocp.PyTreeCheckpointer().restore(item, args=args)


@pytest.mark.parametrize("devices", [1, 8])
def test_conversion_has_the_same_content_on_1_and_8_devices(tmp_path, mixed, devices):
    path, tensors = mixed
    with jax.set_mesh(_mesh(devices)):
        out = ORBAX.prepare()(path, tmp_path / "conv", None, batch_bytes=1000)  # several batches
    raw = _raw(out)
    empty = ocp.StandardCheckpointer().metadata(out).custom_metadata[orbax_strategy.EMPTY_KEY]
    assert empty == {"b.empty": ["F32", [0, 4]]}  # Orbax cannot store it: recorded instead
    assert sorted(raw) == sorted(k for k, v in tensors.items() if v.size)
    for key, arr in raw.items():
        got = arr
        assert (
            isinstance(got, np.ndarray)
            and got.dtype == tensors[key].dtype
            and got.tobytes() == tensors[key].tobytes()
        ), key


def test_restores_into_the_models_sharding_bit_exactly(tmp_path, poison):
    mesh = _mesh(8)
    with jax.set_mesh(mesh):
        src = ShardedMLP(nnx.Rngs(0))
        loader.save_model(src, tmp_path / "m.safetensors")
        out = ORBAX.prepare()(tmp_path / "m.safetensors", tmp_path / "conv", None)
        target = ShardedMLP(nnx.Rngs(1))
        poison(target)
        model, report = ORBAX.load(target, out, strict=True)
        built, _ = ORBAX.load(lambda: ShardedMLP(nnx.Rngs(2)), out, strict=True)
    assert report.ok, report.problems()
    assert_same_leaves(model, src)
    assert_same_leaves(built, src)
    kernel = built.fc1.kernel.get_value()
    assert (
        kernel.sharding.spec == PartitionSpec(AXIS, None) and len(kernel.sharding.device_set) == 8
    )


def test_every_leaf_kind_round_trips(tmp_path, poison):
    src = Everything(nnx.Rngs(3))
    src.step.set_value(41)
    loader.save_model(src, tmp_path / "e.safetensors")
    out = ORBAX.prepare()(tmp_path / "e.safetensors", tmp_path / "conv", None)
    target = Everything(nnx.Rngs(9))
    poison(target)
    model, report = ORBAX.load(target, out, strict=True)
    assert report.ok, report.problems()
    assert_same_leaves(model, src)
    built, _ = ORBAX.load(lambda: Everything(nnx.Rngs(9)), out, strict=True)
    assert built.step.get_value() == 41 and type(built.step.get_value()) is int


def test_mismatches_are_reported_as_load_model_reports_them(tmp_path):
    with jax.set_mesh(_mesh(8)):
        loader.save_model(ShardedMLP(nnx.Rngs(0)), tmp_path / "m.safetensors")
        out = ORBAX.prepare()(tmp_path / "m.safetensors", tmp_path / "conv", None)

        def other():
            model = ShardedMLP(nnx.Rngs(1), dtype=jnp.bfloat16, dout=5)
            model.extra = nnx.Param(jnp.ones((3,)))
            return model

        with pytest.warns(loader.LoadWarning):
            _, want = loader.load_model(other, tmp_path / "m.safetensors")
        with pytest.warns(loader.LoadWarning):
            model, got = ORBAX.load(other, out)
        with pytest.raises(loader.MismatchError, match="extra: missing"):
            ORBAX.load(other, out, strict=True)
    assert got.problems() == want.problems()
    assert got.missing == ["extra"] and got.shape_mismatches and got.casts
    assert sorted(got.loaded) == sorted(want.loaded)
    assert model.fc1.kernel.get_value().dtype == jnp.bfloat16


def test_key_map_with_a_transform(tmp_path, mixed):
    path, tensors = mixed

    class Net(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.zeros((24, 16)))

    key_map = {"w": ("a.weight", lambda a: a.T)}
    with pytest.warns(loader.LoadWarning, match="unexpected"):
        out = ORBAX.prepare()(path, tmp_path / "conv", None)
        model, report = ORBAX.load(Net, out, key_map=key_map)
    np.testing.assert_array_equal(np.asarray(model.w[...]), tensors["a.weight"].T)
    assert report.loaded == ["w"]


def test_not_an_orbax_checkpoint_is_a_clear_error(tmp_path):
    (tmp_path / "nothing").mkdir()
    with pytest.raises(loader.CheckpointError, match="not a readable Orbax checkpoint"):
        ORBAX.load(lambda: ShardedMLP(nnx.Rngs(0)), tmp_path / "nothing")
