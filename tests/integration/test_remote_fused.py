"""A remote load of leaves cut from one fused tensor requests each of its bytes once.

GPT-2's `c_attn` `(d, 3d)` holds q, k and v side by side; its port cuts each with a `Slice` of
the last axis (then a `Reshape`, or a `Transpose` for a `(out, in)` kernel). Each leaf's rows are
short runs of the stored rows, read through whole: leaf by leaf, each would fetch about the whole
tensor again over the link. nginx serves the checkpoint; the load fills a poisoned model (checked
bit-exactly) and its `RemoteStats` must show no byte received twice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

import loader
from loader import Reshape, Slice, Transpose

pytestmark = pytest.mark.timeout(120)
D, HEADS, DEVICES = 512, 4, 4  # c_attn (512, 1536) f32: 3 MiB, rows of 6 KiB
HEAD_DIM = D // HEADS


class Attention(nnx.Module):
    """q, k, v as GPT-2's port has them (`(d, heads, head_dim)` kernels, `(heads, head_dim)`
    biases), and as `(out, in)` kernels (a ported PyTorch `Linear` cut from the same tensor)."""

    def __init__(self, sharded: bool) -> None:
        spec = (None, "data", None) if sharded else (None, None, None)
        for name in "qkv":
            setattr(self, name, nnx.Param(jnp.zeros((D, HEADS, HEAD_DIM)), sharding=spec))
            setattr(self, f"{name}_bias", nnx.Param(jnp.zeros((HEADS, HEAD_DIM))))
            setattr(self, f"{name}_out_in", nnx.Param(jnp.zeros((D, D)), sharding=spec[:2]))


def key_map() -> dict[str, object]:
    out: dict[str, object] = {}
    for j, name in enumerate("qkv"):
        columns, rows = Slice(1, j * D, (j + 1) * D), Slice(0, j * D, (j + 1) * D)
        out[name] = ("c_attn.weight", (columns, Reshape((D, HEADS, HEAD_DIM))))
        out[f"{name}_bias"] = ("c_attn.bias", (rows, Reshape((HEADS, -1))))
        out[f"{name}_out_in"] = ("c_attn_t.weight", (Transpose((1, 0)), rows))
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """nginx serving the fused tensors; (URL, the saved arrays)."""
    from bench.link.servers import start_nginx

    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(0)
    saved = {
        "c_attn.weight": rng.standard_normal((D, 3 * D), np.float32),
        "c_attn.bias": rng.standard_normal((3 * D,), np.float32),
        "c_attn_t.weight": rng.standard_normal((D, 3 * D), np.float32),
    }
    save_file(saved, str(root / "model.safetensors"))
    with start_nginx(root) as server:
        yield f"{server.url}/model.safetensors", saved


def expected(saved: dict[str, np.ndarray], name: str) -> np.ndarray:
    """What the leaf `name` holds: its cut of the fused tensor (numpy's own slicing)."""
    leaf, _, kind = name.partition("_")
    j = "qkv".index(leaf)
    cols = slice(j * D, (j + 1) * D)
    if kind == "bias":
        return saved["c_attn.bias"][cols].reshape(HEADS, HEAD_DIM)
    if kind == "out_in":
        return saved["c_attn_t.weight"].T[cols]
    return saved["c_attn.weight"][:, cols].reshape(D, HEADS, HEAD_DIM)


@pytest.mark.parametrize(
    ("dtype", "budget", "staging", "sharded", "strict"),
    [
        ("float32", None, False, False, True),
        ("float32", 128 << 10, False, False, True),
        ("bfloat16", None, False, False, True),
        ("float32", None, False, True, True),
        ("float32", None, False, False, False),
        ("float32", None, True, False, True),
        ("bfloat16", 1 << 20, True, True, True),
    ],
    ids=["f32", "small-budget", "bf16-cast", "sharded", "speculated", "ring", "ring-bf16-sharded"],
)
def test_fused_tensor_is_requested_once(served, poison, dtype, budget, staging, sharded, strict):
    """q, k and v cut from one tensor (Slice + Reshape, Transpose + Slice): each byte once."""
    url, saved = served
    mesh = jax.make_mesh((DEVICES,), ("data",), devices=jax.devices()[:DEVICES])
    options = {"casts": "allow"} if dtype != "float32" else {}
    options |= {} if budget is None else {"budget": budget}

    def build() -> Attention:
        target = Attention(sharded)
        poison(target)
        for _, var in nnx.iter_graph(target):
            if isinstance(var, nnx.Param):
                var.set_value(var.get_value().astype(dtype))
        return target

    with jax.set_mesh(mesh):
        model, report = loader.load_model(
            build,
            url,
            strategy="pipelined",
            strict=strict,
            key_map=key_map(),
            staging=staging,
            concurrency=4,
            **options,
        )
    want_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    for name in key_map():
        got = np.asarray(getattr(model, name).get_value())
        want = expected(saved, name).astype(want_dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)
    stats = report.remote
    assert stats is not None
    tensor_bytes = sum(a.nbytes for a in saved.values())
    assert stats.tensor_bytes == tensor_bytes
    # each tensor byte at most once; the header requests may hold tensor bytes too
    assert stats.bytes_received <= tensor_bytes + stats.header_bytes, stats
