"""`cache_policy="auto"` (the default): drop behind the readers only what will not fit in the page
cache beside the model, and keep the rest (`loader.pipeline.cache_fit`).

The arithmetic runs on hand-made tensors and memory figures; the loads are checked bit-exact and
against the file's cached pages (`mincore`), so a policy that drops nothing, or everything, fails.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

import shapes
from loader import strategies
from loader.format.records import TensorInfo
from loader.pipeline import cache_fit, jobs
from loader.placement.leaves import iter_variables
from tests.unit.page_cache import cached, evicted

MIB = 1 << 20
N = 8  # tensors of 1 MiB each
SPEC = shapes.ShapeSpec(
    "cache-fit",
    "",
    ("model.safetensors",),
    tuple(shapes.TensorSpec(f"w{i}", "F32", (256, 1024), "model.safetensors") for i in range(N)),
)


def infos(sizes: list[int]) -> list[TensorInfo]:
    out, begin = [], 0
    for i, n in enumerate(sizes):
        out.append(TensorInfo(f"t{i}", "U8", (n,), begin, begin + n))
        begin += n
    return out


def test_auto_drops_the_first_tensors_until_the_rest_fits_beside_the_model():
    order = infos([100 * MIB] * 10)  # 1000 MiB to read
    reserve = cache_fit.MIN_RESERVE_BYTES
    # room for the model and the whole file: nothing dropped
    assert cache_fit.dropped_tensors("auto", order, 1000 * MIB, 2000 * MIB + reserve) == set()
    # room for the model and 350 MiB of the file: the first 650 MiB (7 tensors) are dropped
    dropped = cache_fit.dropped_tensors("auto", order, 1000 * MIB, 1350 * MIB + reserve)
    assert dropped == {f"t{i}" for i in range(7)}
    # no room beside the model: every tensor; no memory figure: none
    assert len(cache_fit.dropped_tensors("auto", order, 1000 * MIB, 900 * MIB)) == 10
    assert cache_fit.dropped_tensors("auto", order, 1000 * MIB, None) == set()


def test_keep_drops_nothing_and_dontneed_everything():
    order = infos([MIB] * 4)
    assert cache_fit.dropped_tensors("keep", order, 4 * MIB, 1) == set()
    everything = {"t0", "t1", "t2", "t3"}
    assert cache_fit.dropped_tensors("dontneed", order, 4 * MIB, 1 << 40) == everything


class _Leaf:
    shape, where = (8, 4), "w"

    def stored_shape_dtype(self):
        return (8, 4), np.dtype(np.float32)


class _Step:
    leaf, file_key = _Leaf(), "w"

    def __init__(self, sharding) -> None:
        self.sharding = sharding

    def placement(self):
        return self.sharding


class _OnAccelerator:
    """A sharding whose one device is an accelerator's (its memory is not the host's)."""

    def addressable_devices_indices_map(self, shape):
        device = type("Device", (), {"platform": "gpu"})()
        return {device: tuple(slice(None) for _ in shape)}


def test_the_model_counts_host_ram_per_device_and_none_on_an_accelerator():
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("x",))
    nbytes = 8 * 4 * 4
    assert jobs.host_bytes(_Step(NamedSharding(mesh, PartitionSpec("x")))) == nbytes
    replicated = jobs.host_bytes(_Step(NamedSharding(mesh, PartitionSpec())))
    assert replicated == len(devices) * nbytes and len(devices) > 1
    assert jobs.host_bytes(_Step(_OnAccelerator())) == 0
    assert jobs.host_bytes(_Step(None)) == nbytes  # a scalar leaf has no placement


def test_auto_keeps_a_file_cached_beside_a_model_that_lives_on_an_accelerator(monkeypatch):
    """Room for the file but not for a host copy of the model too: on the host, the file is
    dropped; on an accelerator, whose leaves take no host RAM, it all stays cached."""
    room = 128 + cache_fit.MIN_RESERVE_BYTES + 64
    monkeypatch.setattr(cache_fit, "available_bytes", lambda: room)
    on_host = _Step(SingleDeviceSharding(jax.devices()[0]))
    order = [TensorInfo("w", "F32", (8, 4), 0, 128)]
    assert cache_fit.drops("auto", order, jobs.host_bytes(on_host)) == {"w"}
    assert cache_fit.drops("auto", order, jobs.host_bytes(_Step(_OnAccelerator()))) == set()


def test_the_read_ahead_hint_counts_a_host_copy_of_the_model_only_on_the_cpu_backend(monkeypatch):
    file_bytes = 100 * MIB
    monkeypatch.setattr(cache_fit, "available_bytes", lambda: 150 * MIB)  # the file, not twice
    monkeypatch.setattr(cache_fit, "backend_adopts_host_buffers", lambda: True)
    assert not cache_fit.prefetch("auto", file_bytes)
    monkeypatch.setattr(cache_fit, "backend_adopts_host_buffers", lambda: False)
    assert cache_fit.prefetch("auto", file_bytes)
    assert cache_fit.prefetch("keep", file_bytes) and not cache_fit.prefetch("dontneed", file_bytes)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = shapes.synthesize(SPEC, tmp_path_factory.mktemp("cache-fit"))
    return path / "model.safetensors" if path.is_dir() else path


def load_warm(ckpt, **kw):
    """Read the file into the page cache, then load it (nothing read speculatively: strict)."""
    ckpt.read_bytes()
    model, _ = strategies.get("pipelined").load(
        shapes.model_builder(SPEC), ckpt, strict=True, threads=2, **kw
    )
    for path, var in iter_variables(model):
        shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
    return model


def test_auto_keeps_the_tail_cached_where_file_and_model_do_not_fit(ckpt, monkeypatch):
    if not evicted(ckpt):
        pytest.skip("this filesystem keeps the file cached when evicted")
    file_bytes = ckpt.stat().st_size
    # room for the model and half the file
    room = N * MIB + cache_fit.MIN_RESERVE_BYTES + file_bytes // 2
    monkeypatch.setattr(cache_fit, "available_bytes", lambda: room)
    load_warm(ckpt)
    assert 0.3 < cached(ckpt) < 0.7  # the head dropped behind the readers, the tail kept
    monkeypatch.setattr(cache_fit, "available_bytes", lambda: 1 << 40)
    load_warm(ckpt)
    assert cached(ckpt) > 0.95  # it all fits: nothing dropped, as with "keep"
    load_warm(ckpt, cache_policy="dontneed")
    assert cached(ckpt) < 0.05


def test_read_ahead_hints_each_file_only_where_prefetch_says_so(monkeypatch):
    hinted = []
    monkeypatch.setattr(cache_fit.os, "posix_fadvise", lambda fd, *a: hinted.append((fd, *a)))
    cache_fit.read_ahead([3, 4], "dontneed", MIB)
    assert hinted == []
    cache_fit.read_ahead([3, 4], "keep", MIB)
    assert hinted == [(fd, 0, 0, cache_fit.os.POSIX_FADV_WILLNEED) for fd in (3, 4)]
