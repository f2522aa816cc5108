"""The one load sequence (`loader.sequence.run_load`): order of the executor's hooks, no read
before a strict plan check, `close` always, and the late check in every model strategy."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import loader
from loader import strategies
from loader.phases import NULL_PROBE
from loader.sequence import LoadArgs, Recipe, run_load
from loader.stream import Stream
from loader.vocabulary import FILE, STRATEGY
from tests.unit.nnx_models import MLP, assert_same_leaves

STRICT = LoadArgs(strict=True)

FILE_STRATEGIES = [
    n for n, e in strategies.catalog().items() if e.kind == STRATEGY and e.checkpoint == FILE
]


class Recording(Stream):
    """The streaming executor, noting each hook and each tensor read in `log`."""

    def __init__(self, log: list[str], *, fail: bool = False) -> None:
        super().__init__()
        self.log, self.fail = log, fail

    def start(self, source, probe) -> None:
        self.log.append("start")
        super().start(source, probe)
        read = self._read
        self._read = lambda key: (self.log.append(f"read {key}"), read(key))[1]

    def fill(self, plan, source, probe) -> None:
        self.log.append("fill")
        if self.fail:
            raise RuntimeError("fill failed")
        super().fill(plan, source, probe)

    def close(self) -> None:
        self.log.append("close")
        super().close()


@pytest.fixture
def saved(tmp_path):
    model = MLP(nnx.Rngs(0))
    path = tmp_path / "mlp.safetensors"
    loader.save_model(model, path)
    return model, path


def _builder(log: list[str]):
    def build():
        log.append("build")
        return MLP(nnx.Rngs(5))

    return build


def test_hooks_run_in_order_and_fill_the_model(saved):
    model, path = saved
    log: list[str] = []
    got, report = run_load(Recipe(lambda: Recording(log)), _builder(log), path, NULL_PROBE, STRICT)
    assert log[:3] == ["start", "build", "fill"] and log[-1] == "close"
    assert len([e for e in log if e.startswith("read")]) == len(report.loaded) == 4
    assert_same_leaves(got, model)


def test_strict_mismatch_refuses_before_any_read(saved):
    _, path = saved
    log: list[str] = []
    with pytest.raises(loader.MismatchError):
        run_load(
            Recipe(lambda: Recording(log)), lambda: MLP(nnx.Rngs(0), dh=3), path, NULL_PROBE, STRICT
        )
    assert log == ["start", "close"]


def test_close_runs_when_fill_fails(saved):
    _, path = saved
    log: list[str] = []
    with pytest.raises(RuntimeError, match="fill failed"):
        run_load(Recipe(lambda: Recording(log, fail=True)), _builder(log), path)
    assert log == ["start", "build", "fill", "close"]


@pytest.mark.parametrize("name", FILE_STRATEGIES)
def test_every_strategy_runs_the_late_check(saved, name):
    """A numpy-only transform's wrong shape is found after the read, by every strategy."""
    _, path = saved
    cut = {"fc1.kernel": ("fc1.kernel", lambda x: np.asarray(x)[:1])}  # untraceable: late
    info = strategies.get(name)
    with pytest.raises(
        loader.MismatchError, match="fc1.kernel"
    ):  # `sharded`: at the plan, re-sharded
        info.load(lambda: MLP(nnx.Rngs(1)), path, strict=True, key_map=cut)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, report = info.load(lambda: MLP(nnx.Rngs(1)), path, key_map=cut)
    assert [m.path for m in report.shape_mismatches] == ["fc1.kernel"]
    assert "fc1.kernel" not in report.loaded and len(report.loaded) == 3
    assert any("fc1.kernel: model expects shape" in str(w.message) for w in caught)
    assert model.fc1.kernel.get_value().shape == (8, 16)
    assert model.fc1.kernel.get_value().dtype == jnp.float32


def _leaf_values(model) -> list[object]:
    return [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]


@pytest.mark.parametrize("name", FILE_STRATEGIES)
def test_on_built_sees_the_built_model_before_any_leaf_is_assigned(saved, name, poison):
    """`on_built` gets the built model once, after the build and before the fill (so a compile
    can start from its shapes): abstract, or for a strategy that builds a real instance, still
    holding the builder's own (poisoned) values; the load then fills every leaf."""
    model, path = saved
    log: list[str] = []
    seen: list[list[object]] = []

    def build():
        built = _builder(log)()
        poison(built)
        return built

    def on_built(built) -> None:
        log.append("on_built")
        seen.append(_leaf_values(built))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `sharded` reports re-sharding the single-device file
        got, _ = strategies.get(name).load(build, path, on_built=on_built)
    assert log == ["build", "on_built"]
    assert len(seen) == 1 and len(seen[0]) == len(_leaf_values(model))
    for value in seen[0]:
        assert isinstance(value, jax.ShapeDtypeStruct) or np.all(np.asarray(value) == 7.0)
    assert_same_leaves(got, model)


def test_on_built_runs_between_the_build_and_the_fill(saved):
    _, path = saved
    log: list[str] = []
    run_load(
        Recipe(lambda: Recording(log)),
        _builder(log),
        path,
        NULL_PROBE,
        LoadArgs(on_built=lambda _: log.append("on_built")),
    )
    assert log[:4] == ["start", "build", "on_built", "fill"]
