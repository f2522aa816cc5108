"""`loader.target.abstract.abstract_build` returns exactly what `nnx.eval_shape` returns, without
the quadratic origin walk, restores jax's class attribute, and falls back with a note when it
must."""

from __future__ import annotations

import threading
import warnings

import jax
import jax.numpy as jnp
import nnx_models  # the suite's shared models (tests/unit/nnx_models.py)
import pytest
from flax import nnx
from jax._src.interpreters import partial_eval as pe
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from bench.child.abstract_build import sa3_like_builder
from loader.target import abstract
from loader.target.abstract import AbstractBuildWarning, abstract_build

ORIGINAL_SHARDING = jax.core.Tracer.__dict__["sharding"]


def assert_same_abstract(fast, ref) -> None:
    """Same graphdef, state paths, variable types, metadata and leaf shape/dtype/sharding."""
    graph_fast, state_fast = nnx.split(fast)
    graph_ref, state_ref = nnx.split(ref)
    assert graph_fast == graph_ref
    flat_fast, flat_ref = list(nnx.to_flat_state(state_fast)), list(nnx.to_flat_state(state_ref))
    assert [p for p, _ in flat_fast] == [p for p, _ in flat_ref]
    assert flat_ref, "the reference model has no state: the comparison would be vacuous"
    for (path, var_fast), (_, var_ref) in zip(flat_fast, flat_ref, strict=True):
        assert type(var_fast) is type(var_ref), path
        assert var_fast.get_metadata() == var_ref.get_metadata(), path
        leaf_fast, leaf_ref = var_fast.get_value(), var_ref.get_value()
        assert type(leaf_fast) is type(leaf_ref) is jax.ShapeDtypeStruct, path
        assert leaf_fast == leaf_ref, path  # shape, dtype, weak_type and sharding
        assert getattr(leaf_fast, "sharding", None) == getattr(leaf_ref, "sharding", None), path


def build_both(builder):
    with warnings.catch_warnings():
        warnings.simplefilter("error", AbstractBuildWarning)  # the fast path must apply
        fast = abstract_build(builder)
    return fast, nnx.eval_shape(builder)


# --- models ------------------------------------------------------------------------------------


