"""On the chip: `loader.load_model` (the default strategy) fills a poisoned model from a small
synthetic checkpoint, every leaf bit-exact against the file, every leaf on the TPU.

The `tpu`-marked test runs only where jax's default backend is a TPU (tests/conftest.py skips it
elsewhere): `JAX_PLATFORMS=tpu python -m pytest -m tpu tests` on a TPU host, one process. Its
CPU twin runs the same check in the suite, so the test itself cannot rot unseen.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from safetensors import safe_open

import loader
import shapes
from loader.placement.leaves import iter_variables
from loader.planning.keys import key_of

SHAPES = "tiny-gpt2"


def _load_and_check(tmp_path, poison, platform: str) -> int:
    """Synthesize the shape set, load it into a poisoned model with the default strategy, and
    check every leaf against the file, bit for bit, on a device of `platform`; the leaf count."""
    spec = shapes.load_spec(SHAPES)
    path = shapes.synthesize(spec, tmp_path / "ck")
    model = shapes.model_builder(spec)()
    poison(model)  # a loader that does nothing leaves 7.0 everywhere
    model, report = loader.load_model(model, path, strict=True)
    assert report.ok and report.missing == [] and report.unexpected == []
    checked = 0
    with safe_open(str(path), "np") as f:
        keys = set(f.keys())
        for var_path, var in iter_variables(model):
            key = key_of(var_path)
            value = var.get_value()
            if key not in keys:
                continue
            assert {d.platform for d in value.devices()} == {platform}, key
            got, want = np.asarray(value), f.get_tensor(key)
            assert got.dtype == want.dtype and got.shape == want.shape, key
            assert got.tobytes() == want.tobytes(), f"{key}: not the file's bits"
            checked += 1
    assert checked == len(keys) == len(spec.tensors)
    return checked


@pytest.mark.tpu
def test_the_default_loader_fills_a_poisoned_model_on_the_tpu_bit_exact(tmp_path, poison):
    assert jax.default_backend() == "tpu"
    assert _load_and_check(tmp_path, poison, "tpu") > 0


def test_the_same_check_on_the_cpu_backend(tmp_path, poison):
    """The tpu test's body, here: it fails on a loader that leaves the poison in place."""
    assert _load_and_check(tmp_path, poison, "cpu") > 0


def test_the_check_fails_when_nothing_is_loaded(tmp_path, poison, monkeypatch):
    """The check can fail: a loader that reports a good load but leaves the model as it got it
    (poisoned) is caught."""
    from flax import nnx

    real = loader.load_model

    def lazy(target, path, **kwargs):
        _, report = real(nnx.clone(target), path, **kwargs)  # a true report, of another model
        return target, report

    monkeypatch.setattr(loader, "load_model", lazy)
    with pytest.raises(AssertionError, match="not the file's bits"):
        _load_and_check(tmp_path, poison, "cpu")
