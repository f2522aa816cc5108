"""Synthetic checkpoints: exact headers, deterministic content, digests, verification, inspect."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

import shapes
from loader.format import read_header
from shapes.cli import main
from shapes.content import PERIOD_BYTES
from shapes.spec import ShapeSpec, TensorSpec

F = "model.safetensors"


def _spec(tensors, files=(F,)) -> ShapeSpec:
    return ShapeSpec("test/mixed", None, tuple(files), tuple(TensorSpec(*t) for t in tensors))


MIXED = [
    ("w.f32", "F32", (3, 5), F),
    ("w.f32b", "F32", (3, 5), F),
    ("w.f16", "F16", (7,), F),
    ("w.bf16", "BF16", (2, 2, 2), F),
    ("i.i64", "I64", (4,), F),
    ("m.bool", "BOOL", (9,), F),
    ("z.empty", "F32", (1, 0, 1), F),
    ("s.scalar", "F32", (), F),
    (
        "big",
        "F16",
        (PERIOD_BYTES + 6,),
        F,
    ),  # longer than one period: the block repeats, then a tail
]


def _file_values(path, name):
    header = read_header(path)
    info = header.tensors[name]
    raw = np.fromfile(path, dtype=np.uint8, count=info.nbytes, offset=header.file_offset(name))
    return raw.view(info.np_dtype).reshape(info.shape)


def test_tiny_gpt2_header_equals_spec_and_published_size(tmp_path):
    spec = shapes.load_spec("tiny-gpt2")
    path = shapes.synthesize(spec, tmp_path)
    assert path == tmp_path / "model.safetensors"
    header = read_header(path)
    assert [(t.name, t.dtype, t.shape) for t in header.tensors.values()] == [
        (t.name, t.dtype, t.shape) for t in spec.tensors
    ]
    assert header.metadata == {"format": "pt"}
    assert os.path.getsize(path) == 453_864  # the real file's size, byte for byte


def test_every_dtype_zero_size_and_values(tmp_path):
    spec = _spec(MIXED)
    path = shapes.synthesize(spec, tmp_path, seed=3)
    for t in spec.tensors:
        got = _file_values(path, t.name)
        want = shapes.tensor_values(spec, t.name, seed=3)
        assert want.shape == t.shape and got.tobytes() == want.tobytes(), t.name
        if t.dtype in ("F32", "F16", "BF16") and t.numel:
            as_f32 = want.astype(np.float32)
            assert (
                np.isfinite(as_f32).all()
                and (np.abs(as_f32) < 1).all()
                and (np.abs(as_f32) >= 0.5).all()
            )
        shapes.verify_tensor(path, t.name, got)
    assert set(np.unique(_file_values(path, "m.bool"))) <= {False, True}
    assert not np.array_equal(_file_values(path, "w.f32"), _file_values(path, "w.f32b"))


def test_deterministic_by_seed(tmp_path):
    spec = _spec(MIXED[:2])
    a = shapes.synthesize(spec, tmp_path / "a", seed=1).read_bytes()
    b = shapes.synthesize(spec, tmp_path / "b", seed=1).read_bytes()
    c = shapes.synthesize(spec, tmp_path / "c", seed=2).read_bytes()
    assert a == b and a != c


def test_flipped_byte_and_wrong_shape_fail_verification(tmp_path):
    path = shapes.synthesize("tiny-gpt2", tmp_path)
    good = _file_values(path, "transformer.h.0.attn.c_attn.weight").copy()
    shapes.verify_tensor(path, "transformer.h.0.attn.c_attn.weight", good)
    bad = good.copy()
    bad.reshape(-1).view(np.uint8)[17] ^= 1
    with pytest.raises(shapes.VerificationError, match="1 of .* bytes differ"):
        shapes.verify_tensor(path, "transformer.h.0.attn.c_attn.weight", bad)
    with pytest.raises(shapes.VerificationError, match="shape"):
        shapes.verify_tensor(path, "transformer.h.0.attn.c_attn.weight", good.T)
    with pytest.raises(shapes.VerificationError, match="differs"):  # another tensor's values
        shapes.verify_tensor(path, "transformer.h.1.attn.c_attn.weight", good)


def test_cast_values_verify_by_regeneration(tmp_path):
    path = shapes.synthesize("tiny-gpt2", tmp_path)
    name = "transformer.wte.weight"
    cast = _file_values(path, name).astype(ml_dtypes.bfloat16)
    shapes.verify_tensor(path, name, cast)
    cast[0, 0] = -cast[0, 0]
    with pytest.raises(shapes.VerificationError, match="1 of .* elements differ"):
        shapes.verify_tensor(path, name, cast)


def test_dtype_override_changes_floats_only(tmp_path):
    spec = _spec(MIXED[:6])
    path = shapes.synthesize(spec, tmp_path, dtype="bf16")
    dtypes = {t.name: t.dtype for t in read_header(path).tensors.values()}
    assert dtypes == {
        "w.f32": "BF16",
        "w.f32b": "BF16",
        "w.f16": "BF16",
        "w.bf16": "BF16",
        "i.i64": "I64",
        "m.bool": "BOOL",
    }
    np.testing.assert_array_equal(
        _file_values(path, "w.f32"), shapes.tensor_values(spec, "w.f32", dtype="BF16")
    )
    with pytest.raises(shapes.ShapesError, match="not a float dtype"):
        shapes.synthesize(spec, tmp_path / "x", dtype="I32")


def test_cache_reuses_and_seed_change_rewrites(tmp_path):
    spec = _spec(MIXED[:2])
    path = shapes.synthesize(spec, tmp_path)
    stamp = path.stat().st_mtime_ns
    assert shapes.synthesize(spec, tmp_path) == path and path.stat().st_mtime_ns == stamp
    shapes.synthesize(spec, tmp_path, seed=5)
    assert json.loads((tmp_path / "digests.json").read_text())["seed"] == 5
    shapes.verify_tensor(path, "w.f32", shapes.tensor_values(spec, "w.f32", seed=5))


def test_sharded_spec_writes_shards_index_and_inspects_back(tmp_path, capsys):
    files = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    spec = _spec(
        [
            ("a.0.w", "F32", (4, 4), files[0]),
            ("a.1.w", "BF16", (3,), files[1]),
            ("b", "I64", (2,), files[1]),
        ],
        files,
    )
    out = shapes.synthesize(spec, tmp_path)
    assert out == tmp_path
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {"a.0.w": files[0], "a.1.w": files[1], "b": files[1]}
    assert index["metadata"]["total_size"] == 64 + 6 + 16
    back = shapes.load_spec(tmp_path)
    assert back.files == files and back.tensors == spec.tensors
    shapes.verify_tensor(out, "b", _file_values(tmp_path / files[1], "b"))
    assert main(["shapes", "inspect", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 2


def test_inspect_malformed_file_is_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((10**6).to_bytes(8, "little") + b"{}")
    assert main(["shapes", "inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "bad.safetensors" in err


def test_synth_cli(tmp_path, capsys):
    assert (
        main(
            [
                "shapes",
                "synth",
                "tiny-gpt2",
                "--out",
                str(tmp_path),
                "--dtype",
                "F16",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert "GiB/s" in capsys.readouterr().out
    assert {t.dtype for t in read_header(tmp_path / "model.safetensors").tensors.values()} == {
        "F16"
    }


def test_64_bit_integers_fit_the_32_bits_jax_holds_them_in(tmp_path, poison):
    """A shape set with an I64 buffer (HF's position_ids) loads into a model built in jax's
    default 32-bit mode: its synthetic values fit int32, as a real checkpoint's do (the loader
    refuses a value that does not)."""
    import loader

    f = "model.safetensors"
    spec = shapes.ShapeSpec(
        "ints",
        None,
        (f,),
        (
            shapes.TensorSpec("embeddings.position_ids", "I64", (1, 512), f),
            shapes.TensorSpec("counts", "U64", (300,), f),
            shapes.TensorSpec("weight", "F32", (8, 8), f),
        ),
    )
    ckpt = shapes.synthesize(spec, tmp_path)
    from safetensors.numpy import load_file

    values = load_file(str(ckpt))
    for name in ("embeddings.position_ids", "counts"):
        assert 0 <= values[name].min() and values[name].max() < 2**31
        assert len(np.unique(values[name])) > 100  # still random bits, not a constant
    model = shapes.model_builder(spec)()
    poison(model)
    model, report = loader.load_model(model, ckpt)
    for name in ("embeddings.position_ids", "counts"):
        leaf = model.embeddings.position_ids if name != "counts" else model.counts
        shapes.verify_tensor(ckpt, name, np.asarray(leaf.get_value()))
