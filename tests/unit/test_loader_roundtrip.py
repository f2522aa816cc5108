"""Bit-identical round-trips through save_model / load_model, into poisoned targets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from nnx_models import MLP, Everything, Stack, Tied, assert_same_leaves, leaf_map

import loader

DTYPES = [jnp.float32, jnp.bfloat16]
MODELS = {"mlp": MLP, "stack": Stack, "tied": Tied, "everything": Everything}


def _trained(model_cls, dtype):
    model = model_cls(nnx.Rngs(0, dropout=1), dtype=dtype)
    if isinstance(model, Everything):
        model(jnp.ones((4, 6), dtype))  # moves BatchNorm statistics and the dropout stream
        model.step.set_value(41)
    return model


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_instance_round_trip_is_bit_identical(tmp_path, poison, name, dtype):
    src = _trained(MODELS[name], dtype)
    path = tmp_path / "m.safetensors"
    loader.save_model(src, path)
    target = MODELS[name](nnx.Rngs(123, dropout=7), dtype=dtype)
    poison(target)
    assert leaf_map(target) != leaf_map(src)
    loaded, report = loader.load_model(target, path, strict=True)
    assert report.ok and report.loaded
    assert_same_leaves(loaded, src)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_builder_equals_instance(tmp_path, poison, name, dtype):
    src = _trained(MODELS[name], dtype)
    path = tmp_path / "m.safetensors"
    loader.save_model(src, path)
    from_builder, report = loader.load_model(
        lambda: MODELS[name](nnx.Rngs(5), dtype=dtype), path, strict=True
    )
    assert report.ok
    target = MODELS[name](nnx.Rngs(5), dtype=dtype)
    poison(target)
    from_instance, _ = loader.load_model(target, path, strict=True)
    assert_same_leaves(from_builder, from_instance)
    assert_same_leaves(from_builder, src)


def test_python_scalar_keeps_its_type(tmp_path):
    src = _trained(Everything, jnp.float32)
    loader.save_model(src, tmp_path / "m.safetensors")
    for target in (Everything(nnx.Rngs(1)), lambda: Everything(nnx.Rngs(1))):
        model, _ = loader.load_model(target, tmp_path / "m.safetensors", strict=True)
        assert type(model.step.get_value()) is int and model.step.get_value() == 41


def test_dropout_stream_continues_exactly(tmp_path, poison):
    src = _trained(Everything, jnp.float32)
    loader.save_model(src, tmp_path / "m.safetensors")
    target = Everything(nnx.Rngs(99, dropout=98))
    poison(target)
    model, _ = loader.load_model(target, tmp_path / "m.safetensors", strict=True)
    x = jnp.ones((4, 6))
    np.testing.assert_array_equal(np.asarray(model.drop(x)), np.asarray(src.drop(x)))
    np.testing.assert_array_equal(np.asarray(model.drop(x)), np.asarray(src.drop(x)))


def test_optimizer_state_round_trips(tmp_path):
    def make(seed):
        model = MLP(nnx.Rngs(seed))
        return model, nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    model, opt = make(0)
    grads = jax.tree.map(jnp.ones_like, nnx.state(model, nnx.Param))
    opt.update(model, grads)
    opt.update(model, grads)
    loader.save_model(opt, tmp_path / "opt.safetensors")
    _, target = make(1)
    before = leaf_map(target)
    loaded, report = loader.load_model(target, tmp_path / "opt.safetensors", strict=True)
    assert report.ok
    assert leaf_map(loaded) != before
    assert_same_leaves(loaded, opt)
    assert int(loaded.step.get_value()) == 2


def test_slash_keyed_file_from_older_tools_loads(tmp_path, poison):
    from safetensors.numpy import save_file

    src = Stack(nnx.Rngs(0))
    flat = {
        k.replace(".", "/"): np.frombuffer(v[2], np.dtype(v[0])).reshape(v[1])
        for k, v in leaf_map(src).items()
    }
    save_file(flat, str(tmp_path / "old.safetensors"))
    target = Stack(nnx.Rngs(1))
    poison(target)
    model, report = loader.load_model(target, tmp_path / "old.safetensors", strict=True)
    assert report.ok
    assert_same_leaves(model, src)


def test_sharded_file_folder_loads(tmp_path, poison):
    src = Stack(nnx.Rngs(0), depth=4)
    whole = tmp_path / "whole.safetensors"
    loader.save_model(src, whole)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(whole))
    keys = sorted(tensors)
    shard_dir = tmp_path / "shards"
    shard_dir.mkdir()
    save_file({k: tensors[k] for k in keys[: len(keys) // 2]}, str(shard_dir / "a.safetensors"))
    save_file({k: tensors[k] for k in keys[len(keys) // 2 :]}, str(shard_dir / "b.safetensors"))
    target = Stack(nnx.Rngs(1), depth=4)
    poison(target)
    model, report = loader.load_model(target, shard_dir, strict=True)
    assert report.ok
    assert_same_leaves(model, src)
