"""A model sharded over 8 devices stays sharded after a load; replicated stays replicated."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

import loader


class ShardedMLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("data", None))
        self.fc = nnx.Linear(16, 8, kernel_init=init, rngs=rngs)


@pytest.fixture
def mesh():
    assert len(jax.devices()) == 8, "conftest sets 8 simulated CPU devices"
    return jax.make_mesh((8,), ("data",))


def _check_layout(model):
    kernel, bias = model.fc.kernel.get_value(), model.fc.bias.get_value()
    assert isinstance(kernel.sharding, NamedSharding)
    assert kernel.sharding.spec == PartitionSpec("data", None)
    assert len(kernel.sharding.device_set) == 8
    assert {s.data.shape for s in kernel.addressable_shards} == {(2, 8)}
    assert len(bias.sharding.device_set) == 8 and bias.sharding.is_fully_replicated


@pytest.mark.parametrize("as_builder", [False, True], ids=["instance", "builder"])
def test_sharded_model_stays_sharded(tmp_path, poison, mesh, as_builder):
    with jax.set_mesh(mesh):
        src = ShardedMLP(nnx.Rngs(0))
        _check_layout(src)
        loader.save_model(src, tmp_path / "m.safetensors")
        if as_builder:
            target = lambda: ShardedMLP(nnx.Rngs(1))  # noqa: E731
        else:
            target = ShardedMLP(nnx.Rngs(1))
            poison(target)
        model, report = loader.load_model(target, tmp_path / "m.safetensors", strict=True)
    assert report.ok
    _check_layout(model)
    np.testing.assert_array_equal(np.asarray(model.fc.kernel[...]), np.asarray(src.fc.kernel[...]))


def test_resharding_is_reported(tmp_path, mesh):
    class Plain(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.fc = nnx.Linear(16, 8, rngs=rngs)

    loader.save_model(Plain(nnx.Rngs(0)), tmp_path / "m.safetensors")  # single device
    with jax.set_mesh(mesh):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, report = loader.load_model(
                lambda: ShardedMLP(nnx.Rngs(1)), tmp_path / "m.safetensors"
            )
        warned = [str(w.message) for w in caught if issubclass(w.category, loader.LoadWarning)]
        assert any("fc.kernel: saved with sharding single-device" in w for w in warned)
        assert any("fc.bias: saved with sharding single-device" in w for w in warned)
        with pytest.raises(loader.CheckpointError, match="re-sharded|sharding"):
            loader.load_model(
                lambda: ShardedMLP(nnx.Rngs(1)), tmp_path / "m.safetensors", strict=True
            )
    assert sorted(c.path for c in report.sharding_changes) == ["fc.bias", "fc.kernel"]
    _check_layout(model)


def test_unaddressable_sharding_is_refused(tmp_path):
    from loader.placement.place import concrete_sharding

    class Foreign:
        device_set = {object()}

    with pytest.raises(loader.CheckpointError, match="cannot address"):
        concrete_sharding(Foreign(), "parameter fc.kernel")
    assert jnp.zeros(1).size == 1
