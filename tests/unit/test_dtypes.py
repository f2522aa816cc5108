"""Every safetensors dtype: sized as the reference sizes it, loaded into a leaf of that dtype or
refused by name, and written back by `save_model`."""

from __future__ import annotations

import json
import struct

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors import deserialize

import loader
from loader.errors import CheckpointError, HeaderError
from loader.format import read_header
from loader.format.dtypes import ALL_DTYPES, DTYPES, PACKED, dtype_name, storage_bytes

#: the reference's dtype list (safetensors 0.8.0's error message for an unknown one names it)
REFERENCE_DTYPES = set(
    "BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 F16 "
    "BF16 I32 U32 F32 C64 F64 I64 U64".split()
)

#: the fp8 dtypes a leaf holds as stored, beyond F8_E4M3 / F8_E5M2
NEW_FP8 = {
    "F8_E8M0": ml_dtypes.float8_e8m0fnu,
    "F8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "F8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
}


def _file(dtype: str, shape: list[int], nbytes: int, key: str = "t") -> bytes:
    header = json.dumps({key: {"dtype": dtype, "shape": shape, "data_offsets": [0, nbytes]}})
    return struct.pack("<Q", len(header)) + header.encode() + bytes(range(nbytes))


def test_the_table_is_the_references():
    assert ALL_DTYPES == REFERENCE_DTYPES


@pytest.mark.parametrize("dtype", sorted(REFERENCE_DTYPES))
@pytest.mark.parametrize("shape", [[0], [1], [2], [3], [4], [2, 3], [3, 4]])
def test_sizes_agree_with_the_reference(tmp_path, dtype, shape):
    """Every dtype and small shape: we accept exactly the byte lengths the reference accepts."""
    bits = int(np.prod(shape)) * (PACKED.get(dtype) or DTYPES[dtype].itemsize * 8)
    for nbytes in sorted({max(bits // 8 - 1, 0), bits // 8, bits // 8 + 1, (bits + 7) // 8}):
        data = _file(dtype, shape, nbytes)
        try:
            deserialize(data)
            theirs = True
        except Exception:  # noqa: BLE001
            theirs = False
        path = tmp_path / "t.safetensors"
        path.write_bytes(data)
        try:
            read_header(path)
            ours = True
        except HeaderError as e:
            assert "'t'" in str(e)
            ours = False
        assert ours == theirs, (dtype, shape, nbytes)
    assert storage_bytes(dtype, tuple(shape)) == (None if bits % 8 else bits // 8)


def test_packed_sizes():
    assert storage_bytes("F4", (2, 16)) == 16
    assert storage_bytes("F6_E3M2", (4,)) == 3
    assert storage_bytes("F4", (3,)) is None
    assert set(PACKED) == {"F4", "F6_E2M3", "F6_E3M2"}


class _One(nnx.Module):
    def __init__(self, dtype):
        self.w = nnx.Param(jnp.zeros((3, 4), dtype))


@pytest.mark.parametrize(
    "strategy, options",
    [("pread", {}), ("mmap", {}), ("pipelined", {}), ("pipelined", {"staging": True})],
    ids=["pread", "mmap", "pipelined", "staged"],
)
@pytest.mark.parametrize("name", sorted(NEW_FP8))
def test_fp8_leaf_round_trip(tmp_path, name, strategy, options):
    dtype = np.dtype(NEW_FP8[name])
    values = np.arange(1, 13, dtype=np.uint8).reshape(3, 4).view(dtype)
    src = _One(dtype)
    src.w.set_value(jnp.asarray(values))
    path = tmp_path / "m.safetensors"
    loader.save_model(src, path)
    assert read_header(path).tensors["w"].dtype == name
    target = _One(dtype)  # zeros: the loaded bytes 1..12 differ from every one of them
    loaded, report = loader.load_model(target, path, strict=True, strategy=strategy, **options)
    assert report.ok
    got = np.asarray(loaded.w.get_value())
    assert got.dtype == dtype
    assert got.view(np.uint8).tolist() == values.view(np.uint8).tolist()


@pytest.mark.parametrize("name", sorted(PACKED))
def test_packed_tensor_into_a_leaf_is_refused_by_name(tmp_path, name):
    path = tmp_path / "m.safetensors"
    path.write_bytes(_file(name, [3, 4], storage_bytes(name, (3, 4)) or 0, key="w"))
    with pytest.raises(CheckpointError, match=rf"tensor 'w' is {name}.*loader.DequantizeMXFP4"):
        loader.load_model(_One(jnp.float32), path)


def test_a_packed_leaf_dtype_is_refused_by_name_at_save(tmp_path):
    with pytest.raises(HeaderError, match="stored packed as safetensors F4"):
        dtype_name(ml_dtypes.float4_e2m1fn)
    assert dtype_name(ml_dtypes.float8_e8m0fnu) == "F8_E8M0"
    assert all(dtype_name(dt) == n for n, dt in DTYPES.items())


def test_eager_refuses_a_dtype_its_numpy_bridge_lacks_by_name(tmp_path):
    src = _One(np.dtype(ml_dtypes.float8_e4m3fn))
    path = tmp_path / "m.safetensors"
    loader.save_model(src, path)
    with pytest.raises(CheckpointError, match="safetensors.numpy cannot read it.*pipelined"):
        loader.load_model(_One(np.dtype(ml_dtypes.float8_e4m3fn)), path, strategy="eager")
