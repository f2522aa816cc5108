"""Byte sizes as people type and read them: `4GiB`, `500MB`, `2G`, `1.5 GiB`, `123456B`.

A number without a unit is refused (`--host-ram 4` is not 4 bytes): the message shows `4GiB`.
A size is taken as written (`4GB` is 4 * 10**9 bytes, `4GiB` and `4G` are 4 * 2**30), and
`as_read` says how a decimal one was read ("4GB = 3.73 GiB") where that differs from how it reads.
"""

from __future__ import annotations

import re

from bench.errors import BenchError

# the one formatter of sizes, rates and seconds (`shapes.sizes`): the bench's callers import it here
from shapes.sizes import (  # noqa: F401
    column_unit,
    format_bytes,
    format_bytes_in,
    format_gib,
    format_rate,
    format_seconds,
    significant,
)

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "kb": 10**3,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 10**6,
    "g": 1 << 30,
    "gib": 1 << 30,
    "gb": 10**9,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": 10**12,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int, *, what: str = "size") -> int:
    """Bytes in `text` (`4GiB`, `4G` = GiB, `4GB` = 10**9, `512B`); BenchError naming `what` for a
    missing unit or a size of zero."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS or not unit:
        raise BenchError(
            f"{what} {text!r}: not a size with a unit; write e.g. {what} 4GiB "
            "(or 512MiB, 8GB, 1000000B for bytes)"
        )
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise BenchError(f"{what} {text!r}: must be more than zero bytes, e.g. {what} 4GiB")
    return size


DECIMAL_UNITS = ("kb", "mb", "gb", "tb")


def as_read(text: str | None, nbytes: int) -> str:
    """`nbytes` as the answers print it, with the size as typed where its unit was decimal or
    bytes: `as_read("4GB", 4 * 10**9)` -> "4GB = 3.73 GiB"; `as_read("4GiB", 4 << 30)` ->
    "4.00 GiB".

    Example:
        >>> as_read("4GB", parse_size("4GB"))
        '4GB = 3.73 GiB'
    """
    match = _SIZE.match(str(text)) if text else None
    unit = match.group(2).lower() if match else ""
    if match and unit in (*DECIMAL_UNITS, "b"):
        return f"{str(text).strip()} = {format_bytes(nbytes)}"
    return format_bytes(nbytes)


def parse_speed(text: str, *, what: str = "speed") -> int:
    """Bytes per second in `text` (`300MB/s`, `1.5GB/s`; the `/s` may be left out), as
    `parse_size` reads sizes; BenchError naming `what` with a speed to write (never a size)."""
    bare = str(text).strip().removesuffix("/s")
    match = _SIZE.match(bare)
    unit = match.group(2).lower() if match else None
    if not match or not unit or unit not in _UNITS:
        raise BenchError(
            f"{what} {text!r}: not a speed with a unit; write e.g. {what} 300MB/s "
            "(or 1.5GB/s, 500MiB/s)"
        )
    return parse_size(bare, what=what)
