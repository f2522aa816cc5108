"""Declared ignores, the cast policy, key-map diagnostics, what is left behind and where warnings
point: `load_model(ignore_unexpected=, ignore_missing=, casts=)` in every strategy (issue 34).

Every target is poisoned (each float leaf set to 7) before the load, so a loader that does
nothing fails; jax stays in its default 32-bit mode.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from nnx_models import MLP
from safetensors.numpy import save_file

import loader
from loader.report import LEFT_AT_ZEROS, CastKind, LoadWarning

#: file-reading strategies that run the shared load sequence (a sample across the executors:
#: pipelined's reader threads, the phased eager path, streaming, device-side casts)
STRATEGIES = ["pipelined", "eager", "hostcast", "mmap", "builder"]


class Counter(nnx.Module):
    """A float layer beside an integer buffer (as HF's position_ids meets jax's 32-bit mode)."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        self.fc = nnx.Linear(3, 2, rngs=rngs)
        self.ids = nnx.Variable(jnp.zeros((5,), jnp.int32))


def _mlp_tensors(dtype=np.float32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = {"fc1.kernel": (8, 16), "fc1.bias": (16,), "fc2.kernel": (16, 4), "fc2.bias": (4,)}
    return {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}


def _write(tmp_path, tensors, name="m.safetensors"):
    save_file(tensors, str(tmp_path / name))
    return tmp_path / name


def _poisoned(poison, factory=lambda: MLP(nnx.Rngs(1))):
    model = factory()
    poison(model)
    return model


def _quiet_load(*args, **kw):
    """A load that must not warn at all."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return loader.load_model(*args, **kw)


def _warned(*args, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, report = loader.load_model(*args, **kw)
    return model, report, [w for w in caught if issubclass(w.category, LoadWarning)]


# -- 1. declared ignores ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_declared_unexpected_keys_are_ignored_and_listed_in_every_strategy(
    strategy, tmp_path, poison
):
    tensors = _mlp_tensors()
    extras = {"pooler.dense.weight": np.ones((2, 2), np.float32)}
    extras["embeddings.position_ids"] = np.arange(4, dtype=np.int64)
    path = _write(tmp_path, tensors | extras)
    model, report = _quiet_load(
        _poisoned(poison),
        path,
        strict=True,
        strategy=strategy,
        ignore_unexpected=("pooler.*", "*.position_ids"),
    )
    assert sorted(report.ignored) == sorted(extras) and report.unexpected == []
    np.testing.assert_array_equal(np.asarray(model.fc1.kernel[...]), tensors["fc1.kernel"])
    with pytest.raises(loader.MismatchError, match="pooler.dense.weight"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, strategy=strategy)


def test_declared_missing_paths_are_ignored_and_listed(tmp_path, poison):
    tensors = _mlp_tensors()
    del tensors["fc2.bias"]
    path = _write(tmp_path, tensors)
    model, report = _quiet_load(_poisoned(poison), path, strict=True, ignore_missing="fc2.bias")
    assert report.ignored == ["fc2.bias"] and report.missing == []
    np.testing.assert_array_equal(np.asarray(model.fc2.kernel[...]), tensors["fc2.kernel"])


def test_a_pattern_that_matches_nothing_is_an_error_under_strict_and_a_warning_otherwise(
    tmp_path, poison
):
    path = _write(tmp_path, _mlp_tensors())
    with pytest.raises(loader.MismatchError, match="ignore_unexpected pattern 'poolr.*' matched"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, ignore_unexpected=["poolr.*"])
    with pytest.raises(loader.MismatchError, match="ignore_missing pattern 'fc9.*' matched"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, ignore_missing=["fc9.*"])
    _, report, warned = _warned(_poisoned(poison), path, ignore_unexpected=["poolr.*"])
    assert [u.pattern for u in report.unmatched_ignores] == ["poolr.*"]
    assert any("'poolr.*'" in str(w.message) for w in warned)


# -- 2. the cast policy ----------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["pipelined", "eager"])
def test_allowed_float_casts_are_listed_without_a_warning(strategy, tmp_path, poison):
    tensors = _mlp_tensors()
    path = _write(tmp_path, tensors)
    bf16 = lambda: MLP(nnx.Rngs(1), dtype=jnp.bfloat16)  # noqa: E731
    model, report = _quiet_load(
        _poisoned(poison, bf16), path, strict=True, casts="allow", strategy=strategy
    )
    assert sorted(c.path for c in report.casts) == sorted(tensors)
    assert all(c.expected and c.kind is CastKind.FLOAT for c in report.casts) and report.ok
    want = tensors["fc1.kernel"].astype(jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(model.fc1.kernel[...]), want)
    with pytest.raises(loader.MismatchError, match="cast from file dtype F32 to model dtype BF16"):
        loader.load_model(bf16(), path, strict=True, strategy=strategy)  # casts="report"


def test_a_bad_cast_policy_is_refused(tmp_path):
    with pytest.raises(loader.CheckpointError, match="casts='yes'"):
        loader.load_model(MLP(nnx.Rngs(1)), _write(tmp_path, _mlp_tensors()), casts="yes")


def _counter_file(tmp_path, ids) -> object:
    rng = np.random.default_rng(1)
    tensors = {"fc.kernel": rng.standard_normal((3, 2)).astype(np.float32)}
    tensors["fc.bias"] = np.zeros(2, np.float32)
    return _write(tmp_path, tensors | {"ids": np.asarray(ids, np.int64)})


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_int64_into_int32_is_checked_on_the_values_and_never_a_mismatch(strategy, tmp_path):
    assert not jax.config.jax_enable_x64  # type: ignore[attr-defined]
    path = _counter_file(tmp_path, [0, 1, 2, 3, 2**31 - 1])
    model, report = _quiet_load(lambda: Counter(nnx.Rngs(0)), path, strict=True, strategy=strategy)
    assert [(c.path, c.kind, c.expected) for c in report.casts] == [("ids", CastKind.INTEGER, True)]
    np.testing.assert_array_equal(np.asarray(model.ids[...]), [0, 1, 2, 3, 2**31 - 1])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_integer_that_does_not_fit_is_one_error_naming_the_tensor_and_value(strategy, tmp_path):
    path = _counter_file(tmp_path, [0, 1, 2**31, 3, -(2**40)])
    with pytest.raises(loader.CheckpointError, match=r"ids.*value 2147483648 \(at index \(2,\)\)"):
        loader.load_model(lambda: Counter(nnx.Rngs(0)), path, casts="allow", strategy=strategy)


def test_a_change_of_kind_stays_a_mismatch_under_allow(tmp_path):
    tensors = _mlp_tensors()
    tensors["fc2.bias"] = np.arange(4, dtype=np.int64)
    path = _write(tmp_path, tensors)
    with pytest.raises(loader.MismatchError, match="fc2.bias.*I64 to model dtype F32 changes"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, casts="allow")


def test_the_dtype_judged_is_the_transforms_output(tmp_path, poison):
    """A key-map callable that returns the model's dtype is no cast (F16 in the file, F32 out)."""
    tensors = _mlp_tensors()
    half = tensors["fc1.kernel"].astype(np.float16)
    path = _write(tmp_path, tensors | {"fc1.kernel": half})
    key_map = {"fc1.kernel": ("fc1.kernel", lambda x: x.astype(np.float32))}
    model, report = _quiet_load(_poisoned(poison), path, strict=True, key_map=key_map)
    assert report.casts == [] and report.staged == ["fc1.kernel"]
    np.testing.assert_array_equal(np.asarray(model.fc1.kernel[...]), half.astype(np.float32))


def test_a_key_map_callable_returning_int32_from_int64_is_fine(tmp_path):
    path = _counter_file(tmp_path, [5, 6, 7, 8, 9])
    key_map = {"ids": ("ids", lambda x: x.astype(np.int32))}
    model, report = _quiet_load(lambda: Counter(nnx.Rngs(0)), path, strict=True, key_map=key_map)
    assert report.casts == []
    np.testing.assert_array_equal(np.asarray(model.ids[...]), [5, 6, 7, 8, 9])


# -- 3. key-map diagnostics ------------------------------------------------------------------------
def test_a_file_side_typo_names_the_entry_and_the_closest_file_key(tmp_path):
    tensors = _mlp_tensors()
    tensors["fc1.weight"] = tensors.pop("fc1.kernel")
    path = _write(tmp_path, tensors)
    with pytest.raises(loader.MismatchError) as caught:
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, key_map={"fc1.kernel": "fc1.wieght"})
    message = str(caught.value)
    assert "fc1.kernel: missing from the checkpoint (looked for file key 'fc1.wieght'" in message
    assert "from key_map entry 'fc1.kernel' -> 'fc1.wieght')" in message
    assert "closest file key: 'fc1.weight'" in message
    assert "fc1.weight: in the checkpoint but not in the model (unexpected); closest" in message


