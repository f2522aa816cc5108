"""Quantized layouts (`loader.Dequantize`, `loader.Unpack`, `loader.DequantizeMXFP4`): bit for
bit against a numpy reference written here independently (element by element, from the layouts'
public definitions), on the host and on the device, through the strategies; mismatched scales
refused by name; one device program per layout and shape, not per tensor."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

import loader
from loader.errors import MismatchError
from loader.format import dtype_name, encode_header
from loader.transforms import Dequantize, DequantizeMXFP4, Transpose, Unpack, device_quant

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
RNG = np.random.default_rng(7)
#: the strategies: host numpy (pread, mmap), device (pipelined, and staged through its ring)
LOADS = [("pread", {}), ("mmap", {}), ("pipelined", {}), ("pipelined", {"staging": True})]
LOAD_IDS = ["pread", "mmap", "pipelined", "staged"]


# -- the reference: one element at a time, from the layouts' definitions ---------------------------


def _nibble(word: int, i: int) -> int:
    """Nibble i of a 32-bit word (i = 0 in the lowest bits)."""
    return (int(word) & 0xFFFFFFFF) >> (4 * i) & 0xF


def _round(value: float, scale_dtype: np.dtype, dtype: np.dtype) -> np.generic:
    """A product computed exactly (Python float), rounded to the scale's dtype if narrower than
    float32, else to float32, then to the leaf's dtype."""
    narrow = scale_dtype if np.dtype(scale_dtype).itemsize < 4 else np.dtype(np.float32)
    return (
        np.array(np.float32(value) if narrow == np.float32 else value)
        .astype(narrow)
        .astype(dtype)[()]
    )


