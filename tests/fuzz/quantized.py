"""Malformed quantized headers: the parser and the layouts' checks, against safetensors' parser.

Each input is a small quantized layer (`SEEDS`: FP8 per channel and per block, compressed-tensors
int4, GPTQ, AWQ, MXFP4) with one thing a writer could get wrong (`mutate`): a scale or zero point
of another shape, a packed tensor one column short or long, a dtype swapped for another (or for
one no parser knows), a tensor dropped, a data section cut. Shapes are re-tiled after a mutation
so that most inputs pass the header parser and reach the layout's check.

`judge(input)` reads the file's header (`loader.format.parse_header`), checks it against
safetensors' Rust parser (`safetensors.deserialize`: the same verdict, the same byte lengths),
then plans the layout (`Quantized.out_shape`) and, where it fits, dequantizes the bytes on the
host. Every refusal must be a `CheckpointError` that names a tensor of the file; anything else
is a crash. `tests/unit/test_fuzz_quantized.py` runs 10,000 of them in a few seconds.
"""

from __future__ import annotations

import json
import random
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from safetensors import deserialize

from loader.errors import CheckpointError
from loader.format import TensorInfo, parse_header
from loader.format.dtypes import ALL_DTYPES, storage_bytes
from loader.transforms import Dequantize, DequantizeMXFP4, Quantized, Unpack

Entries = dict[str, tuple[str, list[int]]]

#: A valid layer of each layout: the layout, and its tensors (name -> dtype, shape).
SEEDS: dict[str, tuple[Quantized, Entries]] = {
    "fp8-channel": (
        Dequantize("l.weight", "l.weight_scale"),
        {"l.weight": ("F8_E4M3", [8, 16]), "l.weight_scale": ("F32", [8, 1])},
    ),
    "fp8-block": (
        Dequantize("l.weight", "l.weight_scale_inv", block=(4, 8)),
        {"l.weight": ("F8_E4M3", [10, 20]), "l.weight_scale_inv": ("F32", [3, 3])},
    ),
    "int4-compressed-tensors": (
        Unpack.compressed_tensors("l", shape=(8, 32), group_size=16),
        {
            "l.weight_packed": ("I32", [8, 4]),
            "l.weight_scale": ("BF16", [8, 2]),
            "l.weight_shape": ("I32", [2]),
        },
    ),
    "int4-gptq": (
        Unpack.gptq("l", group_size=8, g_idx=True),
        {
            "l.qweight": ("I32", [2, 8]),
            "l.qzeros": ("I32", [2, 1]),
            "l.scales": ("F16", [2, 8]),
            "l.g_idx": ("I32", [16]),
        },
    ),
    "int4-awq": (
        Unpack.awq("l", group_size=8),
        {"l.qweight": ("I32", [16, 1]), "l.qzeros": ("I32", [2, 1]), "l.scales": ("F16", [2, 8])},
    ),
    "mxfp4": (
        DequantizeMXFP4("e.blocks", "e.scales"),
        {"e.blocks": ("U8", [2, 3, 16]), "e.scales": ("U8", [2, 3])},
    ),
}
_DTYPES = sorted(ALL_DTYPES) + ["F8_E4M3X", "I4", "f32"]


def _tiled(entries: Entries) -> tuple[dict[str, Any], int]:
    """The header object with contiguous offsets (a packed length that does not fill whole bytes
    is given its floor), and the data size."""
    obj: dict[str, Any] = {}
    cursor = 0
    for name, (dtype, shape) in entries.items():
        try:
            size = storage_bytes(dtype, tuple(shape)) or 0
        except CheckpointError:  # an unknown dtype: a guess the parser will refuse anyway
            size = int(np.prod(shape)) * 4
        obj[name] = {"dtype": dtype, "shape": shape, "data_offsets": [cursor, cursor + size]}
        cursor += size
    return obj, cursor


