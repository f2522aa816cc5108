"""Every registered strategy loads synthetic checkpoints bit-exactly, on 1 device and on 8.

Parametrised over the registry: a new strategy file is picked up without editing this test.
Targets are builders (abstract or random init, depending on the strategy); every loaded tensor is
checked against the synthetic checkpoint's digests, so a strategy that leaves random or poisoned
values fails.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

import loader
import shapes
from bench.strategies import extra_modules
from loader import strategies
from loader.placement.leaves import iter_variables
from loader.sharded.rule import AXIS
from loader.vocabulary import FILE, STRATEGY, URL

# The registry plus the modules named in LOADBENCH_EXTRA_STRATEGIES (how the bench adds a strategy
# without editing loadbench): a strategy added either way is collected here.
EXTRA = extra_modules()
# (a strategy that loads a URL only, `download`, is tested against real servers: test_remote.py)
MODEL_STRATEGIES = [
    n for n, e in strategies.catalog(EXTRA).items() if e.kind == STRATEGY and e.checkpoint != URL
]


def small_sa3_spec() -> shapes.ShapeSpec:
    """sa3's names and dtypes, two blocks of each stack, every dimension shrunk."""
    sa3 = shapes.load_spec("sa3")
    keep = [t for t in sa3.tensors if not re.search(r"\.(?:[2-9]|\d\d+)\.", t.name)]
    small = [
        shapes.TensorSpec(
            t.name, t.dtype, tuple(max(1, d // 64) if d else 0 for d in t.shape), t.file
        )
        for t in keep
    ]
    return shapes.ShapeSpec(
        sa3.source, sa3.revision, sa3.files, tuple(small), provenance="test: sa3 shrunk"
    )


SPECS = {"tiny-gpt2": lambda: shapes.load_spec("tiny-gpt2"), "small-sa3": small_sa3_spec}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, tuple[shapes.ShapeSpec, Path]]:
    out = {}
    for name, make in SPECS.items():
        spec = make()
        out[name] = (spec, shapes.synthesize(spec, tmp_path_factory.mktemp(name)))
    return out


def prepared_path(info, spec, ckpt: Path, tmp_path: Path) -> Path:
    prepare = info.prepare()
    if info.checkpoint == FILE or prepare is None:
        return ckpt
    return prepare(ckpt, tmp_path / info.checkpoint, shapes.model_builder(spec))


def assert_matches_checkpoint(model, ckpt: Path) -> int:
    checked = 0
    for path, var in iter_variables(model):
        key = ".".join(map(str, path))
        shapes.verify_tensor(ckpt, key, np.asarray(var.get_value()))
        checked += 1
    return checked


@pytest.mark.parametrize("devices", [1, 8])
@pytest.mark.parametrize("spec_name", sorted(SPECS))
@pytest.mark.parametrize("name", MODEL_STRATEGIES)
def test_strategy_loads_bit_exactly(checkpoints, tmp_path, name, spec_name, devices):
    spec, ckpt = checkpoints[spec_name]
    info = strategies.get(name, EXTRA)
    mesh = jax.make_mesh((devices,), (AXIS,), devices=jax.devices()[:devices])
    with jax.set_mesh(mesh):
        path = prepared_path(info, spec, ckpt, tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", loader.LoadWarning)
            model, report = info.load(shapes.model_builder(spec, seed=123), path, strict=True)
    assert report.ok, report.problems()
    assert assert_matches_checkpoint(model, ckpt) == len(spec.tensors)


@pytest.mark.parametrize("name", MODEL_STRATEGIES)
def test_mismatched_checkpoint_is_reported_the_same_way(checkpoints, tmp_path, name):
    """A checkpoint missing a tensor and holding an extra one: identical reports everywhere."""
    spec, ckpt = checkpoints["tiny-gpt2"]
    info = strategies.get(name, EXTRA)
    wrong = list(spec.tensors)
    dropped = wrong.pop(3)
    wrong.append(shapes.TensorSpec("extra.weight", "F32", (2, 2), spec.files[0]))
    bad = shapes.synthesize(
        shapes.ShapeSpec(spec.source, spec.revision, spec.files, tuple(wrong)), tmp_path / "bad"
    )
    path = prepared_path(info, spec, bad, tmp_path)  # converted checkpoints carry the damage too
    with pytest.raises(loader.MismatchError) as err:
        info.load(shapes.model_builder(spec), path, strict=True)
    assert err.value.report.missing == [dropped.name]
    assert err.value.report.unexpected == ["extra.weight"]


def test_every_strategy_is_registered_with_a_description():
    names = strategies.names()
    for expected in [
        "eager",
        "mmap",
        "pread",
        "builder",
        "hostcast",
        "zerocopy",
        "sharded",
        "floor",
    ]:
        assert expected in names
        assert strategies.get(expected).description
    assert {n: e.description for n, e in strategies.catalog().items()} == {
        n: strategies.get(n).description for n in names
    }


def test_floor_reads_every_byte(checkpoints):
    _, ckpt = checkpoints["tiny-gpt2"]
    model, report = strategies.get("floor").load(None, ckpt)
    assert model is None and report is None


def test_load_model_refuses_a_strategy_that_loads_no_model(checkpoints):
    spec, ckpt = checkpoints["tiny-gpt2"]
    with pytest.raises(strategies.StrategyError, match="'floor' loads no model"):
        loader.load_model(shapes.model_builder(spec), ckpt, strategy="floor")


def test_zerocopy_aliases_the_read_buffer(checkpoints):
    spec, ckpt = checkpoints["tiny-gpt2"]
    model, _ = strategies.get("zerocopy").load(shapes.model_builder(spec), ckpt, strict=True)
    kernel = next(v.get_value() for _, v in iter_variables(model) if v.get_value().size > 64)
    assert kernel.unsafe_buffer_pointer() % 64 == 0


def test_model_builder_keeps_nnx_list_integer_paths(checkpoints):
    spec, _ = checkpoints["tiny-gpt2"]
    model = nnx.eval_shape(shapes.model_builder(spec))
    assert any(isinstance(p, int) for path, _ in iter_variables(model) for p in path)


def test_sharded_splits_by_the_rule_over_8_devices(checkpoints):
    from loader.sharded.rule import shard_axis

    spec, ckpt = checkpoints["tiny-gpt2"]
    with jax.set_mesh(jax.make_mesh((8,), (AXIS,))):
        model, _ = strategies.get("sharded").load(shapes.model_builder(spec), ckpt, strict=True)
    split = 0
    for _, var in iter_variables(model):
        arr = var.get_value()
        axis = shard_axis(arr.shape, 8)
        assert len(arr.sharding.device_set) == 8
        if axis is not None:
            split += 1
            assert {s.data.shape[axis] for s in arr.addressable_shards} == {arr.shape[axis] // 8}
        else:
            assert arr.sharding.is_fully_replicated
    assert split > 0


def test_sharded_without_a_mesh_uses_every_device(checkpoints):
    spec, ckpt = checkpoints["tiny-gpt2"]
    model, report = strategies.get("sharded").load(shapes.model_builder(spec), ckpt, strict=True)
    assert report.ok
    assert all(len(v.get_value().sharding.device_set) == 8 for _, v in iter_variables(model))
