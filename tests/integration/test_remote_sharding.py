"""A remote load into a model sharded over several local devices requests each byte once.

A kernel split by columns over 4 devices gives every device a column block that spans all the
file's rows, and a replicated leaf gives every device the whole tensor: read device by device,
each byte would cross the link once per device. nginx serves the checkpoint; the load fills a
poisoned model (checked bit-exactly) and its `RemoteStats` must show no byte requested twice.
A process's share of a column-split kernel (`sharded` over several processes) is read by its read
plan: few requests, not one per row, and bytes within the plan's over-read bound.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec
from safetensors.numpy import save_file

import loader
from loader import Transpose
from loader.options import DEFAULT_MAX_OVER_READ, Remote, Sharing
from loader.remote.ranges import CHUNK_BYTES
from loader.sharded.remote import open_remote_layout
from loader.sharded.rule import shard_axis
from loader.sharded.slices import SliceReader
from tests.staged_reports import regions_received

pytestmark = pytest.mark.timeout(120)
DEVICES = 4


class ColumnSplit(nnx.Module):
    """Kernels split by columns over `data` (one wider than a small budget's scratch), a bias
    split with them, and a replicated layer."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        init = nnx.initializers.lecun_normal()
        cols = nnx.with_partitioning(init, (None, "data"))
        split = nnx.with_partitioning(nnx.initializers.normal(), ("data",))
        replicated = nnx.with_partitioning(init, (None, None))
        self.fc = nnx.Linear(256, 512, kernel_init=cols, bias_init=split, rngs=rngs)
        self.wide = nnx.Linear(8, 40000, kernel_init=cols, use_bias=False, rngs=rngs)
        self.out = nnx.Linear(
            512,
            48,
            kernel_init=replicated,
            bias_init=nnx.with_partitioning(nnx.initializers.normal(), (None,)),
            rngs=rngs,
        )


@pytest.fixture(scope="module")
def mesh() -> jax.sharding.Mesh:
    assert len(jax.devices()) >= DEVICES, "conftest sets 8 simulated CPU devices"
    return jax.make_mesh((DEVICES,), ("data",), devices=jax.devices()[:DEVICES])


@pytest.fixture(scope="module")
def served(mesh, tmp_path_factory):
    """nginx serving a checkpoint saved from the sharded model; (URL, the saved arrays)."""
    from bench.link.servers import start_nginx

    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    root = tmp_path_factory.mktemp("www")
    with jax.set_mesh(mesh):
        source = ColumnSplit(nnx.Rngs(0))
        loader.save_model(source, root / "model.safetensors")
    saved = {
        ".".join(map(str, path)): np.asarray(var.get_value())
        for path, var in nnx.iter_graph(source)
        if isinstance(var, nnx.Variable)
    }
    rng = np.random.default_rng(0)
    ported = {name: rng.standard_normal(shape, np.float32) for name, shape in HF_SHAPES.items()}
    save_file(ported, str(root / "ported.safetensors"))  # PyTorch's (out, in) weights
    with start_nginx(root) as server:
        yield f"{server.url}/model.safetensors", saved, ported


HF_SHAPES = {"down.weight": (512, 256), "shared.weight": (96, 128)}
TRANSPOSED = {
    "down.kernel": ("down.weight", Transpose((1, 0))),
    "shared.kernel": ("shared.weight", Transpose((1, 0))),
}


class RowSplit(nnx.Module):
    """A kernel split by rows (its input axis: a column block of the file's transposed weight,
    spanning every file row) and a replicated one, both ported with `Transpose`."""

    def __init__(self, rngs: nnx.Rngs) -> None:
        rows = nnx.with_partitioning(nnx.initializers.zeros_init(), ("data", None))
        replicated = nnx.with_partitioning(nnx.initializers.zeros_init(), (None, None))
        self.down = nnx.Linear(256, 512, kernel_init=rows, use_bias=False, rngs=rngs)
        self.shared = nnx.Linear(128, 96, kernel_init=replicated, use_bias=False, rngs=rngs)


@pytest.mark.parametrize(
    ("dtype", "budget", "staging"),
    [
        ("float32", None, False),
        ("bfloat16", None, False),
        ("float32", 256 << 10, False),
        ("bfloat16", 256 << 10, False),
        ("float32", None, True),
        ("bfloat16", 1 << 20, True),
    ],
    ids=["f32", "bf16-cast", "f32-small-budget", "bf16-small-budget", "ring", "ring-bf16-small"],
)
def test_columns_and_replicas_are_requested_once(served, mesh, poison, dtype, budget, staging):
    """Adopted buffers, and (`staging=True`) the staging ring a GPU or TPU load goes through."""
    url, saved, _ = served
    options = {"casts": "allow"} if dtype != "float32" else {}
    options |= {} if budget is None else {"budget": budget}
    options |= {"staging": True} if staging else {}
    with jax.set_mesh(mesh):
        target = ColumnSplit(nnx.Rngs(1))
        poison(target)
        if dtype != "float32":
            for _, var in nnx.iter_graph(target):
                if isinstance(var, nnx.Param):
                    var.set_value(var.get_value().astype(dtype))
        model, report = loader.load_model(
            target, url, strategy="pipelined", strict=True, concurrency=4, **options
        )
    kernel = model.fc.kernel.get_value()
    assert kernel.sharding.spec == PartitionSpec(None, "data")
    assert {s.data.shape for s in kernel.addressable_shards} == {(256, 512 // DEVICES)}
    assert model.out.kernel.get_value().sharding.is_fully_replicated
    for path, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Param):
            key = ".".join(map(str, path))
            want = saved[key].astype(dtype)
            np.testing.assert_array_equal(np.asarray(var.get_value()), want, err_msg=key)
    stats = report.remote
    assert stats is not None
    tensor_bytes = sum(a.nbytes for a in saved.values())
    assert stats.tensor_bytes == tensor_bytes
    # each tensor byte at most once; the header requests may hold tensor bytes too
    assert stats.bytes_received <= tensor_bytes + stats.header_bytes, stats
    assert stats.bytes_requested == stats.bytes_received
    if staging:  # every device got its regions, no more
        assert regions_received(report) == report.device_expected_bytes


@pytest.mark.parametrize("budget", [None, 128 << 10], ids=["default-budget", "small-budget"])
@pytest.mark.parametrize("staging", [False, True], ids=["adopt", "ring"])
def test_transposed_ports_are_requested_once(served, mesh, poison, staging, budget):
    """Declared transposes: read through strided views (adopt) or as blocks transposed on the
    device (ring)."""
    url, _, ported = served
    url = url.replace("model.safetensors", "ported.safetensors")
    options = {} if budget is None else {"budget": budget}
    with jax.set_mesh(mesh):
        target = RowSplit(nnx.Rngs(1))
        poison(target)
        model, report = loader.load_model(
            target, url, strict=True, key_map=TRANSPOSED, staging=staging, concurrency=4, **options
        )
    for name in ("down", "shared"):
        got = np.asarray(getattr(model, name).kernel.get_value())
        np.testing.assert_array_equal(got, ported[f"{name}.weight"].T, err_msg=name)
    stats = report.remote
    tensor_bytes = sum(a.nbytes for a in ported.values())
    assert stats.tensor_bytes == tensor_bytes
    assert stats.bytes_received <= tensor_bytes + stats.header_bytes, stats


def process_share(layout, processes: int, index: int) -> list[tuple[str, tuple]]:
    """The index range of each tensor that process `index` of `processes` (one device each)
    holds under the sharding rule: what the `sharded` strategy reads in that process."""
    reads = []
    for key, t in layout.tensors.items():
        region = [(0, d) for d in t.shape]
        axis = shard_axis(t.shape, processes)
        if axis is not None:
            width = t.shape[axis] // processes
            region[axis] = (index * width, (index + 1) * width)
        reads.append((key, tuple(region)))
    return reads


@pytest.mark.parametrize(
    ("processes", "max_over_read"), [(2, None), (4, 4.0)], ids=["2-default", "4-at-4x"]
)
def test_a_process_share_is_few_requests_within_the_over_read(served, processes, max_over_read):
    """Process 0's share of the checkpoint (`fc.kernel` split by columns: one 1 KiB run per row
    at 2 processes) read as the strategy reads it, plan first: requests within the issue's bound
    (share / 8 MiB + tensors + 10; a request per row without the plan), bytes within
    `max_over_read` x the share plus the headers, and every value the file's."""
    url, saved, _ = served
    bound = max_over_read or DEFAULT_MAX_OVER_READ
    sharing = Sharing(max_over_read=max_over_read)
    with open_remote_layout(url, Remote(concurrency=4), sharing=sharing) as source:
        reads = process_share(source.layout, processes, 0)
        with SliceReader(source.layout, source.open_file) as reader:
            reader.plan([reader.planned(key, region) for key, region in reads])
            for key, region in reads:
                want = saved[key][tuple(slice(a, b) for a, b in region)]
                got = reader.read_region(key, region)
                assert got.tobytes() == want.tobytes(), key
            share = reader.read_bytes
        stats = source.remote_stats()
    assert stats is not None and stats.retries == 0
    header_requests = stats.requests - stats.planned_requests  # the plan's, and no other
    assert 1 <= header_requests <= 2  # the first 64 KiB, and the rest of a longer header
    assert stats.planned_requests <= share / CHUNK_BYTES + len(reads) + 10, stats
    assert stats.bytes_received <= bound * share + stats.header_bytes, stats
    assert stats.needed_bytes == share and stats.over_read <= bound
    assert stats.bytes_requested == stats.bytes_received
    rows = saved["fc.kernel"].shape[0]
    assert stats.requests < rows  # read run by run, `fc.kernel` alone took one per row
    assert str(stats).count("\n") == 0 and "planned" in str(stats)


def test_auto_is_told_the_bytes_come_over_a_link_by_the_source_itself(
    served, mesh, monkeypatch, tmp_path
):
    """`share="auto"` weighs requests only over a link; the layout source says which it is
    (`LayoutSource.over_a_link`), not a guess from its statistics."""
    from loader.sharded import load as sharded_load

    told = []
    real = sharded_load.mode_of
    monkeypatch.setattr(
        sharded_load, "mode_of", lambda *a, **kw: told.append(kw["remote"]) or real(*a, **kw)
    )
    url, saved, _ = served
    with jax.set_mesh(mesh):
        local = tmp_path / "model.safetensors"
        loader.save_model(ColumnSplit(nnx.Rngs(0)), local)  # the served file, saved here too
        for path in (url, local):
            model, _ = loader.load_model(lambda: ColumnSplit(nnx.Rngs(1)), path, strategy="sharded")
            assert np.array_equal(np.asarray(model.fc.kernel.get_value()), saved["fc.kernel"])
    assert told == [True, False]