class Mlp(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, dtype=jnp.float32) -> None:
        self.fc1 = nnx.Linear(8, 16, param_dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(16, 4, use_bias=False, param_dtype=dtype, rngs=rngs)


class Stack(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.blocks = nnx.List([Mlp(rngs) for _ in range(5)])
        self.scale = nnx.Param(jnp.ones((3,), jnp.bfloat16))


class Tied(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.emb = nnx.Embed(32, 8, rngs=rngs)
        self.body = nnx.Linear(8, 8, rngs=rngs)
        self.head = self.emb  # the same Param, shared


class Stateful(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.lin = nnx.Linear(4, 4, rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)
        self.rngs = rngs
        self.step = nnx.Variable(0)  # a python int
        self.flag = nnx.Variable(jnp.array(True))


class Scanned(nnx.Module):
    """Layers created with `nnx.vmap` (a nested transform inside the abstract build)."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        @nnx.split_rngs(splits=3)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create(rngs: nnx.Rngs) -> Mlp:
            return Mlp(rngs)

        self.layers = create(rngs)


CASES = {
    "mlp": lambda: Mlp(nnx.Rngs(0)),
    "bf16-mlp": lambda: Mlp(nnx.Rngs(0), dtype=jnp.bfloat16),
    "list-stack": lambda: Stack(nnx.Rngs(1)),
    "tied-embedding": lambda: Tied(nnx.Rngs(2)),
    "dropout-batchnorm-int": lambda: Stateful(nnx.Rngs(0, dropout=1)),
    "vmap-scanned": lambda: Scanned(nnx.Rngs(3)),
    "sa3-like-20-layers": sa3_like_builder(20, d=8, ff=16, vocab=32),
}
for _name, _cls in vars(nnx_models).items():  # every shared model of the suite, f32 and bf16
    if isinstance(_cls, type) and issubclass(_cls, nnx.Module) and _cls.__module__ == "nnx_models":
        CASES[f"suite-{_name}"] = lambda c=_cls: c(nnx.Rngs(0, dropout=1))
        CASES[f"suite-{_name}-bf16"] = lambda c=_cls: c(nnx.Rngs(0), dtype=jnp.bfloat16)


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_eval_shape(name):
    fast, ref = build_both(CASES[name])
    assert_same_abstract(fast, ref)
    assert jax.core.Tracer.__dict__["sharding"] is ORIGINAL_SHARDING


def test_tied_embedding_stays_shared():
    fast, _ = build_both(CASES["tied-embedding"])
    assert fast.head is fast.emb


def test_sa3_like_counts():
    fast = abstract_build(sa3_like_builder(20, d=8, ff=16, vocab=32))
    assert len(nnx.to_flat_state(nnx.state(fast, nnx.Param))) == 685


# --- meshes and partitioning -------------------------------------------------------------------


class Partitioned(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, mesh=None) -> None:
        init = nnx.initializers.lecun_normal()
        self.w = nnx.Param(nnx.with_partitioning(init, ("data", None), mesh=mesh)(rngs(), (16, 4)))
        self.lin = nnx.Linear(
            4, 16, kernel_init=nnx.with_partitioning(init, (None, "data"), mesh=mesh), rngs=rngs
        )
        self.free = nnx.Linear(4, 4, rngs=rngs)


def _mesh(axis_type: AxisType) -> jax.sharding.Mesh:
    n = jax.device_count()
    return jax.make_mesh((n,), ("data",), axis_types=(axis_type,))


def _check_partitioned(model) -> None:
    for leaf, spec in (
        (model.w.get_value(), P("data", None)),
        (model.lin.kernel.get_value(), P(None, "data")),
    ):
        assert isinstance(leaf.sharding, NamedSharding)
        assert leaf.sharding.spec == spec
        assert leaf.sharding.mesh.axis_names == ("data",)


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("eager", [True, False], ids=["eager", "lazy"])
def test_partitioned_under_set_mesh(axis_type, eager):
    assert jax.device_count() == 8, "tests/conftest.py should simulate 8 CPU devices"
    with jax.set_mesh(_mesh(axis_type)), nnx.use_eager_sharding(eager):
        fast, ref = build_both(lambda: Partitioned(nnx.Rngs(0)))
    assert_same_abstract(fast, ref)
    if eager or axis_type is AxisType.Auto:
        _check_partitioned(fast)
    # else: flax keeps the replicated sharding the explicit-axes trace already gave (equal to ref)


def test_partitioned_with_mesh_metadata():
    mesh = _mesh(AxisType.Explicit)
    fast, ref = build_both(lambda: Partitioned(nnx.Rngs(0), mesh=mesh))
    assert_same_abstract(fast, ref)
    _check_partitioned(fast)


def test_same_error_as_eval_shape():
    """Partitioning without a mesh fails in flax; both paths raise the same error."""
    builder = lambda: Partitioned(nnx.Rngs(0))  # noqa: E731
    with pytest.raises(ValueError) as plain:
        nnx.eval_shape(builder)
    with pytest.raises(ValueError) as fast:
        abstract_build(builder)
    assert str(fast.value) == str(plain.value)
    assert jax.core.Tracer.__dict__["sharding"] is ORIGINAL_SHARDING


# --- the mechanism -----------------------------------------------------------------------------


@pytest.fixture
def origin_walks(monkeypatch):
    """Counts `DynamicJaxprTracer._origin_msg` calls (the O(trace) walk) per thread id."""
    counts: dict[int, int] = {}
    original = pe.DynamicJaxprTracer._origin_msg

    def counting(self):
        ident = threading.get_ident()
        counts[ident] = counts.get(ident, 0) + 1
        return original(self)

    monkeypatch.setattr(pe.DynamicJaxprTracer, "_origin_msg", counting)
    return counts


def test_fast_path_skips_the_origin_walk(origin_walks):
    builder = sa3_like_builder(3, d=8, ff=16, vocab=32)
    nnx.eval_shape(builder)
    # the quadratic cause: two O(trace) walks per parameter initialisation
    assert origin_walks.pop(threading.get_ident(), 0) >= 2 * (3 * 34 + 5)
    abstract_build(builder)
    assert origin_walks == {}


def test_builder_sees_the_same_sharding_error_and_runs_once():
    seen: list[str] = []

    def builder():
        seen.append("called")
        x = jnp.ones((3,)) + 1
        try:
            x.sharding  # noqa: B018
        except AttributeError as exc:
            seen.append(str(exc))
        return Mlp(nnx.Rngs(0))

    abstract_build(builder)
    nnx.eval_shape(builder)
    assert seen[0] == seen[2] == "called"
    assert seen[1] == seen[3] and "jax.typeof" in seen[1]


def test_other_threads_keep_the_original_behaviour(origin_walks):
    inside, release = threading.Event(), threading.Event()

    def blocking_builder():
        inside.set()
        assert release.wait(20)
        return Mlp(nnx.Rngs(0))

    worker = threading.Thread(target=abstract_build, args=(blocking_builder,))
    worker.start()
    try:
        assert inside.wait(20)
        assert isinstance(jax.core.Tracer.__dict__["sharding"], abstract._FastProperty)
        before = origin_walks.get(threading.get_ident(), 0)
        jax.eval_shape(lambda x: getattr(x + 1, "sharding", None), jnp.ones(2))
        assert origin_walks.get(threading.get_ident(), 0) == before + 1  # unpatched here
    finally:
        release.set()
        worker.join(20)
    assert jax.core.Tracer.__dict__["sharding"] is ORIGINAL_SHARDING


def test_nested_calls_restore_once():
    def outer():
        inner = abstract_build(lambda: Mlp(nnx.Rngs(1)))
        assert isinstance(jax.core.Tracer.__dict__["sharding"], abstract._FastProperty)
        return Tied(nnx.Rngs(0)), inner

    abstract_build(outer)
    assert jax.core.Tracer.__dict__["sharding"] is ORIGINAL_SHARDING
    assert abstract._installed == 0


# --- fallback ----------------------------------------------------------------------------------


@pytest.fixture
def fresh_check():
    abstract._check_equivalence.cache_clear()
    yield
    abstract._check_equivalence.cache_clear()


def _expect_fallback(match: str):
    with pytest.warns(AbstractBuildWarning, match=match) as record:
        fast = abstract_build(CASES["dropout-batchnorm-int"])
    assert_same_abstract(fast, nnx.eval_shape(CASES["dropout-batchnorm-int"]))
    (note,) = [w for w in record if w.category is AbstractBuildWarning]
    assert "\n" not in str(note.message) and "falling back" in str(note.message)
    assert jax.core.Tracer.__dict__["sharding"] is ORIGINAL_SHARDING


@pytest.mark.parametrize("fast", [True, False])
def test_the_build_runs_with_the_collector_paused_and_restored(monkeypatch, fast):
    """The builder runs with Python's cyclic collector off (its collections cost a model's
    build 15-20%); on after it, also when the builder raises; and a caller's `gc.disable()`
    stands."""
    import gc

    if not fast:
        monkeypatch.setattr(abstract, "_enter_fast_scope", lambda: 1 / 0)
    seen: list[bool] = []

    def builder():
        seen.append(gc.isenabled())
        return nnx.Linear(4, 2, rngs=nnx.Rngs(0))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AbstractBuildWarning)
        abstract_build(builder)
        assert seen == [False] and gc.isenabled()

        def broken():
            raise ValueError("no model")

        with pytest.raises(ValueError, match="no model"):
            abstract_build(broken)
        assert gc.isenabled()
        gc.disable()
        try:
            abstract_build(builder)
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_fallback_when_patch_cannot_install(monkeypatch):
    def boom():
        raise RuntimeError("cannot patch\nhere")

    monkeypatch.setattr(abstract, "_enter_fast_scope", boom)
    _expect_fallback("cannot patch here")


def test_fallback_when_probe_sees_a_difference(monkeypatch, fresh_check):
    monkeypatch.setattr(abstract._FastProperty, "_get", lambda self, tracer: None)
    _expect_fallback("different error")


def test_fallback_when_not_a_property(monkeypatch, fresh_check):
    monkeypatch.setattr(jax.core.Tracer, "sharding", None)
    assert abstract._check_equivalence() is not None
    abstract._check_equivalence.cache_clear()
    monkeypatch.undo()
    assert abstract._check_equivalence() is None


# --- models built from every preset ------------------------------------------------------------
SMALL_PRESETS = ["tiny-gpt2", "gpt2", "vit-base"]  # plain eval_shape is quick enough to compare
LARGE_PRESETS = ["sa3", "sa3-medium", "llama3-8b"]  # compared with the spec: eval_shape is too slow


@pytest.mark.parametrize("preset", SMALL_PRESETS)
def test_preset_models_equal_eval_shape(preset):
    import shapes

    fast, ref = build_both(shapes.model_builder(shapes.load_spec(preset)))
    assert_same_abstract(fast, ref)


@pytest.mark.parametrize("preset", LARGE_PRESETS)
def test_large_preset_models_match_their_spec(preset):
    import numpy as np

    import shapes
    from loader.format import DTYPES
    from loader.placement.leaves import iter_variables

    spec = shapes.load_spec(preset)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AbstractBuildWarning)
        model = abstract_build(shapes.model_builder(spec))
    got = {".".join(map(str, p)): v.get_value() for p, v in iter_variables(model)}
    assert set(got) == {t.name for t in spec.tensors} and len(got) == len(spec.tensors)
    for t in spec.tensors:
        leaf = got[t.name]
        assert isinstance(leaf, jax.ShapeDtypeStruct)
        assert tuple(leaf.shape) == t.shape, t.name
        want = DTYPES[t.dtype]
        if want.itemsize == 8 and not jax.config.jax_enable_x64:
            want = np.dtype(want.str[:-1] + "4")  # jax keeps 64-bit types only under x64
        assert np.dtype(leaf.dtype) == want, t.name