def test_a_model_side_typo_names_the_entry_and_the_closest_model_path(tmp_path, poison):
    tensors = _mlp_tensors()
    tensors["fc1.weight"] = tensors.pop("fc1.kernel")
    path = _write(tmp_path, tensors)
    key_map = {"fc1.kernal": "fc1.weight"}
    with pytest.raises(loader.MismatchError) as caught:
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, key_map=key_map)
    message = str(caught.value)
    assert "key_map entry 'fc1.kernal' -> 'fc1.weight': no model path 'fc1.kernal'" in message
    assert "closest model path: 'fc1.kernel'" in message
    _, report, warned = _warned(_poisoned(poison), path, key_map=key_map)
    assert [u.model_key for u in report.unused_key_map] == ["fc1.kernal"]
    assert any("key_map entry 'fc1.kernal'" in str(w.message) for w in warned)


def test_an_unused_key_map_entry_alone_fails_a_strict_load(tmp_path, poison):
    tensors = _mlp_tensors()
    path = _write(tmp_path, tensors)
    with pytest.raises(loader.MismatchError, match="key_map entry 'fc3.kernel'"):
        loader.load_model(MLP(nnx.Rngs(1)), path, strict=True, key_map={"fc3.kernel": "x"})


# -- 5. what is left behind, and where the warning points ----------------------------------------
def test_an_abstract_targets_missing_and_reshaped_leaves_are_said_to_be_zeros(tmp_path):
    tensors = _mlp_tensors()
    del tensors["fc2.bias"]
    tensors["fc1.kernel"] = np.ones((3, 3), np.float32)
    path = _write(tmp_path, tensors)
    model, report, warned = _warned(lambda: MLP(nnx.Rngs(1)), path)
    assert report.left_at == LEFT_AT_ZEROS
    lines = [str(w.message) for w in warned]
    assert any("fc2.bias: missing" in w and LEFT_AT_ZEROS in w for w in lines)
    assert any("fc1.kernel: model expects" in w and LEFT_AT_ZEROS in w for w in lines)
    assert not np.any(np.asarray(model.fc2.bias[...]))
    with pytest.raises(loader.MismatchError, match=r"fc2.bias.*left at zeros \(abstract target"):
        loader.load_model(lambda: MLP(nnx.Rngs(1)), path, strict=True)


