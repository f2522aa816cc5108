"""The way back: `save_model(model, path, key_map=..., reference=...)` writes the layout the load
read, by inverting every declared transform (Transpose, Reshape, Slices put back into one fused
tensor, Stacks back into per-layer tensors), bit-exactly; the reference's ignored tensors are
copied; and anything that cannot go back (an opaque callable, a gap, a key the reference lacks,
a Stack of the wrong count) is refused before a byte is written.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import loader
from loader import Reshape, Slice, Stack, Transpose
from loader.transforms import Chain, Part, TransformError
from tests.unit.test_transforms import FILE, KEY_MAP, poisoned

RNG = np.random.default_rng(2)
EXTRA = {  # what a real file holds beside the port's tensors: a buffer and a head
    "embeddings.position_ids": np.arange(12, dtype=np.int64)[None],
    "pooler.weight": RNG.standard_normal((4, 4)).astype(np.float16),
}
IGNORED = ["*.position_ids", "pooler.*"]


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source.safetensors"
    save_file(FILE | EXTRA, str(path), metadata={"format": "pt"})
    return path


def _loaded(path):
    """The port loaded strictly, its extras declared (what save_model gets back)."""
    model, report = loader.load_model(
        poisoned, path, key_map=KEY_MAP, ignore_unexpected=IGNORED, strict=True
    )
    assert sorted(report.loaded) == sorted(KEY_MAP) and sorted(report.ignored) == sorted(EXTRA)
    return model


def _bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).view(np.uint8).tobytes()


def _add_one(model) -> None:
    for _, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Variable):
            var.set_value(var.get_value() + 1)


def test_each_declared_transform_has_an_exact_inverse():
    x = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    for chain in (
        Chain((Transpose((2, 0, 1)),)),
        Chain((Reshape((6, 8)), Transpose((1, 0)))),
        Chain((Slice(2, 2, 6), Reshape((2, 3, 2, 2)))),
        Chain((Transpose((0, 2, 1)), Slice(1, 4, 8), Transpose((2, 1, 0)))),
    ):
        part = chain.invert(Part.whole(chain(x)), x.shape)
        assert part.shape == x.shape, chain
        np.testing.assert_array_equal(part.values, x[part.region], err_msg=str(chain))
    with pytest.raises(TransformError, match="after a Slice cannot be inverted"):
        Chain((Reshape((6, 8)), Slice(0, 0, 3))).invert(Part.of_shape((3, 8)), x.shape)


def test_the_source_layout_comes_back_bit_equal_and_from_the_model(source, tmp_path):
    model = _loaded(source)
    out = tmp_path / "back.safetensors"
    kw = {"key_map": KEY_MAP, "reference": source, "ignore_unexpected": IGNORED}
    loader.save_model(model, out, **kw)
    saved, src = load_file(out), load_file(source)
    assert sorted(saved) == sorted(src)
    assert all(_bits(saved[k]) == _bits(src[k]) and saved[k].dtype == src[k].dtype for k in src)
    with safe_open(str(out), "np") as f:
        assert f.metadata() == {"format": "pt"}  # the source's, not loadbench's own

    _add_one(model)  # a fine-tuned port: the fused and the transposed tensors come from it
    loader.save_model(model, out, **kw)
    saved = load_file(out)
    for key in FILE:
        np.testing.assert_array_equal(saved[key], FILE[key] + 1, err_msg=key)
    for key in EXTRA:  # the ignored tensors are the reference's, byte for byte
        assert _bits(saved[key]) == _bits(EXTRA[key])


def test_transposes_alone_need_no_reference(source, tmp_path):
    key_map = {k: v for k, v in KEY_MAP.items() if k in ("fc.kernel", "conv.kernel")}

    class Two(nnx.Module):
        def __init__(self) -> None:
            self.fc = nnx.Module()
            self.fc.kernel = nnx.Param(jnp.full((40, 24), 7.0))
            self.conv = nnx.Module()
            self.conv.kernel = nnx.Param(jnp.full((4, 4, 3, 8), 7.0))

    model, _ = loader.load_model(Two(), source, key_map=key_map, strict=True, ignore_unexpected="*")
    out = tmp_path / "back.safetensors"
    loader.save_model(model, out, key_map=key_map)
    saved = load_file(out)
    assert sorted(saved) == ["conv.weight", "fc.weight"]
    assert all(_bits(saved[k]) == _bits(FILE[k]) for k in saved)


def _refused(model, out, match, **kw):
    before = sorted(os.listdir(out.parent))
    with pytest.raises(loader.CheckpointError, match=match) as err:
        loader.save_model(model, out, **kw)
    assert "\n" not in str(err.value)
    assert sorted(os.listdir(out.parent)) == before  # nothing written, no temporary left
    return str(err.value)


def test_an_opaque_callable_is_refused_before_anything_is_written(source, tmp_path):
    model = _loaded(source)
    out = tmp_path / "out" / "back.safetensors"
    out.parent.mkdir()
    out.write_bytes(b"the previous file")
    key_map = dict(KEY_MAP, **{"fc.kernel": ("fc.weight", lambda w: w.T)})
    msg = _refused(model, out, "opaque transform", key_map=key_map, reference=source)
    assert "'fc.kernel'" in msg and "loader.Transpose" in msg
    assert out.read_bytes() == b"the previous file"


def test_a_reshape_or_slice_without_the_reference_is_refused(source, tmp_path):
    out = tmp_path / "out" / "back.safetensors"
    out.parent.mkdir()
    msg = _refused(_loaded(source), out, "pass reference=", key_map=KEY_MAP)
    assert "file key" in msg


def test_slices_that_overlap_or_leave_a_gap_are_refused(source, tmp_path):
    model = _loaded(source)
    out = tmp_path / "out" / "back.safetensors"
    out.parent.mkdir()
    kw = {"reference": source, "ignore_unexpected": IGNORED}
    overlap = dict(KEY_MAP, **{"k.kernel": ("c_attn.weight", Slice(1, 0, 16))})
    msg = _refused(model, out, "overlap", key_map=overlap, **kw)
    assert "'c_attn.weight'" in msg and "k.kernel" in msg
    gap = "cover (512 of 768|32 of 48) values"  # v's third of c_attn is not written
    _refused(model, out, gap, key_map=KEY_MAP, ignore_missing=["v.*"], **kw)


def test_the_reference_must_be_covered_or_declared(source, tmp_path):
    model = _loaded(source)
    out = tmp_path / "out" / "back.safetensors"
    out.parent.mkdir()
    msg = _refused(model, out, "neither written", key_map=KEY_MAP, reference=source)
    assert "'embeddings.position_ids'" in msg and "ignore_unexpected=" in msg
    typo = dict(KEY_MAP, **{"fc.kernel": ("fc.weights", Transpose((1, 0)))})
    kw = {"reference": source, "ignore_unexpected": IGNORED}
    msg = _refused(model, out, "not in the reference", key_map=typo, **kw)
    assert "'fc.weights'" in msg and "fc.kernel" in msg


def test_a_sharded_model_is_gathered_one_tensor_at_a_time(source, tmp_path):
    """Leaves on several (simulated) devices go back like the others."""
    devices = jax.devices()
    if len(devices) < 2:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=2 or more")
    mesh = jax.sharding.Mesh(np.array(devices[:2]), ("x",))
    model = _loaded(source)
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    model.fc.kernel.set_value(jax.device_put(model.fc.kernel.get_value(), rows))
    out = tmp_path / "back.safetensors"
    loader.save_model(model, out, key_map=KEY_MAP, reference=source, ignore_unexpected=IGNORED)
    assert _bits(load_file(out)["fc.weight"]) == _bits(FILE["fc.weight"])


LAYERS = 3
PER_LAYER = {  # one tensor per layer, as a Hugging Face file holds them
    **{f"h.{i}.fc.weight": RNG.standard_normal((24, 40), np.float32) for i in range(LAYERS)},
    **{f"h.{i}.c_attn.weight": RNG.standard_normal((16, 48), np.float32) for i in range(LAYERS)},
}


def _stacked_key_map(layers: int = LAYERS) -> dict[str, object]:
    """Scanned leaves: fc stacked on axis 0 (each layer transposed); q, k, v on axis 1, each
    layer a third of its fused c_attn."""
    fc = [f"h.{i}.fc.weight" for i in range(layers)]
    c_attn = [f"h.{i}.c_attn.weight" for i in range(layers)]
    key_map: dict[str, object] = {"fc.kernel": (Stack(fc, axis=0), Transpose((1, 0)))}
    for j, name in enumerate("qkv"):
        key_map[f"{name}.kernel"] = Stack(c_attn, axis=1, transform=Slice(1, 16 * j, 16 * j + 16))
    return key_map


class Scanned(nnx.Module):
    def __init__(self, layers: int = LAYERS) -> None:
        self.fc = nnx.Module()
        self.fc.kernel = nnx.Param(jnp.full((layers, 40, 24), 7.0))
        for name in "qkv":
            setattr(self, name, nnx.Module())
            getattr(self, name).kernel = nnx.Param(jnp.full((16, layers, 16), 7.0))


def test_stacked_leaves_go_back_to_their_per_layer_tensors(tmp_path):
    source = tmp_path / "layers.safetensors"
    save_file(PER_LAYER, str(source))
    model, report = loader.load_model(Scanned(), source, key_map=_stacked_key_map(), strict=True)
    assert report.ok, report.problems()
    out = tmp_path / "back.safetensors"
    loader.save_model(model, out, key_map=_stacked_key_map(), reference=source)
    saved = load_file(out)
    assert sorted(saved) == sorted(PER_LAYER)
    assert all(_bits(saved[k]) == _bits(PER_LAYER[k]) for k in PER_LAYER)
    _add_one(model)
    loader.save_model(model, out, key_map=_stacked_key_map(), reference=source)
    saved = load_file(out)
    for key in PER_LAYER:
        np.testing.assert_array_equal(saved[key], PER_LAYER[key] + 1, err_msg=key)


def test_a_stack_whose_count_is_not_the_leafs_is_refused(tmp_path):
    out = tmp_path / "out" / "back.safetensors"
    out.parent.mkdir()
    msg = _refused(
        Scanned(layers=4), out, "holds 4 layers along axis 0, not 3", key_map=_stacked_key_map()
    )
    assert "fc.kernel" in msg