def ref_fp8(weight, scale, block, dtype):
    rows, cols = weight.shape
    out = np.empty((rows, cols), dtype)
    s = scale.astype(np.float64)
    for r in range(rows):
        for c in range(cols):
            if block:
                sv = s[r // block[0], c // block[1]]
            elif s.size == 1:
                sv = s.reshape(-1)[0]
            else:
                sv = s.reshape(-1)[r]
            # float32 multiply: the exact product rounded once to float32
            out[r, c] = _round(np.float32(float(weight[r, c]) * sv), scale.dtype, dtype)
    return out


def ref_ct_int4(packed, scale, shape, group, zero, dtype):
    """compressed-tensors: value j of row r is nibble j % n of container j // n (n = 8 in an
    I32, 2 in a U8), stored q + 8."""
    rows, cols = shape
    per = packed.dtype.itemsize * 2
    out = np.empty(shape, dtype)
    for r in range(rows):
        for c in range(cols):
            q = _nibble(packed[r, c // per], c % per) - 8
            z = 0 if zero is None else _nibble(zero[r // 8, c // group], r % 8) - 8
            out[r, c] = _round((q - z) * float(scale[r, c // group]), scale.dtype, dtype)
    return out


def ref_gptq(qweight, qzeros, scales, g_idx, group, dtype):
    """GPTQ: row i of the [in, out] weight is nibble i % 8 of qweight[i // 8]; zeros stored - 1."""
    inputs, outputs = qweight.shape[0] * 8, qweight.shape[1]
    out = np.empty((inputs, outputs), dtype)
    for i in range(inputs):
        g = int(g_idx[i]) if g_idx is not None else i // group
        for j in range(outputs):
            q = _nibble(qweight[i // 8, j], i % 8)
            z = _nibble(qzeros[g, j // 8], j % 8) + 1
            out[i, j] = _round((q - z) * float(scales[g, j]), scales.dtype, dtype)
    return out


def ref_awq(qweight, qzeros, scales, group, dtype):
    """AWQ: column 8k + p of the [in, out] weight is nibble [0, 4, 1, 5, 2, 6, 3, 7][p]."""
    order = [0, 4, 1, 5, 2, 6, 3, 7]
    inputs, outputs = qweight.shape[0], qweight.shape[1] * 8
    out = np.empty((inputs, outputs), dtype)
    for i in range(inputs):
        for j in range(outputs):
            q = _nibble(qweight[i, j // 8], order[j % 8])
            z = _nibble(qzeros[i // group, j // 8], order[j % 8])
            out[i, j] = _round((q - z) * float(scales[i // group, j]), scales.dtype, dtype)
    return out


def _e2m1(n: int) -> float:
    """FP4 E2M1 by its bits: sign, 2 exponent bits (bias 1), 1 mantissa bit."""
    sign = -1.0 if n & 8 else 1.0
    exp, man = (n >> 1) & 3, n & 1
    return sign * (man * 0.5 if exp == 0 else (1 + man * 0.5) * 2.0 ** (exp - 1))


def ref_mxfp4(blocks, scales, dtype):
    *lead, groups, _ = blocks.shape
    out = np.empty((*lead, groups * 32), dtype)
    for idx in np.ndindex(*lead, groups):
        for b in range(16):
            byte = int(blocks[(*idx, b)])
            for half, n in ((0, byte & 15), (1, byte >> 4)):
                v = _e2m1(n) * 2.0 ** (int(scales[idx]) - 127)
                out[(*idx[:-1], idx[-1] * 32 + 2 * b + half)] = np.float32(v).astype(dtype)
    return out


# -- data -----------------------------------------------------------------------------------------


def _fp8(shape) -> np.ndarray:
    bits = RNG.integers(0, 256, shape, dtype=np.uint8)
    bits[(bits & 0x7F) == 0x7F] = 0x38  # NaN in e4m3fn: 1.0 instead
    return bits.view(E4M3)


def _words(shape) -> np.ndarray:
    return RNG.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)


def _scales(shape, dtype) -> np.ndarray:
    return (RNG.random(shape) * 0.02 + 0.001).astype(dtype)


def _same_bits(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    diff = np.flatnonzero(a.view(width) != b.view(width))
    assert diff.size == 0, (
        f"{diff.size} values differ, first at {diff[0]}: {a.flat[diff[0]]} vs {b.flat[diff[0]]}"
    )  # noqa: E501


CASES = {
    "fp8-channel": lambda: (
        Dequantize("w", "s"),
        {"weight": _fp8((16, 24)), "scale": _scales((16, 1), np.float32)},
        lambda a, dt: ref_fp8(a["weight"], a["scale"], None, dt),
    ),
    "fp8-tensor-bf16-scale": lambda: (
        Dequantize("w", "s"),
        {"weight": _fp8((8, 8)), "scale": _scales((1,), BF16)},
        lambda a, dt: ref_fp8(a["weight"], a["scale"], None, dt),
    ),
    "fp8-block": lambda: (
        Dequantize("w", "s", block=(4, 8)),
        {"weight": _fp8((10, 20)), "scale": _scales((3, 3), np.float32)},
        lambda a, dt: ref_fp8(a["weight"], a["scale"], (4, 8), dt),
    ),
    "int4-compressed-tensors": lambda: (
        Unpack.compressed_tensors("l", shape=(8, 60), group_size=16),
        {
            "weight": _words((8, 8)),
            "scale": _scales((8, 4), BF16),
            "shape": np.array([8, 60], np.int32),
        },
        lambda a, dt: ref_ct_int4(a["weight"], a["scale"], (8, 60), 16, None, dt),
    ),
    "int4-u8": lambda: (
        Unpack.compressed_tensors("l", shape=(6, 20), group_size=8),
        {
            "weight": RNG.integers(0, 256, (6, 10), dtype=np.uint8),
            "scale": _scales((6, 3), np.float32),
            "shape": np.array([6, 20], np.int32),
        },
        lambda a, dt: ref_ct_int4(a["weight"], a["scale"], (6, 20), 8, None, dt),
    ),
    "int4-compressed-tensors-zero": lambda: (
        Unpack.compressed_tensors("l", shape=(16, 32), group_size=16, zero_point=True),
        {
            "weight": _words((16, 4)),
            "scale": _scales((16, 2), BF16),
            "shape": np.array([16, 32], np.int32),
            "zero": _words((2, 2)),
        },
        lambda a, dt: ref_ct_int4(a["weight"], a["scale"], (16, 32), 16, a["zero"], dt),
    ),
    "int4-gptq-g_idx": lambda: (
        Unpack.gptq("l", group_size=8, g_idx=True),
        {
            "weight": _words((4, 16)),
            "zero": _words((4, 2)),
            "scale": _scales((4, 16), np.float16),
            "g_idx": RNG.permutation(np.arange(32) // 8).astype(np.int32),
        },
        lambda a, dt: ref_gptq(a["weight"], a["zero"], a["scale"], a["g_idx"], 8, dt),
    ),
    "int4-awq": lambda: (
        Unpack.awq("l", group_size=8),
        {"weight": _words((16, 3)), "zero": _words((2, 3)), "scale": _scales((2, 24), np.float16)},
        lambda a, dt: ref_awq(a["weight"], a["zero"], a["scale"], 8, dt),
    ),
    "mxfp4": lambda: (
        DequantizeMXFP4("b", "s"),
        {
            "blocks": RNG.integers(0, 256, (2, 3, 2, 16), dtype=np.uint8),
            "scales": RNG.integers(110, 135, (2, 3, 2), dtype=np.uint8),
        },
        lambda a, dt: ref_mxfp4(a["blocks"], a["scales"], dt),
    ),
}


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float32)], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_host_and_device_equal_the_reference_bit_for_bit(name, dtype):
    layout, arrays, reference = CASES[name]()
    want = reference(arrays, dtype)
    _same_bits(layout.host(arrays, dtype), want)
    on_device = {role: jnp.asarray(a) for role, a in arrays.items()}
    _same_bits(device_quant.dequantize(layout, on_device, dtype, None), want)


def test_one_bit_off_is_caught():
    layout, arrays, reference = CASES["fp8-channel"]()
    want = reference(arrays, BF16)
    got = layout.host(arrays, BF16).copy()
    got.view(np.uint16)[3, 5] ^= 1
    with pytest.raises(AssertionError, match="1 values differ"):
        _same_bits(got, want)


def test_e8m0_scales_as_f8_e8m0_equal_u8():
    blocks = RNG.integers(0, 256, (3, 16), dtype=np.uint8)
    exps = RNG.integers(100, 150, (3,), dtype=np.uint8)
    q = DequantizeMXFP4("b", "s")
    as_u8 = q.host({"blocks": blocks, "scales": exps}, BF16)
    as_e8m0 = q.host({"blocks": blocks, "scales": exps.view(ml_dtypes.float8_e8m0fnu)}, BF16)
    _same_bits(as_u8, as_e8m0)


# -- through the loader --------------------------------------------------------------------------


def write(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    entries = {name: (dtype_name(a.dtype), tuple(a.shape)) for name, a in tensors.items()}
    header, _ = encode_header(entries, None)
    with open(path, "wb") as f:
        f.write(header)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())
    return path


class Leaves(nnx.Module):
    """Named float leaves of given shapes (poisoned: 7.0 everywhere)."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], dtype=jnp.bfloat16):
        for name, shape in shapes.items():
            setattr(self, name, nnx.Param(jnp.full(shape, 7.0, dtype)))


def _file(tmp_path, name):
    layout, arrays, reference = CASES[name]()
    tensors = {layout.keys[role]: a for role, a in arrays.items()}
    return layout, write(tmp_path / f"{name}.safetensors", tensors), reference(arrays, BF16)


@pytest.mark.parametrize(("strategy", "options"), LOADS, ids=LOAD_IDS)
@pytest.mark.parametrize("name", ["fp8-block", "int4-gptq-g_idx", "int4-compressed-tensors"])
def test_loads_bit_for_bit(tmp_path, name, strategy, options):
    layout, path, want = _file(tmp_path, name)
    model = Leaves({"w": want.shape})
    loaded, report = loader.load_model(
        model, path, key_map={"w": layout}, strict=True, strategy=strategy, **options
    )
    assert report.loaded == ["w"] and report.dequantized == ["w"] and report.ok
    _same_bits(loaded.w.get_value(), want)


@pytest.mark.parametrize(("strategy", "options"), LOADS, ids=LOAD_IDS)
def test_mxfp4_experts_with_a_transpose(tmp_path, strategy, options):
    layout, path, want = _file(tmp_path, "mxfp4")
    model = Leaves({"experts": (2, 64, 3)})
    key_map = {"experts": (layout, Transpose((0, 2, 1)))}
    loaded, report = loader.load_model(
        model, path, key_map=key_map, strict=True, strategy=strategy, **options
    )
    assert report.ok
    _same_bits(loaded.experts.get_value(), np.transpose(want, (0, 2, 1)))


def test_mxfp4_blocks_typed_f4_are_refused_by_name(tmp_path):
    header, _ = encode_header({"b": ("F4", (3, 32)), "s": ("U8", (3,))}, None)
    path = tmp_path / "f4.safetensors"
    path.write_bytes(header + bytes(48) + bytes(3))
    key_map = {"x": DequantizeMXFP4("b", "s")}
    with pytest.raises(MismatchError, match=r"tensor 'b' \(F4 \[3, 32\]\): F4 blocks: store"):
        loader.load_model(Leaves({"x": (96,)}), path, key_map=key_map, strict=True)


def test_a_mismatched_scale_is_refused_by_name(tmp_path):
    tensors = {"l.weight": _fp8((8, 16)), "l.weight_scale": _scales((6, 1), np.float32)}
    path = write(tmp_path / "m.safetensors", tensors)
    key_map = {"w": Dequantize("l.weight", "l.weight_scale")}
    with pytest.raises(MismatchError, match=r"'l.weight_scale'.*\[8, 1\] \(per channel\)"):
        loader.load_model(Leaves({"w": (8, 16)}), path, key_map=key_map, strict=True)
    model, report = loader.load_model(Leaves({"w": (8, 16)}), path, key_map=key_map)
    assert report.loaded == [] and [m.path for m in report.shape_mismatches] == ["w"]
    assert float(model.w.get_value()[0, 0]) == 7.0  # left as it was


def test_a_block_scale_of_the_wrong_block_is_refused(tmp_path):
    tensors = {"l.weight": _fp8((10, 20)), "l.weight_scale_inv": _scales((3, 2), np.float32)}
    path = write(tmp_path / "m.safetensors", tensors)
    key_map = {"w": Dequantize("l.weight", "l.weight_scale_inv", block=(4, 8))}
    with pytest.raises(MismatchError, match=r"'l.weight_scale_inv'.*\[3, 3\] for 4x8 blocks"):
        loader.load_model(Leaves({"w": (10, 20)}), path, key_map=key_map, strict=True)


def test_a_packed_length_that_does_not_unpack_is_refused(tmp_path):
    tensors = {
        "l.weight_packed": _words((8, 4)),
        "l.weight_scale": _scales((8, 1), BF16),
        "l.weight_shape": np.array([8, 40], np.int32),
    }
    path = write(tmp_path / "m.safetensors", tensors)
    key_map = {"w": Unpack.compressed_tensors("l", shape=(8, 40), group_size=128)}
    with pytest.raises(MismatchError, match=r"'l.weight_packed'.*declared shape \[8, 40\]"):
        loader.load_model(Leaves({"w": (8, 40)}), path, key_map=key_map, strict=True)


def test_weight_shape_values_are_checked(tmp_path):
    tensors = {
        "l.weight_packed": _words((8, 4)),
        "l.weight_scale": _scales((8, 1), BF16),
        "l.weight_shape": np.array([8, 31], np.int32),  # the header cannot say; the bytes do
    }
    path = write(tmp_path / "m.safetensors", tensors)
    key_map = {"w": Unpack.compressed_tensors("l", shape=(8, 32), group_size=128)}
    for options in ({"strategy": "pread"}, {}, {"staging": True}):
        with pytest.raises(loader.CheckpointError, match=r"'l.weight_shape' holds \[8, 31\]"):
            loader.load_model(Leaves({"w": (8, 32)}), path, key_map=key_map, **options)


@pytest.mark.parametrize(("strategy", "options"), LOADS, ids=LOAD_IDS)
def test_a_g_idx_beyond_the_groups_is_refused_by_name(tmp_path, strategy, options):
    tensors = {
        "l.qweight": _words((2, 8)),
        "l.qzeros": _words((2, 1)),
        "l.scales": _scales((2, 8), np.float16),
        "l.g_idx": np.array([0] * 15 + [2], np.int32),  # group 2 of 2
    }
    path = write(tmp_path / "m.safetensors", tensors)
    key_map = {"w": Unpack.gptq("l", group_size=8, g_idx=True)}
    with pytest.raises(loader.CheckpointError, match=r"'l.g_idx': group indices run 0..2"):
        loader.load_model(
            Leaves({"w": (16, 8)}), path, key_map=key_map, strategy=strategy, **options
        )


def _layers(tmp_path, n: int, rows: int = 16) -> tuple[Path, dict, dict, dict]:
    tensors, key_map, shapes = {}, {}, {}
    for i in range(n):
        tensors[f"l{i}.weight"] = _fp8((rows, 32))
        tensors[f"l{i}.weight_scale"] = _scales((rows, 1), np.float32)
        key_map[f"k{i}"] = (Dequantize(f"l{i}.weight", f"l{i}.weight_scale"), Transpose((1, 0)))
        shapes[f"k{i}"] = (32, rows)
    return write(tmp_path / f"n{n}.safetensors", tensors), key_map, shapes, tensors


@pytest.mark.parametrize(
    ("options", "rows"), [({}, 40), ({"staging": True}, 48)], ids=["pipelined", "staged"]
)
def test_one_device_program_per_layout_and_shape_not_per_tensor(tmp_path, options, rows):
    """Six layers of one shape (a shape no other test uses) compile one program; loading them
    again compiles none."""
    path, key_map, shapes, tensors = _layers(tmp_path, 6, rows)
    before = device_quant.compiled()
    loaded, report = loader.load_model(Leaves(shapes), path, key_map=key_map, **options)
    assert report.ok and sorted(report.dequantized) == sorted(shapes)
    assert device_quant.compiled() - before == 1
    loader.load_model(Leaves(shapes), path, key_map=key_map, **options)
    assert device_quant.compiled() - before == 1
    for i in range(6):
        weight, scale = tensors[f"l{i}.weight"], tensors[f"l{i}.weight_scale"]
        _same_bits(getattr(loaded, f"k{i}").get_value(), ref_fp8(weight, scale, None, BF16).T)


def test_host_strategies_compile_nothing(tmp_path):
    path, key_map, shapes, _ = _layers(tmp_path, 2)
    before = device_quant.compiled()
    _, report = loader.load_model(
        Leaves(shapes, dtype=jnp.float32), path, key_map=key_map, strategy="pread"
    )
    assert report.ok and device_quant.compiled() == before


def test_a_model_that_keeps_the_layer_quantized_loads_the_bytes(tmp_path):
    weight, scale = _fp8((8, 16)), _scales((8, 1), np.float32)
    path = write(tmp_path / "m.safetensors", {"l.weight": weight, "l.weight_scale": scale})

    class Kept(nnx.Module):
        def __init__(self):
            self.weight = nnx.Param(jnp.zeros((8, 16), E4M3))
            self.weight_scale = nnx.Param(jnp.zeros((8, 1), jnp.float32))

    key_map = {"weight": "l.weight", "weight_scale": "l.weight_scale"}
    for options in ({}, {"staging": True}, {"strategy": "pread"}):
        loaded, report = loader.load_model(Kept(), path, key_map=key_map, strict=True, **options)
        assert report.ok and report.dequantized == []
        _same_bits(loaded.weight.get_value(), weight)
        _same_bits(loaded.weight_scale.get_value(), scale)


def test_plan_shows_the_layout_and_the_bytes_it_moves(tmp_path):
    layout, path, want = _file(tmp_path, "fp8-block")
    table = loader.plan(Leaves({"w": want.shape}), path, key_map={"w": layout})
    (entry,) = [e for e in table.entries if e.path == "w"]
    assert entry.transform.startswith("Dequantize(fp8 block 4x8")
    moved = 10 * 20 + 3 * 3 * 4
    assert f"moves {moved} B for a {math.prod(want.shape) * 2} B leaf" in entry.note
    assert "fp8 block 4x8" in str(table)


class ShardedKernel(nnx.Module):
    """A (32, 16) kernel sharded over 4 devices along its first axis."""

    def __init__(self):
        init = nnx.with_partitioning(nnx.initializers.zeros_init(), ("x", None))
        self.kernel = nnx.Param(init(jax.random.key(0), (32, 16), jnp.bfloat16))


@pytest.mark.parametrize(("strategy", "options"), LOADS, ids=LOAD_IDS)
def test_a_sharded_leaf_is_dequantized_into_its_sharding(tmp_path, strategy, options):
    weight, scale = _fp8((16, 32)), _scales((16, 1), np.float32)
    path = write(tmp_path / "m.safetensors", {"w": weight, "s": scale})
    key_map = {"kernel": (Dequantize("w", "s"), Transpose((1, 0)))}
    with jax.set_mesh(jax.make_mesh((4,), ("x",), devices=jax.devices()[:4])):
        model, report = loader.load_model(
            ShardedKernel(), path, key_map=key_map, strict=True, strategy=strategy, **options
        )
    value = model.kernel.get_value()
    assert report.ok and isinstance(value.sharding, NamedSharding)
    assert value.sharding.spec == PartitionSpec("x", None) and len(value.sharding.device_set) == 4
    assert {s.data.shape for s in value.addressable_shards} == {(8, 16)}
    _same_bits(value, ref_fp8(weight, scale, None, BF16).T)


def test_the_checkpoint_conventions_name_their_tensors():
    assert Dequantize.compressed_tensors("p").keys == {
        "weight": "p.weight",
        "scale": "p.weight_scale",
    }
    deepseek = Dequantize.deepseek("p")
    assert deepseek.keys["scale"] == "p.weight_scale_inv" and deepseek.block == (128, 128)
    experts = DequantizeMXFP4.gpt_oss("m.experts.gate_up_proj")
    assert experts.file_keys == ("m.experts.gate_up_proj_blocks", "m.experts.gate_up_proj_scales")
    assert Unpack.compressed_tensors("p").file_keys == (
        "p.weight_packed",
        "p.weight_scale",
        "p.weight_shape",
    )
    assert Unpack.gptq("p", g_idx=True).file_keys == (
        "p.qweight",
        "p.qzeros",
        "p.scales",
        "p.g_idx",
    )