def test_an_instance_targets_leaves_keep_their_initial_value_and_say_so(tmp_path, poison):
    tensors = _mlp_tensors()
    del tensors["fc2.bias"]
    model, report, warned = _warned(_poisoned(poison), _write(tmp_path, tensors))
    assert "left at the model's initial value" in str(warned[0].message)
    assert np.all(np.asarray(model.fc2.bias[...]) == 7.0)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_warning_points_at_the_callers_line(strategy, tmp_path, poison):
    tensors = _mlp_tensors()
    del tensors["fc2.bias"]
    tensors["extra"] = np.zeros(2, np.float32)
    path = _write(tmp_path, tensors)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader.load_model(_poisoned(poison), path, strategy=strategy)  # the caller's line
    warned = [w for w in caught if issubclass(w.category, LoadWarning)]
    assert len(warned) == 2
    for w in warned:
        assert (w.filename, w.lineno) == (__file__, _line_of("# the caller's line")), w
    with warnings.catch_warnings(record=True) as caught:  # a late shape mismatch, after the read
        warnings.simplefilter("always")
        key_map = {"fc1.kernel": ("fc1.kernel", lambda x: np.asarray(x)[:2])}
        loader.load_model(_poisoned(poison), path, key_map=key_map, strategy=strategy)  # late
    late = [w for w in caught if "model expects shape (8, 16)" in str(w.message)]
    assert late and all(w.lineno == _line_of("# late") for w in late)


def _line_of(marker: str) -> int:
    with open(__file__) as fh:
        return next(i for i, line in enumerate(fh, 1) if line.rstrip().endswith(marker))
