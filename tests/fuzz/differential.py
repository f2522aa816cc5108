"""Differential oracle: the same bytes to loadbench's reader and to safetensors' own (Rust) parser.

`compare(data, folder)` writes one file and reads it twice:

- **ours**: `loader.format.read_header`, then every tensor through `CheckpointSource.read_into`
  into a `loader.format.buffers.host_buffer` (the reads the loader does; a packed F4 / F6 tensor
  as its bytes, which is how a quantized layout reads it). A refusal is a
  `CheckpointError`; any other exception is a crash, always a finding.
- **reference**: `safetensors.safe_open(path, framework="np")`: names, `get_slice` dtype and shape,
  and `get_tensor(name).tobytes()`. Where numpy has no such dtype (F8_*, F4, ...: the np bridge
  raises AttributeError) the bytes come from `safetensors.deserialize` instead, and where the
  bindings cannot name the dtype at all (F6_*), everything does. Any exception is the
  reference's refusal.

Both must agree: accept or refuse, and for accepted files the same names, dtypes, shapes and
bytes. A disagreement is allowed only where a row of `DELIBERATE_DIFFERENCES` explains it (in
every row the loader is the stricter one). Fuzz inputs (`decode_input`) are either a whole file or,
when they start with `{`, a header's JSON text, a NUL, then the data bytes (the length prefix is
computed), so mutations explore the JSON without always breaking the length.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from safetensors import deserialize, safe_open

from loader.errors import CheckpointError
from loader.format import read_header
from loader.format.buffers import host_buffer
from loader.format.source import CheckpointSource

Tensors = dict[str, tuple[str, tuple[int, ...], bytes]]


@dataclass(frozen=True)
class Outcome:
    """One parser's verdict on one file: the tensors it read, or why it refused."""

    accepted: bool
    tensors: Tensors = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Difference:
    """A documented, deliberate disagreement: the loader refuses what the reference accepts."""

    name: str
    our_message: str  # a fragment of the loader's error message
    reason: str
    applies: Callable[[Outcome], bool] = lambda ref: True  # checked on the reference's outcome


#: The one table of deliberate differences (loader stricter than safetensors 0.8.0 in each).
DELIBERATE_DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "duplicate-key",
        "duplicate key",
        "A key repeated in one JSON object (two tensors of one name, a metadata key twice, a "
        "field twice in an ignored object) is ambiguous; the reference silently keeps the last, "
        "which may not be the tensor the writer meant. The loader refuses, naming the key.",
    ),
    Difference(
        "empty-name",
        "a tensor has an empty name",
        "An empty tensor name maps to no parameter path; the reference accepts it. The loader "
        "refuses rather than report an unexplained unexpected key.",
    ),
    Difference(
        "shape-not-allocatable",
        "cannot be held in memory",
        "A zero-element tensor whose other dimensions overflow 64 bits in bytes (e.g. "
        "[0, 2**62, 2**62]) passes the reference's checked product (0 * anything = 0), but numpy "
        "and jax cannot build it; the reference's own get_tensor fails on it too. Seen as a "
        "difference only for dtypes numpy lacks, whose bytes come from `deserialize`.",
    ),
)


def decode_input(data: bytes) -> bytes:
    """The file bytes for a fuzz input (see the module docstring)."""
    if not data.startswith(b"{"):
        return data
    header, _, body = data.partition(b"\0")
    return struct.pack("<Q", len(header)) + header + body


def ours(path: Path) -> Outcome:
    """The loader's reading of `path`."""
    try:
        header = read_header(path)
        tensors: Tensors = {}
        with CheckpointSource(path) as src:
            for name, info in header.tensors.items():
                out = src.read_into(name, host_buffer(info.storage_shape, info.np_dtype))
                tensors[name] = (info.dtype, info.shape, out.tobytes())
        return Outcome(True, tensors)
    except CheckpointError as e:
        return Outcome(False, error=str(e))


def _raw_bytes(path: Path) -> dict[str, bytes]:
    return {name: bytes(t["data"]) for name, t in deserialize(path.read_bytes())}


def _deserialized(path: Path) -> Outcome:
    """The reference's Rust parser alone: for a file its Python `safe_open` cannot describe (its
    bindings have no F6_E2M3 / F6_E3M2, which the parser itself sizes and reads)."""
    tensors: Tensors = {
        name: (t["dtype"], tuple(t["shape"]), bytes(t["data"]))
        for name, t in deserialize(path.read_bytes())
    }
    return Outcome(True, tensors)


def reference(path: Path) -> Outcome:
    """safetensors' reading of `path` (numpy bridge; raw bytes where numpy lacks the dtype)."""
    try:
        tensors: Tensors = {}
        raw: dict[str, bytes] | None = None
        with safe_open(str(path), framework="np") as f:
            for name in f.keys():
                sl = f.get_slice(name)
                try:
                    data = f.get_tensor(name).tobytes()
                except AttributeError:  # numpy has no such dtype
                    raw = _raw_bytes(path) if raw is None else raw
                    data = raw[name]
                tensors[name] = (sl.get_dtype(), tuple(sl.get_shape()), data)
        return Outcome(True, tensors)
    except Exception as e:  # noqa: BLE001 (any refusal by the reference is its verdict)
        if "Dtype not understood" in str(e):
            try:
                return _deserialized(path)
            except Exception as again:  # noqa: BLE001
                e = again
        return Outcome(False, error=f"{type(e).__name__}: {e}")


@dataclass(frozen=True)
class Verdict:
    """The comparison of one input: `finding` is None when both agree (or a row explains it)."""

    ours: Outcome
    reference: Outcome
    finding: str | None = None
    deliberate: str | None = None


def _explain(mine: Outcome, ref: Outcome) -> str | None:
    if mine.accepted or not ref.accepted:
        return None
    for row in DELIBERATE_DIFFERENCES:
        if row.our_message in mine.error and row.applies(ref):
            return row.name
    return None


def judge(mine: Outcome, ref: Outcome) -> Verdict:
    """Compare two outcomes of the same file."""
    if mine.accepted != ref.accepted:
        row = _explain(mine, ref)
        if row:
            return Verdict(mine, ref, deliberate=row)
        side = "loader accepts" if mine.accepted else "loader refuses"
        why = ref.error if mine.accepted else mine.error
        return Verdict(mine, ref, f"{side}, safetensors does not: {why}")
    if mine.tensors != ref.tensors:
        diff = sorted(
            n
            for n in mine.tensors.keys() | ref.tensors.keys()
            if mine.tensors.get(n) != ref.tensors.get(n)
        )
        return Verdict(mine, ref, f"both accept but differ on tensors {diff[:5]}")
    return Verdict(mine, ref)


def compare(data: bytes, folder: Path) -> Verdict:
    """Write the fuzz input `data` as a file in `folder` and judge both readings of it."""
    path = folder / "input.safetensors"
    path.write_bytes(decode_input(data))
    return judge(ours(path), reference(path))
