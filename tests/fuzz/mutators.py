"""A structure-aware mutator for header-mode fuzz inputs (`{json}` NUL data), for atheris.

Byte mutations alone almost never keep a header valid JSON, so most inputs die in the JSON
parser. Half the time this mutator instead parses the header, changes one thing a writer could get
wrong (a value swapped for an interesting one, a key dropped, duplicated or renamed, a tensor
added, the data section grown or cut) and writes the text back; the other half it leaves the bytes
to libFuzzer's own mutations (`atheris.Mutate`).
"""

from __future__ import annotations

import json
import random

import atheris

INTERESTING: tuple[str, ...] = (
    "0",
    "1",
    "-1",
    "-0",
    "8",
    "4.0",
    "1e2",
    "1e400",
    "NaN",
    "Infinity",
    "null",
    "true",
    '""',
    "[]",
    "{}",
    "[0]",
    "[1,1]",
    "[0,0]",
    "[2,3]",
    "[0,4611686018427387904,4611686018427387904]",
    "[18446744073709551615]",
    "[18446744073709551616]",
    "[9223372036854775808,0]",
    '"F32"',
    '"BF16"',
    '"F8_E4M3"',
    '"F8_E8M0"',
    '"F4"',
    '"F6_E3M2"',
    '"F8_E4M3FNUZ"',
    '"C64"',
    '"BOOL"',
    '"f32"',
    '"\\ud800"',
    '"\\u0000"',
    '"x"',
    '{"a":"b"}',
    '{"a":1}',
    "[" * 130 + "]" * 130,
)
_KEYS = ('"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', '""', '"w"', '"\\udc00"')


def _pick_object(obj: dict, rng: random.Random) -> dict:
    inner = [v for v in obj.values() if isinstance(v, dict)]
    return rng.choice(inner) if inner and rng.random() < 0.7 else obj


def _mutate_json(obj: dict, rng: random.Random) -> str:
    """One mutation of the parsed header `obj`, serialised; markers become raw JSON text."""
    splice: dict[str, str] = {}
    target = _pick_object(obj, rng)
    key = rng.choice(list(target) or ["w"])
    op = rng.randrange(5)
    if op == 0:  # a value replaced by raw interesting JSON
        target[key] = "\x01V\x01"
        splice["\x01V\x01"] = rng.choice(INTERESTING)
    elif op == 1:
        target.pop(key, None)
    elif op == 2:  # a key renamed (possibly to one serde reads differently)
        target["\x01K\x01"] = target.pop(key, None)
        splice["\x01K\x01"] = rng.choice(_KEYS)
    elif op == 3:  # a key duplicated
        target["\x01D\x01"] = target.get(key)
        splice["\x01D\x01"] = json.dumps(key)
    else:  # an offset nudged
        offsets = target.get("data_offsets")
        if isinstance(offsets, list) and offsets and all(isinstance(o, int) for o in offsets):
            offsets[rng.randrange(len(offsets))] += rng.choice((-8, -4, -1, 1, 2, 4, 8))
    text = json.dumps(obj, separators=(",", ":"))
    for marker, raw in splice.items():
        text = text.replace(json.dumps(marker), raw)
    return text


def _mutate_data(body: bytes, rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.2:
        return body[: max(0, len(body) - rng.choice((1, 2, 4, 8)))]
    if r < 0.4:
        return body + bytes(rng.choice((1, 2, 4, 8)))
    return body


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """atheris' custom_mutator: a structured mutation half the time, else libFuzzer's."""
    rng = random.Random(seed)
    if data.startswith(b"{") and rng.random() < 0.5:
        header, _, body = data.partition(b"\0")
        try:
            obj = json.loads(header)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            out = _mutate_json(obj, rng).encode("utf-8", "surrogatepass")
            out += b"\0" + _mutate_data(body, rng)
            if len(out) <= max_size:
                return out
    return atheris.Mutate(data, max_size)
