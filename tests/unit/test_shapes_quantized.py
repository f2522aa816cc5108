"""Quantized presets: synthetic scales, exponents and shapes a dequantizer can use, a spec model
that loads them as stored, and the dequantized model's size."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from flax import nnx

import shapes
from shapes import content, quantized
from shapes.quantized import Role

TINY = ["tiny-llama-fp8", "tiny-llama-int4", "tiny-deepseek-fp8", "tiny-gpt-oss-mxfp4"]


def _roles(spec) -> dict[str, Role | None]:
    return {
        t.name: quantized.role(t.name, t.dtype, spec.by_name.__contains__) for t in spec.tensors
    }


@pytest.mark.parametrize("name", TINY)
def test_synthetic_quantized_tensors_are_plausible(tmp_path, name):
    spec = shapes.load_spec(name)
    path = shapes.synthesize(spec, tmp_path)
    roles = _roles(spec)
    assert (
        Role.FP8_WEIGHT in roles.values()
        or Role.PACKED in roles.values()
        or (Role.FP4_BLOCKS in roles.values())
    )
    for t in spec.tensors:
        values = shapes.tensor_values(spec, t.name)
        shapes.verify_tensor(path, t.name, values)  # the file holds exactly these bytes
        role = roles[t.name]
        if role in quantized.SCALE_EXPONENT:
            low = 2.0 ** quantized.SCALE_EXPONENT[role]
            as_float = values.astype(np.float32)
            assert (as_float >= low).all() and (as_float < 2 * low).all(), t.name
        elif role is Role.FP8_WEIGHT:
            as_float = values.astype(np.float32)
            assert np.isfinite(as_float).all() and np.abs(as_float).max() > 64, t.name
        elif role is Role.E8M0_SCALES:
            assert values.min() >= 118 and values.max() <= 130, t.name
        elif role is Role.WEIGHT_SHAPE:
            stem = t.name.removesuffix(".weight_shape")
            out, words = spec[f"{stem}.weight_packed"].shape
            assert values.tolist() == [out, words * 8]
            assert spec[f"{stem}.weight_scale"].shape == (out, words * 8 // 128)


def test_a_scale_cast_to_bfloat16_verifies_by_regenerating_its_role(tmp_path):
    spec = shapes.load_spec("tiny-llama-int4")
    path = shapes.synthesize(spec, tmp_path, seed=3)
    name = "model.layers.0.self_attn.q_proj.weight_scale"
    as_f32 = shapes.tensor_values(spec, name, seed=3).astype(np.float32)
    shapes.verify_tensor(path, name, as_f32)
    with pytest.raises(shapes.VerificationError):
        shapes.verify_tensor(path, name, -as_f32)


def test_synthesis_is_deterministic(tmp_path):
    a = shapes.synthesize("tiny-gpt-oss-mxfp4", tmp_path / "a", seed=5)
    b = shapes.synthesize("tiny-gpt-oss-mxfp4", tmp_path / "b", seed=5)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("name", TINY)
def test_spec_model_loads_quantized_leaves_as_stored(tmp_path, name, poison):
    from loader import load_model

    spec = shapes.load_spec(name)
    path = shapes.synthesize(spec, tmp_path, seed=2)
    builder = shapes.model_builder(spec, seed=1)

    def poisoned() -> nnx.Module:
        model = builder()
        poison(model)
        return model

    model, report = load_model(poisoned, path, strict=True)
    assert report.problems() == [] and len(report.loaded) == len(spec.tensors)
    flat = {
        ".".join(map(str, p)): np.asarray(v[...]) for p, v in nnx.to_flat_state(nnx.state(model))
    }
    dtypes = {flat[t.name].dtype for t in spec.tensors}
    assert dtypes & {np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.int32), np.dtype(np.uint8)}
    for t in spec.tensors:
        shapes.verify_tensor(path, t.name, flat[t.name])
    # a model the loader did not fill fails verification: its first float leaf, a scale where
    # the layout has float scales (gpt-oss's are U8 exponents: its router, then)
    roles = _roles(spec)
    floats = [t.name for t in spec.tensors if t.dtype in quantized.SCALE_DTYPES]
    first = min(floats, key=lambda n: roles[n] not in quantized.SCALE_EXPONENT)
    leaf = {".".join(map(str, p)): v for p, v in nnx.to_flat_state(nnx.state(poisoned()))}[first]
    with pytest.raises(shapes.VerificationError):
        shapes.verify_tensor(path, first, np.asarray(leaf[...]))


def test_dequantized_bytes_is_the_bfloat16_model():
    bf16 = shapes.load_spec("llama3-8b").total_bytes
    assert quantized.dequantized_bytes(shapes.load_spec("llama3-8b-fp8")) == bf16
    assert quantized.dequantized_bytes(shapes.load_spec("llama3-8b-int4")) == bf16
    assert quantized.dequantized_bytes(shapes.load_spec("llama3-8b")) is None
    fp8 = shapes.load_spec("tiny-llama-fp8")
    as_bf16 = content.stored_dtypes(fp8, "BF16")  # the override stores FP8 weights as floats
    assert quantized.dequantized_bytes(fp8, as_bf16) is None
    gpt_oss = shapes.load_spec("gpt-oss-20b-mxfp4")
    blocks = sum(t.nbytes for t in gpt_oss.tensors if t.name.endswith("_blocks"))
    scales = sum(t.nbytes for t in gpt_oss.tensors if t.name.endswith("_scales"))
    expected = gpt_oss.total_bytes - blocks - scales + blocks * 2 * 2  # two FP4 a byte, to bf16
    assert quantized.dequantized_bytes(gpt_oss) == expected


def test_shapes_show_says_the_dequantized_size(capsys):
    from shapes.cli import main

    assert main(["shapes", "show", "llama3-8b-fp8"]) == 0
    assert "dequantized   16,060,522,496 (15.0 GiB in bfloat16)" in capsys.readouterr().out
    assert main(["shapes", "show", "llama3-8b", "--json"]) == 0
    assert '"dequantized_bytes": null' in capsys.readouterr().out
