"""Every mismatch is reported by path; strict=True raises listing all of them; nothing is silent."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from nnx_models import MLP, Stack, Tied, assert_same_leaves
from safetensors.numpy import load_file, save_file

import loader
from loader.report import LoadWarning


def _tensors(model, tmp_path):
    loader.save_model(model, tmp_path / "full.safetensors")
    return load_file(str(tmp_path / "full.safetensors"))


def _write(tmp_path, tensors, name="bad.safetensors"):
    save_file(tensors, str(tmp_path / name))
    return tmp_path / name


def _load_warnings(target, path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, report = loader.load_model(target, path, **kw)
    return model, report, [str(w.message) for w in caught if issubclass(w.category, LoadWarning)]


def test_missing_tensor_is_reported_and_strict_raises(tmp_path):
    tensors = _tensors(MLP(nnx.Rngs(0)), tmp_path)
    del tensors["fc2.bias"]
    path = _write(tmp_path, tensors)
    _, report, warned = _load_warnings(MLP(nnx.Rngs(1)), path)
    assert report.missing == ["fc2.bias"]
    assert any("fc2.bias" in w and "missing" in w for w in warned)
    with pytest.raises(loader.CheckpointError, match="fc2.bias"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True)


def test_extra_tensor_is_reported(tmp_path):
    tensors = _tensors(MLP(nnx.Rngs(0)), tmp_path)
    tensors["fc3.kernel"] = np.zeros((2, 2), np.float32)
    path = _write(tmp_path, tensors)
    _, report, warned = _load_warnings(MLP(nnx.Rngs(1)), path)
    assert report.unexpected == ["fc3.kernel"]
    assert any("fc3.kernel" in w for w in warned)
    with pytest.raises(loader.MismatchError, match="fc3.kernel"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True)


def test_wrong_shape_is_reported_and_never_applied(tmp_path, poison):
    tensors = _tensors(MLP(nnx.Rngs(0)), tmp_path)
    tensors["fc1.kernel"] = np.ones((3, 3), np.float32)
    path = _write(tmp_path, tensors)
    target = MLP(nnx.Rngs(1))
    poison(target)
    model, report, warned = _load_warnings(target, path)
    assert [m.path for m in report.shape_mismatches] == ["fc1.kernel"]
    assert model.fc1.kernel.shape == (8, 16)
    assert bool(jnp.all(model.fc1.kernel[...] == 7.0)), "a reshaped tensor must not be applied"
    assert any("fc1.kernel" in w and "(3, 3)" in w for w in warned)
    with pytest.raises(loader.CheckpointError, match=r"fc1.kernel.*\(8, 16\)"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True)


def test_dtype_cast_is_reported_and_done_on_the_host(tmp_path):
    src = MLP(nnx.Rngs(0))
    loader.save_model(src, tmp_path / "f32.safetensors")
    model, report, warned = _load_warnings(
        lambda: MLP(nnx.Rngs(1), dtype=jnp.bfloat16), tmp_path / "f32.safetensors"
    )
    assert sorted(c.path for c in report.casts) == [
        "fc1.bias",
        "fc1.kernel",
        "fc2.bias",
        "fc2.kernel",
    ]
    assert model.fc1.kernel.dtype == jnp.bfloat16
    np.testing.assert_array_equal(
        np.asarray(model.fc1.kernel[...]), np.asarray(src.fc1.kernel[...]).astype(jnp.bfloat16)
    )
    assert any("F32" in w and "BF16" in w for w in warned)
    with pytest.raises(loader.CheckpointError, match="cast"):
        loader.load_model(
            lambda: MLP(nnx.Rngs(1), dtype=jnp.bfloat16), tmp_path / "f32.safetensors", strict=True
        )


def test_strict_lists_every_problem_at_once(tmp_path):
    tensors = _tensors(MLP(nnx.Rngs(0)), tmp_path)
    del tensors["fc2.bias"]
    tensors["extra"] = np.zeros(1, np.float32)
    tensors["fc1.kernel"] = np.ones((2, 2), np.float32)
    path = _write(tmp_path, tensors)
    with pytest.raises(loader.MismatchError) as err:
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True)
    text = str(err.value)
    assert "fc2.bias" in text and "extra" in text and "fc1.kernel" in text
    assert len(err.value.report.problems()) == 3


class Slashed(nnx.Module):
    def __init__(self):
        setattr(self, "a/b", nnx.Param(jnp.ones(2)))


class Stringy(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.ones(2))
        self.name = nnx.Variable("hello")


def test_slash_in_attribute_name_is_refused_at_save(tmp_path):
    with pytest.raises(loader.CheckpointError, match="a/b"):
        loader.save_model(Slashed(), tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def test_string_leaf_is_refused_at_save_with_its_path(tmp_path):
    with pytest.raises(loader.CheckpointError, match=r"parameter name: holds a string"):
        loader.save_model(Stringy(), tmp_path / "x.safetensors")
    assert not list(tmp_path.iterdir())


def test_key_map_renames_and_transposes_a_torch_linear(tmp_path, poison):
    src = MLP(nnx.Rngs(0))
    torch_style = {
        "0.weight": np.asarray(src.fc1.kernel[...]).T.copy(),
        "0.bias": np.asarray(src.fc1.bias[...]),
        "2.weight": np.asarray(src.fc2.kernel[...]).T.copy(),
        "2.bias": np.asarray(src.fc2.bias[...]),
    }
    path = _write(tmp_path, torch_style, "torch.safetensors")
    key_map = {
        "fc1.kernel": ("0.weight", np.transpose),
        "fc1.bias": "0.bias",
        "fc2.kernel": ("2.weight", lambda w: w.T),
        "fc2.bias": "2.bias",
    }
    target = MLP(nnx.Rngs(1))
    poison(target)
    model, report = loader.load_model(target, path, strict=True, key_map=key_map)
    assert report.ok
    assert_same_leaves(model, src)


def test_tied_parameter_resolves_against_the_path_state_reports(tmp_path, poison):
    src = Tied(nnx.Rngs(0))
    table = np.asarray(src.wte.embedding[...])
    path = _write(tmp_path, {"transformer.wte.weight": table}, "hf.safetensors")
    target = Tied(nnx.Rngs(1))
    poison(target)
    model, report = loader.load_model(
        target, path, strict=True, key_map={"lm_head.embedding": "transformer.wte.weight"}
    )
    # nnx.state names the shared embedding once, under its first path in sorted order
    assert [".".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(target))] == [
        "lm_head.embedding"
    ]
    assert report.ok and report.loaded == ["lm_head.embedding"]
    assert model.lm_head is model.wte
    np.testing.assert_array_equal(np.asarray(model.lm_head.embedding[...]), table)


def test_unknown_strategy_lists_known_ones(tmp_path):
    loader.save_model(Stack(nnx.Rngs(0)), tmp_path / "s.safetensors")
    with pytest.raises(loader.CheckpointError, match="known strategies"):
        loader.load_model(Stack(nnx.Rngs(0)), tmp_path / "s.safetensors", strategy="no-such-thing")