def mutate(entries: Entries, rng: random.Random) -> tuple[Entries, int]:
    """One writer's mistake in a copy of `entries`, and a change to the data size (usually 0)."""
    out = {name: (dtype, list(shape)) for name, (dtype, shape) in entries.items()}
    name = rng.choice(sorted(out))
    dtype, shape = out[name]
    op = rng.randrange(6)
    if op == 0 and shape:  # a dimension off by a little
        axis = rng.randrange(len(shape))
        shape[axis] = max(0, shape[axis] + rng.choice((-2, -1, 1, 2, 7)))
    elif op == 1:  # a dimension added or dropped
        if shape and rng.random() < 0.5:
            shape.pop(rng.randrange(len(shape)))
        else:
            shape.insert(rng.randrange(len(shape) + 1), rng.choice((1, 2)))
    elif op == 2:  # another dtype, or one no parser knows
        out[name] = (rng.choice(_DTYPES), shape)
    elif op == 3:  # a tensor dropped
        out.pop(name)
    elif op == 4 and len(shape) >= 2:  # two dimensions swapped
        shape[0], shape[-1] = shape[-1], shape[0]
    else:  # the data section cut or grown
        return out, rng.choice((-4, -1, 1, 3))
    return out, 0


@dataclass(frozen=True)
class Outcome:
    """What the loader made of one input: accepted (and dequantized), or the refusal."""

    accepted: bool
    error: str = ""


def file_bytes(entries: Entries, extra: int, rng: random.Random) -> tuple[bytes, int]:
    obj, size = _tiled(entries)
    header = json.dumps(obj, separators=(",", ":")).encode()
    data = rng.randbytes(max(0, size + extra))
    return struct.pack("<Q", len(header)) + header + data, len(header)


def _reference_accepts(data: bytes) -> bool:
    try:
        deserialize(data)
        return True
    except Exception:  # noqa: BLE001 - any refusal is the reference's verdict
        return False


def judge(layout: Quantized, entries: Entries, extra: int, rng: random.Random) -> Outcome:
    """Parse, compare with the reference, check and dequantize one input (see the module doc).

    Raises:
        AssertionError: a disagreement with the reference, or a refusal that names no tensor.
        Anything else: a crash (a finding).
    """
    data, n = file_bytes(entries, extra, rng)
    ours: Outcome
    try:
        header = parse_header(data[8 : 8 + n], source="fuzz", data_size=len(data) - 8 - n)
    except CheckpointError as exc:
        ours = Outcome(False, str(exc))
    else:
        ours = Outcome(True)
    assert ours.accepted == _reference_accepts(data), (entries, extra, ours.error)
    if not ours.accepted:
        _names_a_tensor(ours.error, entries)
        return ours
    try:
        infos = {role: header.tensors[key] for role, key in layout.keys.items()}
    except KeyError as exc:
        return Outcome(False, f"tensor {exc} not found")
    try:
        shape = layout.out_shape(infos)
        arrays = {role: _array(data, header.data_start, info) for role, info in infos.items()}
        if "shape" in arrays:  # the values a writer would have put there
            arrays["shape"] = np.asarray(layout.shape, np.int32)  # type: ignore[attr-defined]
        if "g_idx" in arrays and rng.random() < 0.9:  # else random: out of range, refused
            arrays["g_idx"] = np.zeros_like(arrays["g_idx"])
        out = layout.host(arrays, np.dtype(np.float32))
    except CheckpointError as exc:
        _names_a_tensor(str(exc), entries)
        return Outcome(False, str(exc))
    assert out.shape == shape, (entries, out.shape, shape)
    return Outcome(True)


def _array(data: bytes, start: int, info: TensorInfo) -> np.ndarray:
    count = int(np.prod(info.storage_shape))
    raw = np.frombuffer(data, info.np_dtype, count=count, offset=start + info.begin)
    return raw.reshape(info.storage_shape)


def _names_a_tensor(message: str, entries: Entries) -> None:
    """A refusal names the tensor at fault, or says what of the whole file is (its size)."""
    assert any(repr(name) in message for name in entries) or "tensors cover" in message, message
