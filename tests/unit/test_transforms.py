"""Declared key_map transforms (`loader.Transpose`, `Reshape`, `Slice`, composed): every model
strategy loads them bit-exactly against numpy, into a poisoned model; shapes are checked from
headers before any read; two leaves on one tensor need a Slice; callables are reported as staged.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from flax import nnx
from numpy.lib.stride_tricks import as_strided
from safetensors.numpy import save_file

import loader
from loader import Reshape, Slice, Transpose, strategies
from loader.pipeline.views import fill_view
from loader.transforms import Chain, TransformError
from loader.vocabulary import STRATEGY, URL
from tests.conftest import poison_model

# (a strategy that loads a URL only, `download`, is tested against real servers: test_remote.py)
MODEL_STRATEGIES = [
    n for n, e in strategies.catalog().items() if e.kind == STRATEGY and e.checkpoint != URL
]
RNG = np.random.default_rng(0)

#: file tensors (HF-like layouts)
FILE = {
    "fc.weight": RNG.standard_normal((24, 40), np.float32),  # torch Linear (out, in)
    "c_attn.weight": RNG.standard_normal((16, 48), np.float32),  # GPT-2 Conv1D (in, 3 * out)
    "c_attn.bias": RNG.standard_normal((48,), np.float32),
    "conv.weight": RNG.standard_normal((8, 3, 4, 4), np.float32),  # OIHW
    "q_proj.weight": RNG.standard_normal((32, 16), np.float32),  # (heads * head_dim, in)
    "odd.weight": RNG.standard_normal((6, 10), np.float32),
}
#: model key -> (file key, transform): one of each, and compositions
KEY_MAP = {
    "fc.kernel": ("fc.weight", Transpose((1, 0))),
    "q.kernel": ("c_attn.weight", Slice(1, 0, 16)),
    "k.kernel": ("c_attn.weight", Slice(-1, 16, 32)),
    "v.kernel": ("c_attn.weight", (Slice(1, 32, 48), Reshape((16, 4, 4)))),
    "q.bias": ("c_attn.bias", Slice(0, 0, 16)),
    "k.bias": ("c_attn.bias", Slice(0, 16, 32)),
    "v.bias": ("c_attn.bias", (Slice(0, 32, 48), Reshape((4, -1)))),
    "conv.kernel": ("conv.weight", Transpose((2, 3, 1, 0))),
    "heads.kernel": ("q_proj.weight", (Transpose((1, 0)), Reshape((16, 4, 8)))),
    "odd.kernel": ("odd.weight", (Transpose((1, 0)), Reshape((60,)))),  # no view: staged
}


class Ported(nnx.Module):
    def __init__(self) -> None:
        for key, (file_key, t) in KEY_MAP.items():
            shape = Chain(t if isinstance(t, tuple) else (t,)).out_shape(FILE[file_key].shape)
            owner, name = key.split(".")
            if not hasattr(self, owner):
                setattr(self, owner, nnx.Module())
            setattr(getattr(self, owner), name, nnx.Param(np.zeros(shape, np.float32)))


def expected(key: str) -> np.ndarray:
    file_key, t = KEY_MAP[key]
    return Chain(t if isinstance(t, tuple) else (t,))(FILE[file_key])


def poisoned() -> Ported:
    model = Ported()
    poison_model(model)
    return model


@pytest.fixture(scope="module")
def ported_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ported") / "model.safetensors"
    save_file(FILE, str(path))
    return path


@pytest.mark.parametrize("name", MODEL_STRATEGIES)
def test_every_strategy_applies_declared_transforms_bit_exactly(ported_file, tmp_path, name):
    info = strategies.get(name)
    path = ported_file
    prepare = info.prepare()
    if prepare is not None and info.checkpoint != "file":
        path = prepare(ported_file, tmp_path / info.checkpoint, None)
    model, report = info.load(poisoned, path, strict=True, key_map=KEY_MAP)
    assert report.ok, report.problems()
    for key in KEY_MAP:
        owner, leaf = key.split(".")
        got = np.asarray(getattr(getattr(model, owner), leaf).get_value())
        np.testing.assert_array_equal(got, expected(key), err_msg=f"{name}: {key}")
    assert sorted(report.transformed) == sorted(KEY_MAP) and report.staged == []


def test_pipelined_reads_views_in_its_threads_and_stages_only_non_views(ported_file, monkeypatch):
    """A view is never staged whole nor applied on the main thread (apply_transform)."""
    import loader.pipeline.jobs as jobs

    applied: list[str] = []
    real = jobs.apply_transform
    monkeypatch.setattr(
        jobs, "apply_transform", lambda s, h, p: (applied.append(s.leaf.key), real(s, h, p))[1]
    )
    model, report = loader.load_model(poisoned, ported_file, strict=True, key_map=KEY_MAP)
    assert report.ok and applied == ["odd.kernel"]
    np.testing.assert_array_equal(
        np.asarray(model.heads.kernel.get_value()), expected("heads.kernel")
    )


def test_wrong_declared_shape_fails_before_any_read_naming_everything(ported_file, monkeypatch):
    import loader.pipeline.sources.local as local

    def no_read(*_a, **_k):
        raise AssertionError("read before the plan check")

    monkeypatch.setattr(local.FileBytes, "read", no_read)
    bad = dict(KEY_MAP, **{"fc.kernel": ("fc.weight", Transpose((0, 1)))})
    with pytest.raises(loader.MismatchError) as err:
        loader.load_model(poisoned, ported_file, strict=True, key_map=bad)
    msg = str(err.value)
    assert "fc.kernel: model expects shape (40, 24), file key 'fc.weight' has (24, 40)" in msg
    assert "Transpose((0, 1)) gives (24, 40)" in msg
    bad = dict(KEY_MAP, **{"q.kernel": ("c_attn.weight", Slice(1, 40, 56))})
    with pytest.raises(loader.MismatchError, match=r"Slice\(1, 40, 56\) gives an error"):
        loader.load_model(poisoned, ported_file, strict=True, key_map=bad)


def test_two_leaves_on_one_tensor_without_a_slice_fail_in_one_line(ported_file):
    bad = dict(KEY_MAP, **{"k.kernel": ("c_attn.weight", Reshape((16, 48)))})
    with pytest.raises(loader.CheckpointError) as err:
        loader.load_model(poisoned, ported_file, key_map=bad)
    msg = str(err.value)
    assert "'k.kernel'" in msg and "'q.kernel'" in msg and "c_attn.weight" in msg
    assert "\n" not in msg


def test_a_callable_still_works_and_is_reported_staged(ported_file):
    cmap = dict(KEY_MAP, **{"fc.kernel": ("fc.weight", lambda w: np.ascontiguousarray(w.T))})
    model, report = loader.load_model(poisoned, ported_file, strict=True, key_map=cmap)
    assert report.staged == ["fc.kernel"]
    np.testing.assert_array_equal(np.asarray(model.fc.kernel.get_value()), FILE["fc.weight"].T)


def test_a_sequence_must_hold_declared_transforms_only(ported_file):
    bad = dict(KEY_MAP, **{"fc.kernel": ("fc.weight", (Transpose((1, 0)), np.transpose))})
    with pytest.raises(loader.CheckpointError, match="key_map entry for fc.kernel"):
        loader.load_model(poisoned, ported_file, key_map=bad)


class _Bytes:
    def __init__(self, a: np.ndarray) -> None:
        self.raw = a.reshape(-1).view(np.uint8)

    def read(self, offset: int, out: np.ndarray) -> None:
        out[...] = self.raw[offset : offset + out.nbytes]


@pytest.mark.parametrize("tile", [2, 128])
@pytest.mark.parametrize("scratch_bytes", [64, 1 << 12, 1 << 20])
def test_fill_view_matches_numpy_for_random_compositions(scratch_bytes, tile, monkeypatch):
    """Random chains on random shapes, tiny to roomy scratch, tiled copies, cast or not."""
    import loader.pipeline.views as views

    monkeypatch.setattr(views, "TILE", tile)
    rng = random.Random(1)
    for _ in range(300):
        shape = tuple(rng.choice([1, 2, 3, 5, 8]) for _ in range(rng.randint(1, 4)))
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        chain = _random_chain(rng, shape)
        try:
            want = chain(x)
        except TransformError:
            continue
        view = chain.view(shape)
        if view is None:
            continue
        for dtype in (np.float32, np.float64):
            dst = np.full(view.shape, -1, dtype)
            fill_view(_Bytes(x), x.dtype, view, dst, np.empty(scratch_bytes, np.uint8))
            np.testing.assert_array_equal(dst, want.astype(dtype), err_msg=str(chain))


def _random_chain(rng: random.Random, shape: tuple[int, ...]) -> Chain:
    steps = []
    for _ in range(rng.randint(1, 3)):
        n = len(shape)
        pick = rng.random()
        if pick < 0.4:
            t = Transpose(tuple(rng.sample(range(n), n)))
        elif pick < 0.7:
            a = rng.randrange(n)
            b = rng.randint(0, shape[a])
            t = Slice(a, b, rng.randint(b, shape[a]))
        else:
            size = int(np.prod(shape))
            t = (
                Reshape((rng.choice([d for d in range(1, size + 1) if size % d == 0]), -1))
                if size
                else Reshape((0,))
            )
        steps.append(t)
        shape = t.out_shape(shape)
    return Chain(tuple(steps))


def test_views_agree_with_numpy_views():
    """`Chain.view` is the strided view numpy makes, and None exactly where numpy copies."""
    rng = random.Random(2)
    for _ in range(500):
        shape = tuple(rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 4)))
        x = np.arange(int(np.prod(shape))).reshape(shape)
        chain = _random_chain(rng, shape)
        want = chain(x)
        view = chain.view(shape)
        if want.size == 0:
            continue
        assert (view is not None) == np.shares_memory(want, x), chain
        if view is not None:
            got = as_strided(
                x.reshape(-1)[view.offset :], view.shape, [s * 8 for s in view.strides]
            )
            np.testing.assert_array_equal(got, want)


def test_pipelined_cuts_view_parts_along_the_source_rows(ported_file, monkeypatch):
    """Tiny parts and scratch: every view is filled in many chunks, by several threads."""
    import loader.pipeline.jobs as jobs
    import loader.pipeline.sizing as sizing

    monkeypatch.setattr(jobs, "PART_BYTES", 96)
    monkeypatch.setattr(sizing, "MAX_SCRATCH_BYTES", 128)
    parts: list[tuple[str, int, int]] = []
    real = jobs.AdoptJob.parts

    def spy(job):
        out = real(job)
        parts.extend((job.step.leaf.key, p.axis, p.rows.stop - p.rows.start) for p in out)
        return out

    monkeypatch.setattr(jobs.AdoptJob, "parts", spy)
    model, report = loader.load_model(poisoned, ported_file, strict=True, key_map=KEY_MAP)
    assert report.ok
    for key in KEY_MAP:
        owner, leaf = key.split(".")
        got = np.asarray(getattr(getattr(model, owner), leaf).get_value())
        np.testing.assert_array_equal(got, expected(key), err_msg=key)
    fc = [p for p in parts if p[0] == "fc.kernel"]
    assert len(fc) > 1 and {axis for _, axis, _ in fc} == {1}  # columns of the kernel


class ShardedPort(nnx.Module):
    """Kernels sharded over 8 devices along either axis, filled through transforms."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        rows = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("data", None))
        cols = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "data"))
        self.fc = nnx.Linear(40, 24, kernel_init=rows, rngs=rngs)  # (40, 24) from (24, 40)
        self.q = nnx.Linear(16, 16, kernel_init=cols, use_bias=False, rngs=rngs)  # a Slice


