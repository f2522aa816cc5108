"""Hostile inputs: a fixed corpus of malformed files and property-based mutation of valid ones.

Every outcome must be a correct load (identical to what safetensors itself reads from the same
bytes) or the project's error (`loader.CheckpointError`): never a KeyError, MemoryError,
OverflowError, a crash or a hang. Every mutated file also goes to the differential oracle
(`tests.fuzz.differential`): the loader's header reader and tensor reads must give safetensors'
verdict, names, dtypes, shapes and bytes, or a documented deliberate difference. `make fuzz` runs
a longer campaign (LOADBENCH_FUZZ_EXAMPLES) after the coverage-guided one (`tests.fuzz.campaign`).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import warnings
import zipfile
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import SafetensorError
from safetensors.numpy import load_file

import loader
from loader.format import MAX_HEADER_BYTES, encode_header, read_header
from tests.fuzz import differential

EXAMPLES = int(os.environ.get("LOADBENCH_FUZZ_EXAMPLES", "120"))
TRIED = {"cases": 0, "loads": 0, "refused": 0}


class Tiny(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.a = nnx.Param(jnp.zeros((3, 4), jnp.float32))
        self.b = nnx.Param(jnp.zeros((5,), jnp.bfloat16))
        self.c = nnx.Variable(jnp.zeros((2,), jnp.int32))


def valid_file() -> bytes:
    entries = {"a": ("F32", (3, 4)), "b": ("BF16", (5,)), "c": ("I32", (2,))}
    head, _ = encode_header(entries, {"format": "np"})
    rng = np.random.default_rng(0)
    data = rng.standard_normal(12).astype(np.float32).tobytes()
    data += rng.standard_normal(5).astype(np.float32).astype(jnp.bfloat16).tobytes()
    data += np.arange(2, dtype=np.int32).tobytes()
    return head + data


def header_bytes(obj: dict, pad_to: int | None = None) -> bytes:
    body = json.dumps(obj).encode()
    if pad_to:
        body += b" " * (-len(body) % pad_to)
    return struct.pack("<Q", len(body)) + body


def _entry(dtype: str, shape: list, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"w": [1, 2]}))
    return buf.getvalue()


CORPUS: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "too short"),
    "short-length": (b"\x01\x00\x00", "too short"),
    "length-past-eof": (struct.pack("<Q", 1000) + b"{}", "runs past the end"),
    "ten-gb-header": (struct.pack("<Q", 10 * 1024**3) + b"{}", "exceeds the limit"),
    "max-u64-header": (struct.pack("<Q", 2**64 - 1) + b"{}", "exceeds the limit"),
    "not-utf8": (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid UTF-8"),
    "not-json": (struct.pack("<Q", 4) + b"{{{{", "not valid JSON"),
    "json-list": (header_bytes([]), "must be a JSON object"),  # type: ignore[arg-type]
    "unknown-dtype": (
        header_bytes({"w": _entry("F128", [1], 0, 16)}) + b"\0" * 16,
        "unknown dtype",
    ),
    "negative-shape": (header_bytes({"w": _entry("F32", [-1], 0, 4)}) + b"\0" * 4, "non-negative"),
    "float-shape": (
        header_bytes({"w": _entry("F32", [1.5], 0, 4)}) + b"\0" * 4,
        "non-negative integers",
    ),
    "size-disagrees": (header_bytes({"w": _entry("F32", [3], 0, 8)}) + b"\0" * 8, "needs 12 bytes"),
    "offsets-reversed": (header_bytes({"w": _entry("F32", [0], 8, 0)}) + b"\0" * 8, "begin <= end"),
    "offsets-out-of-bounds": (
        header_bytes({"w": _entry("F32", [4], 0, 16)}) + b"\0" * 8,
        "file holds 8",
    ),
    "overlap": (
        header_bytes({"w": _entry("F32", [2], 0, 8), "v": _entry("F32", [2], 4, 12)}) + b"\0" * 12,
        "overlaps",
    ),
    "gap": (header_bytes({"w": _entry("F32", [1], 4, 8)}) + b"\0" * 8, "gap"),
    "duplicate-name": (
        struct.pack("<Q", 2 * 66 + 3)
        + b"{"
        + b'"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'.ljust(66)
        + b","
        + b'"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'.ljust(66)
        + b"}"
        + b"\0" * 4,
        "duplicate key",
    ),
    "metadata-not-strings": (header_bytes({"__metadata__": {"a": 1}}), "strings to strings"),
    "entry-not-object": (header_bytes({"w": [1, 2]}), "must be an object"),
    "huge-shape-overflow": (
        header_bytes({"w": _entry("F32", [2**62, 2**62], 0, 0)}),
        "cannot be held in memory",
    ),
    "pickle": (pickle.dumps({"weight": [1.0, 2.0]}, protocol=4), "Python pickle"),
    "torch-zip": (_zip_bytes(), "zip archive"),
    "lfs-pointer": (
        b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n",
        "Git LFS",
    ),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_malformed_corpus_is_refused_with_a_clear_message(tmp_path: Path, name: str):
    data, fragment = CORPUS[name]
    path = tmp_path / f"{name}.safetensors"
    path.write_bytes(data)
    with pytest.raises(loader.HeaderError) as err:
        read_header(path)
    assert str(path) in str(err.value) and fragment in str(err.value), str(err.value)
    with pytest.raises(loader.CheckpointError):
        loader.load_model(lambda: Tiny(nnx.Rngs(0)), path)


def test_header_limit_is_documented_and_enforced():
    assert MAX_HEADER_BYTES == 100_000_000


def _reference(path: Path) -> dict[str, np.ndarray] | None:
    try:
        return load_file(str(path))
    except (SafetensorError, Exception):  # safetensors' own refusal: anything goes
        return None


def _check_outcome(path: Path) -> None:
    TRIED["cases"] += 1
    verdict = differential.judge(differential.ours(path), differential.reference(path))
    assert verdict.finding is None, verdict.finding
    try:
        read_header(path)
    except loader.CheckpointError:
        TRIED["refused"] += 1
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model, report = loader.load_model(lambda: Tiny(nnx.Rngs(0)), path)
        except loader.CheckpointError:
            TRIED["refused"] += 1
            return
    TRIED["loads"] += 1
    reference = _reference(path)
    assert reference is not None, "we accepted a file safetensors itself refuses"
    for key in report.loaded:
        got = np.asarray(getattr(model, key).get_value())
        np.testing.assert_array_equal(got, reference[key].astype(got.dtype))


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=8)
)
def test_byte_flips(tmp_path_factory, flips):
    data = bytearray(valid_file())
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    path = tmp_path_factory.mktemp("flip") / "f.safetensors"
    path.write_bytes(bytes(data))
    _check_outcome(path)


@FUZZ
@given(cut=st.integers(0, 400), extra=st.binary(max_size=16))
def test_truncation_and_trailing_bytes(tmp_path_factory, cut, extra):
    data = valid_file()
    data = data[: max(0, len(data) - cut)] + extra
    path = tmp_path_factory.mktemp("cut") / "f.safetensors"
    path.write_bytes(data)
    _check_outcome(path)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@FUZZ
@given(
    tensor=st.sampled_from(["a", "b", "c", "__metadata__"]),
    field=st.sampled_from(["dtype", "shape", "data_offsets", "__whole__"]),
    value=json_values,
    length_delta=st.sampled_from([0, 0, 0, -1, 1, 8, -8]),
)
def test_header_field_mutations(tmp_path_factory, tensor, field, value, length_delta):
    data = valid_file()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    if field == "__whole__" or tensor == "__metadata__":
        header[tensor] = value
    else:
        header[tensor][field] = value
    body = json.dumps(header).encode()
    out = struct.pack("<Q", max(0, len(body) + length_delta)) + body + data[8 + n :]
    path = tmp_path_factory.mktemp("field") / "f.safetensors"
    path.write_bytes(out)
    _check_outcome(path)


def test_report_fuzz_count(capsys):
    """Prints how many cases the property tests tried (read by `make fuzz`)."""
    with capsys.disabled():
        print(
            f"\nfuzz: {TRIED['cases']} cases tried ({TRIED['loads']} loaded correctly, "
            f"{TRIED['refused']} refused with CheckpointError)"
        )
    assert TRIED["cases"] > 0
