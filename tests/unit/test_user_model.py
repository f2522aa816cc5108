"""A user's own model named `MODULE:NAME` (`bench.user_model`), and the child's check of a load
into it (`bench.child.models.verify_planned`): every leaf the load fills, against the file."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

import loader
from bench.child.models import verify_planned
from bench.errors import BenchError
from bench.user_model import builder, check, is_named, resolve

FLIP = loader.Transpose((1, 0))
KEY_MAP = {"dense.kernel": ("w1", FLIP), "dense.bias": "b1", "head.kernel": ("w2", FLIP)}


class Tiny(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.initializers.constant(7.0)  # poisoned: what a load that writes nothing leaves
        self.dense = nnx.Linear(4, 3, kernel_init=init, bias_init=init, rngs=rngs)
        self.head = nnx.Linear(3, 2, use_bias=False, kernel_init=init, rngs=rngs)


def build() -> Tiny:
    return Tiny(nnx.Rngs(0))


@pytest.fixture
def checkpoint(tmp_path) -> str:
    rng = np.random.default_rng(0)
    path = tmp_path / "model.safetensors"
    save_file(
        {
            "w1": rng.standard_normal((3, 4), dtype=np.float32),
            "b1": rng.standard_normal(3, dtype=np.float32),
            "w2": rng.standard_normal((2, 3), dtype=np.float32),
        },
        path,
    )
    return str(path)


def test_a_loaded_model_checks_every_leaf_and_an_unloaded_one_fails(checkpoint):
    model, _ = loader.load_model(build, checkpoint, key_map=KEY_MAP, strict=True)
    assert verify_planned(model, checkpoint, KEY_MAP) == (3, None)
    checked, error = verify_planned(build(), checkpoint, KEY_MAP)  # nothing loaded into it
    assert checked == 0 and error is not None and "differs from its file tensor" in error


def test_a_key_map_that_gets_the_file_wrong_is_named(checkpoint):
    wrong = {**KEY_MAP, "dense.kernel": "w1"}  # torch's layout, not transposed
    checked, error = verify_planned(build(), checkpoint, wrong)
    assert checked == 0 and error is not None
    assert error.startswith("1 problem(s) in the load: dense.kernel: model expects shape (4, 3)")


def test_names_are_checked_then_resolved_naming_what_failed():
    here = f"{__name__}:build"
    assert is_named(here) and not is_named("port")
    check(here, "--model")
    assert resolve(f"{__name__}:KEY_MAP", "--key-map") is KEY_MAP
    assert isinstance(builder(here)(), Tiny)
    for spec, option, said in [
        ("nowhere_at_all:build", "--model", "no module 'nowhere_at_all' on the import path"),
        (f"{__name__}:", "--model", "expected MODULE:NAME"),
    ]:
        with pytest.raises(BenchError, match=said):
            check(spec, option)
    with pytest.raises(BenchError, match="has no attribute 'NOPE'"):
        resolve(f"{__name__}:NOPE", "--key-map")
    with pytest.raises(BenchError, match="KEY_MAP.*dict is not callable"):
        builder(f"{__name__}:KEY_MAP")