@pytest.mark.parametrize("name", ["pipelined", "hostcast", "sharded"])
def test_sharded_leaves_fill_each_device_region_through_the_view(ported_file, name):
    import jax

    key_map = {
        "fc.kernel": KEY_MAP["fc.kernel"],
        "fc.bias": ("c_attn.bias", Slice(0, 0, 24)),
        "q.kernel": ("c_attn.weight", Slice(1, 16, 32)),
    }
    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
        target = ShardedPort(nnx.Rngs(0))
        poison_model(target)
        with warnings.catch_warnings():  # the file's other tensors are unexpected here
            warnings.simplefilter("ignore", loader.LoadWarning)
            model, _ = strategies.get(name).load(target, ported_file, key_map=key_map)
    kernel = model.fc.kernel.get_value()
    assert len(kernel.sharding.device_set) == 8 and {
        s.data.shape for s in kernel.addressable_shards
    } == {(5, 24)}
    np.testing.assert_array_equal(np.asarray(kernel), FILE["fc.weight"].T)
    np.testing.assert_array_equal(
        np.asarray(model.q.kernel.get_value()), FILE["c_attn.weight"][:, 16:32]
    )
    np.testing.assert_array_equal(np.asarray(model.fc.bias.get_value()), FILE["c_attn.bias"][:24])


def test_a_staged_pipelined_load_reads_views_too(ported_file):
    """`staging=True` (the path on accelerators): a transformed leaf is still read via its view."""
    model, report = loader.load_model(
        poisoned, ported_file, strict=True, key_map=KEY_MAP, staging=True
    )
    assert report.ok
    for key in KEY_MAP:
        owner, leaf = key.split(".")
        got = np.asarray(getattr(getattr(model, owner), leaf).get_value())
        np.testing.assert_array_equal(got, expected(key), err_msg=key)
