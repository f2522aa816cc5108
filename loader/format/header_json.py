"""Decode a header's JSON as strictly as the reference parser (serde_json inside safetensors).

Python's `json` accepts text that serde_json refuses, and reads some numbers differently. The header
reader (`loader.format.header`) must give the same verdict as `safetensors.safe_open`, so this
decoder closes each gap (each was found by the differential fuzzer, `tests/fuzz/`):

- `NaN`, `Infinity`, `-Infinity` are not JSON: refused.
- A float literal beyond f64 range (`1e400`) is refused ("number out of range"); a denormal
  underflow (`1e-400`) reads as 0.0, as there.
- `-0` and integers outside [-2**63, 2**64 - 1] are read as floats, as serde_json does, so a shape
  or offset written that way is refused as "not an integer" (serde: "invalid type: floating point").
- Nesting deeper than `MAX_DEPTH` brackets is refused (serde_json's recursion limit).
- A lone UTF-16 surrogate escape (`"\\ud800"`) is refused: names and metadata must be valid Unicode
  that encodes as UTF-8.
- A key repeated in one object is refused (`DuplicateKeyError`); the reference keeps the last
  silently, see `tests/fuzz/differential.py` DELIBERATE_DIFFERENCES.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

#: serde_json refuses a 128th level of `[`/`{` nesting; 127 levels parse.
MAX_DEPTH = 127
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class HeaderJSONError(ValueError):
    """The header text is not JSON that the reference parser accepts."""


class DuplicateKeyError(HeaderJSONError):
    """A key appears twice in one JSON object."""


def _constant(name: str) -> float:
    raise HeaderJSONError(f"{name} is not a JSON value")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise HeaderJSONError(f"number {text[:24]} is out of range for a 64-bit float")
    return value


def _int(text: str) -> int | float:
    if text == "-0":
        return -0.0
    value = int(text)
    return value if I64_MIN <= value <= U64_MAX else _float(text)


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _depth(text: str) -> int:
    """Deepest bracket nesting of valid JSON `text` (brackets inside strings do not count)."""
    codes = np.frombuffer(_STRING.sub("", text).encode("utf-8"), dtype=np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
    step -= np.isin(codes, (ord("]"), ord("}")))
    return int(step.cumsum().max(initial=0))


def loads(text: str) -> object:
    """Parse header JSON `text`; `HeaderJSONError` where serde_json would refuse it too."""
    try:
        obj = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
        )
    except RecursionError:
        raise HeaderJSONError(f"nesting deeper than {MAX_DEPTH} levels") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise HeaderJSONError(f"nesting deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise HeaderJSONError(
                "a string holds a lone UTF-16 surrogate escape; names and metadata must be "
                "valid Unicode (encodable as UTF-8)"
            ) from None
    return obj
