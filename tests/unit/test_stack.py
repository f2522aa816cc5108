"""`loader.Stack`: one leaf from N file tensors along a new axis (scanned layers).

Every model strategy fills stacked leaves bit-exactly (against numpy's `np.stack` of the per-layer
transforms) into a poisoned model; `pipelined` reads each layer straight into its slice of the
leaf's buffers (never through the host assembly the other strategies use, and within its budget);
a Stack whose tensors do not stack is refused from the headers before any read, naming the keys.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

import loader
from loader import Reshape, Stack, Transpose, strategies
from loader.sharded.rule import AXIS
from loader.transforms import StackError
from loader.vocabulary import STRATEGY, URL
from tests.conftest import poison_model

# (a strategy that loads a URL only, `download`, is tested against real servers: test_remote.py)
MODEL_STRATEGIES = [
    n for n, e in strategies.catalog().items() if e.kind == STRATEGY and e.checkpoint != URL
]
RNG = np.random.default_rng(0)
L = 4

#: per-layer file tensors, as Hugging Face stores a Llama's layers
FILE = {
    **{f"layers.{i}.up.weight": RNG.standard_normal((24, 16), np.float32) for i in range(L)},
    **{f"layers.{i}.q.weight": RNG.standard_normal((32, 16), np.float32) for i in range(L)},
    **{f"layers.{i}.norm.weight": RNG.standard_normal((16,), np.float32) for i in range(L)},
    **{f"layers.{i}.gate.weight": RNG.standard_normal((24, 16), np.float32) for i in range(L)},
    "embed.weight": RNG.standard_normal((10, 16), np.float32),
}


def keys(name: str) -> list[str]:
    return [f"layers.{i}.{name}.weight" for i in range(L)]


#: model key -> Stack entry: plain, per-layer Transpose (tuple form), a view chain (in the
#: Stack), a new axis that is not the first
KEY_MAP = {
    "layers.norm": Stack(keys("norm"), axis=0),
    "layers.up": (Stack(keys("up"), axis=0), Transpose((1, 0))),
    "layers.q": Stack(keys("q"), axis=0, transform=(Transpose((1, 0)), Reshape((16, 4, 8)))),
    "layers.gate_t": Stack(keys("gate"), axis=1),
    "embed": "embed.weight",
}


def _expected(key: str) -> np.ndarray:
    entry = KEY_MAP[key]
    if isinstance(entry, str):
        return FILE[entry]
    stack = loader.transforms.as_stack(entry)
    assert stack is not None
    return stack([FILE[k] for k in stack.keys])


#: what each leaf must hold: numpy's np.stack of each layer through its transform (made once,
#: before any test forbids np.stack)
EXPECTED = {key: _expected(key) for key in KEY_MAP}


class Scanned(nnx.Module):
    def __init__(self, dtype=np.float32) -> None:
        self.layers = nnx.Module()
        for key in KEY_MAP:
            owner, _, name = key.rpartition(".")
            holder = getattr(self, owner) if owner else self
            setattr(holder, name, nnx.Param(np.zeros(EXPECTED[key].shape, dtype)))


def leaf(model: Scanned, key: str) -> np.ndarray:
    owner, _, name = key.rpartition(".")
    holder = getattr(model, owner) if owner else model
    return np.asarray(getattr(holder, name).get_value())


def poisoned() -> Scanned:
    model = Scanned()
    poison_model(model)
    return model


@pytest.fixture(scope="module")
def layered_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("layered") / "model.safetensors"
    save_file(FILE, str(path))
    return path


def test_stack_is_numpy_stack_of_each_layer_through_its_transform():
    s = Stack(["a", "b", "c"], axis=1, transform=Transpose((1, 0)))
    x = [RNG.standard_normal((2, 5)) for _ in range(3)]
    np.testing.assert_array_equal(s(x), np.stack([t.T for t in x], axis=1))
    assert s.out_shape((2, 5)) == (5, 3, 2) and s.index(1, 2) == (slice(None), 1)
    assert (Stack(["a"], 0), Transpose((1, 0))) and loader.transforms.as_stack(
        (Stack(["a", "b"], 0), Transpose((1, 0)))
    ) == Stack(["a", "b"], 0, Transpose((1, 0)))
    assert Stack(["a"], -1).out_shape((2, 5)) == (2, 5, 1)
    for bad in ([], "ab", ["a", "a"]):
        with pytest.raises(StackError):
            Stack(bad)
    with pytest.raises(StackError, match="must be declared"):
        Stack(["a"], 0, transform=lambda x: x.T)


@pytest.mark.parametrize("name", MODEL_STRATEGIES)
def test_every_strategy_fills_stacked_leaves_bit_exactly(layered_file, tmp_path, name):
    info = strategies.get(name)
    path = layered_file
    prepare = info.prepare()
    if prepare is not None and info.checkpoint != "file":
        path = prepare(layered_file, tmp_path / info.checkpoint, None)
    model, report = info.load(poisoned, path, strict=True, key_map=KEY_MAP)
    assert report.ok, report.problems()
    for key in KEY_MAP:
        np.testing.assert_array_equal(leaf(model, key), EXPECTED[key], err_msg=f"{name}: {key}")
    assert sorted(report.loaded) == sorted(KEY_MAP)  # the stacked leaves, not their layers
    assert sorted(report.stacked) == sorted(k for k in KEY_MAP if k != "embed")
    assert report.unexpected == []  # every layer's key counts as used


def _no_host_assembly(monkeypatch) -> None:
    import loader.planning.stacking as stacking

    def refuse(*_a, **_k):
        raise AssertionError("a stacked leaf was assembled through a host copy")

    monkeypatch.setattr(stacking, "assemble", refuse)
    monkeypatch.setattr(np, "stack", refuse)


@pytest.mark.parametrize("devices, staging", [(1, False), (8, False), (1, True)])
def test_pipelined_reads_layers_into_the_leaf_without_a_host_copy(
    layered_file, monkeypatch, devices, staging
):
    """No host assembly, no np.stack: on 1 device, 8, and through the staging path."""
    _no_host_assembly(monkeypatch)
    mesh = jax.make_mesh((devices,), (AXIS,), devices=jax.devices()[:devices])
    with jax.set_mesh(mesh):
        model, report = loader.load_model(
            poisoned, layered_file, strict=True, key_map=KEY_MAP, staging=staging
        )
    assert report.ok and sorted(report.loaded) == sorted(KEY_MAP)
    for key in KEY_MAP:
        np.testing.assert_array_equal(leaf(model, key), EXPECTED[key], err_msg=key)


def test_pipelined_places_a_sharded_stack_from_its_device_regions(layered_file, monkeypatch):
    """Layers split over devices along the stack axis: each device buffer gets its layers."""
    _no_host_assembly(monkeypatch)
    mesh = jax.make_mesh((4,), (AXIS,), devices=jax.devices()[:4])
    spec = jax.sharding.PartitionSpec(AXIS, None)

    def sharded() -> nnx.Module:
        m = nnx.Module()
        m.w = nnx.Param(
            jax.device_put(np.zeros((L, 16), np.float32), jax.sharding.NamedSharding(mesh, spec)),
        )
        return m

    with pytest.warns(loader.LoadWarning, match="unexpected"):  # the file's other tensors
        model, report = loader.load_model(sharded, layered_file, key_map={"w": Stack(keys("norm"))})
    monkeypatch.undo()
    assert report.loaded == report.stacked == ["w"] and report.shape_mismatches == []
    value = model.w.get_value()
    assert value.sharding.spec == spec and len(value.addressable_shards) == 4
    for shard in value.addressable_shards:
        i = shard.index[0].start
        np.testing.assert_array_equal(np.asarray(shard.data)[0], FILE[f"layers.{i}.norm.weight"])


def test_pipelined_stacks_a_leaf_larger_than_its_budget_within_it(tmp_path, monkeypatch):
    """A 4 MiB stack under a 1 MiB budget, cast f32 -> bf16 through the scratch: within it."""
    _no_host_assembly(monkeypatch)
    big = {f"h.{i}.w": np.full((256, 1024), i, np.float32) for i in range(4)}  # 1 MiB each
    save_file(big, str(tmp_path / "big.safetensors"))
    km = {"w": (Stack(sorted(big), axis=0), Transpose((1, 0)))}

    def target() -> nnx.Module:
        m = nnx.Module()
        m.w = nnx.Param(np.zeros((4, 1024, 256), ml_dtypes.bfloat16))
        return m

    budget = 1 << 20
    with pytest.warns(loader.LoadWarning, match="w: cast from file dtype F32 to model dtype BF16"):
        model, report = loader.load_model(
            target, tmp_path / "big.safetensors", key_map=km, budget=budget
        )
    monkeypatch.undo()
    assert report.inflight_peak_bytes is not None and report.inflight_peak_bytes <= budget
    assert [str(c) for c in report.casts] == ["w: cast from file dtype F32 to model dtype BF16"]
    got = np.asarray(model.w.get_value(), np.float32)
    assert [float(got[i].min()) for i in range(4)] == [0, 1, 2, 3] and got.shape == (4, 1024, 256)


@pytest.fixture
def no_reads(monkeypatch):
    import loader.format.source as source
    import loader.pipeline.sources.local as local

    def no_read(*_a, **_k):
        raise AssertionError("read before the plan check")

    monkeypatch.setattr(local.FileBytes, "read", no_read)
    monkeypatch.setattr(source.CheckpointSource, "read", no_read)


@pytest.mark.parametrize("strategy", ["pipelined", "eager"])
def test_a_stack_that_does_not_stack_is_refused_before_any_read(tmp_path, no_reads, strategy):
    odd = dict(FILE)
    odd["layers.2.up.weight"] = RNG.standard_normal((24, 15), np.float32)
    odd["layers.3.q.weight"] = RNG.standard_normal((32, 16)).astype(ml_dtypes.bfloat16)
    save_file(odd, str(tmp_path / "odd.safetensors"))
    path = tmp_path / "odd.safetensors"
    run = dict(strict=True, strategy=strategy)
    with pytest.raises(
        StackError,
        match=r"'layers.0.up.weight' is F32 \(24, 16\) but "
        r"'layers.2.up.weight' is F32 \(24, 15\)",
    ):
        loader.load_model(poisoned, path, key_map={"layers.up": KEY_MAP["layers.up"]}, **run)
    km = {"layers.q": KEY_MAP["layers.q"]}
    with pytest.raises(StackError, match=r"but 'layers.3.q.weight' is BF16"):
        loader.load_model(poisoned, path, key_map=km, **run)
    short = {"layers.norm": Stack(keys("norm")[:3]), "layers.up": KEY_MAP["layers.up"]}
    with pytest.raises(
        StackError,
        match=r"3 file keys \('layers.0.norm.weight' .. "
        r"'layers.2.norm.weight'\) for a leaf of shape \(4, 16\), whose axis 0 "
        "holds 4",
    ):
        loader.load_model(poisoned, path, key_map=short, **run)
    typo = {"layers.norm": Stack([*keys("norm")[:3], "layers.3.nrom.weight"])}
    with pytest.raises(StackError, match=r"\['layers.3.nrom.weight'\] \(1 of them\) not found"):
        loader.load_model(poisoned, path, key_map=typo, **run)


def test_a_wrong_per_layer_shape_is_a_reported_mismatch(layered_file, no_reads):
    km = dict(KEY_MAP, **{"layers.up": Stack(keys("up"))})  # its Transpose forgotten
    with pytest.raises(loader.MismatchError) as err:
        loader.load_model(poisoned, layered_file, strict=True, key_map=km)
    assert (
        "layers.up: model expects shape (4, 16, 24), file key 'layers.0.up.weight' has (24, 16), "
        "Stack(4 keys layers.0.up.weight .. layers.3.up.weight, axis=0) gives (4, 24, 16)"
    ) in str(err.value)


def test_a_missing_stack_is_missing_and_left_at_zeros(tmp_path):
    save_file({"embed.weight": FILE["embed.weight"]}, str(tmp_path / "e.safetensors"))
    km = {"layers.norm": Stack(keys("norm")), "embed": "embed.weight"}

    def target() -> nnx.Module:
        m = nnx.Module()
        m.norm = nnx.Param(np.ones((L, 16), np.float32))
        m.embed = nnx.Param(np.ones((10, 16), np.float32))
        return m

    km = {"norm": Stack(keys("norm")), "embed": "embed.weight"}
    with pytest.warns(loader.LoadWarning, match="norm: missing"):
        model, report = loader.load_model(target, tmp_path / "e.safetensors", key_map=km)
    assert report.missing == ["norm"] and report.stacked == [] and report.loaded == ["embed"]
    assert not np.asarray(model.norm.get_value()).any()  # abstract target: zeros, as reported
