"""The safetensors header: one validating reader, and the writer.

The records it reads into are in `loader.format.records`, the dtype table in `loader.format.dtypes`,
the naming of foreign formats (zip, pickle, LFS pointer) in `loader.format.foreign`.

Every path in loadbench that reads a header (the loader, the strategies, `shapes inspect`, the Hub
fetch) goes through `parse_header` / `read_header`, so a hostile file is refused in one place.

Layout of a file: an unsigned little-endian u64 N, then N bytes of UTF-8 JSON (an object mapping
each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional "__metadata__"
string-to-string map), then the data bytes. Offsets are relative to the end of the header; the
tensors tile the data section contiguously, with no gap and no overlap.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping

from loader.errors import HeaderError
from loader.format import header_json
from loader.format.dtypes import ALL_DTYPES, bits, storage_bytes
from loader.format.foreign import SNIFF_BYTES, sniff_foreign
from loader.format.records import Header, TensorInfo

#: Largest header we accept. The reference implementation refuses headers over 100 MB; real
#: headers are far smaller (Llama-3.1-8B's shards: under 10 kB; sa3: ~75 kB).
MAX_HEADER_BYTES = 100 * 1000 * 1000
METADATA_KEY = "__metadata__"
ALIGNMENT = 8


def _fail(source: str, what: str) -> HeaderError:
    return HeaderError(f"{source}: {what}")


def _length_problem(prefix: bytes, file_size: int | None) -> str | None:
    if len(prefix) < 8:
        return f"file is {len(prefix)} bytes, too short for the 8-byte header length"
    (n,) = struct.unpack("<Q", prefix[:8])
    # A text or other file read as a length gives an absurd number: call it what it is.
    looks = "not a safetensors file (its first 8 bytes are not a header length): "
    if n > MAX_HEADER_BYTES:
        return f"{looks}header length {n} bytes exceeds the limit of {MAX_HEADER_BYTES} bytes"
    if file_size is not None and 8 + n > file_size:
        return f"{looks}header length {n} runs past the end of the {file_size}-byte file"
    if n < 2:
        return f"header length {n} is too short for a JSON object"
    return None


def _foreign_or(prefix: bytes, source: str, what: str) -> HeaderError:
    """The refusal to raise: name a foreign format if the bytes are one, else `what`.

    Sniffing only explains a refusal: a valid header length can begin with a foreign magic
    (a 640-byte header starts `80 02`, a pickle's opening), so a file is never refused for it.
    """
    foreign = sniff_foreign(prefix)
    if foreign:
        return _fail(source, f"not a safetensors file: it is {foreign}. Nothing was unpickled.")
    return _fail(source, what)


def header_length(prefix: bytes, *, source: str, file_size: int | None = None) -> int:
    """Decode and bound the u64 header length from the first 8 bytes of a file."""
    problem = _length_problem(prefix, file_size)
    if problem:
        raise _foreign_or(prefix, source, problem)
    (length,) = struct.unpack("<Q", prefix[:8])
    return int(length)


def check_header_start(head: bytes, length: int, *, source: str) -> None:
    """Refuse, before the rest is fetched, a header whose first bytes (`head`, up to its
    `length`) cannot begin one: a header is JSON text that begins with `{`, and no byte of JSON
    text is a control byte other than tab, newline and carriage return. A length prefix that
    points into tensor bytes meets binary data within the first bytes read."""
    if head[:1] != b"{":
        raise _fail(source, f"header does not begin with '{{' (header length {length})")
    bad = re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", head[:length])
    if bad is not None:
        raise _fail(
            source,
            f"header length {length} runs into binary data: byte {bad.start()} of the header "
            f"is 0x{bad.group()[0]:02x}, which JSON text never holds; the length prefix is "
            "corrupt (write the file again)",
        )


def _parse_json(raw: bytes | memoryview, source: str) -> dict[str, object]:
    try:
        text = str(raw, "utf-8")
    except UnicodeDecodeError as e:
        raise _fail(source, f"header is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        obj = header_json.loads(text)
    except header_json.DuplicateKeyError as e:
        raise _fail(source, f"{e} in header") from None
    except ValueError as e:
        raise _fail(source, f"header is not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise _fail(source, f"header must be a JSON object, got {type(obj).__name__}")
    return obj


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _parse_metadata(value: object, source: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _fail(source, "__metadata__ must map strings to strings")
    return dict(value)


_MAX_DIM = 2**63 - 1  # numpy and jax index with signed 64-bit integers


def _tensor_bits(shape: list[int], nbits: int) -> int | None:
    """Bit size of a tensor, or None where the reference overflows (u64 checked product) or
    numpy could not allocate it (a dimension, or the product of the non-zero dimensions in bytes,
    beyond 2**63 - 1)."""
    count, nonzero = 1, max(nbits // 8, 1)
    for d in shape:
        count *= d
        nonzero *= d or 1
        if count > header_json.U64_MAX or d > _MAX_DIM:
            return None
    if count * nbits > header_json.U64_MAX or nonzero > _MAX_DIM:
        return None
    return count * nbits


def _parse_entry(name: str, entry: object, source: str) -> TensorInfo:
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where}: entry must be an object with dtype, shape, data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in ALL_DTYPES:
        raise _fail(
            source, f"{where}: unknown dtype {dtype!r}; expected one of {sorted(ALL_DTYPES)}"
        )
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise _fail(source, f"{where}: shape {shape!r} must be a list of non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise _fail(
            source, f"{where}: data_offsets {offsets!r} must be [begin, end] with 0 <= begin <= end"
        )
    nbits = _tensor_bits(shape, bits(dtype))
    if nbits is None:
        raise _fail(
            source,
            f"{where}: shape {shape} of {dtype} cannot be held in memory (its element count or "
            f"byte size overflows 64 bits, or a dimension exceeds {_MAX_DIM})",
        )
    if nbits % 8:
        raise _fail(
            source,
            f"{where}: shape {shape} of {dtype} ({bits(dtype)} bits an element) holds {nbits} "
            "bits, which do not end on a byte boundary; the shape or the dtype is wrong",
        )
    expected = nbits // 8
    if offsets[1] - offsets[0] != expected:
        raise _fail(
            source,
            f"{where}: shape {shape} of {dtype} needs {expected} bytes but data_offsets "
            f"{offsets} span {offsets[1] - offsets[0]}",
        )
    return TensorInfo(name, dtype, tuple(shape), offsets[0], offsets[1])


def _check_tiling(tensors: Iterable[TensorInfo], source: str, data_size: int | None) -> None:
    cursor = 0
    for info in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if info.begin != cursor:
            kind = (
                "overlaps the previous tensor" if info.begin < cursor else "leaves a gap before it"
            )
            raise _fail(
                source,
                f"tensor {info.name!r}: data_offsets begin {info.begin} {kind} (expected {cursor})",
            )
        cursor = info.end
    if data_size is not None and cursor != data_size:
        raise _fail(
            source,
            f"tensors cover {cursor} data bytes but the file holds {data_size} after the header",
        )


def parse_header(
    raw: bytes | memoryview,
    *,
    source: str,
    data_size: int | None = None,
    header_len: int | None = None,
) -> Header:
    """Validate the JSON header bytes `raw`.

    Args:
        raw: the header's JSON bytes (without the 8-byte length prefix); a memoryview is
            parsed without a copy of it.
        source: the file or URL the bytes came from, quoted in every error.
        data_size: bytes after the header in the file, if known; the tensors must tile exactly that.
        header_len: the declared header length (defaults to `len(raw)`).

    Returns:
        A `Header` whose offsets are proven in bounds, contiguous and consistent with shapes.
    """
    obj = _parse_json(raw, source)
    metadata = _parse_metadata(obj.pop(METADATA_KEY, None), source)
    tensors = {}
    for name, entry in obj.items():
        if not name:
            raise _fail(source, "a tensor has an empty name")
        tensors[name] = _parse_entry(name, entry, source)
    _check_tiling(tensors.values(), source, data_size)
    n = len(raw) if header_len is None else header_len
    return Header(source, tensors, metadata, data_start=8 + n, header_bytes=n)


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate the header of the `.safetensors` file at `path` (reads the header only)."""
    source = os.fspath(path)
    try:
        size = os.path.getsize(source)
        with open(source, "rb") as fh:
            prefix = fh.read(SNIFF_BYTES)
            n = header_length(prefix, source=source, file_size=size)
            fh.seek(8)
            raw = fh.read(n)
    except OSError as e:
        raise HeaderError(f"{source}: cannot read ({e.strerror or e})") from None
    if len(raw) != n:
        raise _fail(source, f"header truncated: expected {n} bytes, read {len(raw)}")
    try:
        return parse_header(raw, source=source, data_size=size - 8 - n, header_len=n)
    except HeaderError as e:
        if sniff_foreign(prefix):
            raise _foreign_or(prefix, source, str(e)) from None
        raise


def encode_header(
    entries: Mapping[str, tuple[str, tuple[int, ...]]], metadata: Mapping[str, str] | None
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Build a header for tensors laid out in the given order.

    Args:
        entries: name -> (dtype name, shape), in the order the data will be written.
        metadata: the `__metadata__` map (strings only), or None.

    Returns:
        (header, offsets): the header is the 8-byte length plus the JSON padded with spaces to a
        multiple of 8; offsets map each name to (begin, end).
    """
    obj: dict[str, object] = {}
    if metadata:
        obj[METADATA_KEY] = _parse_metadata(dict(metadata), "metadata")
    offsets: dict[str, tuple[int, int]] = {}
    cursor = 0
    for name, (dtype, shape) in entries.items():
        nbytes = storage_bytes(dtype, tuple(shape))
        if nbytes is None:
            raise HeaderError(
                f"tensor {name!r}: {math.prod(shape)} {dtype} elements do not fill whole bytes"
            )
        offsets[name] = (cursor, cursor + nbytes)
        obj[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [cursor, cursor + nbytes],
        }
        cursor += nbytes
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    body += b" " * (-len(body) % ALIGNMENT)
    return struct.pack("<Q", len(body)) + body, offsets
