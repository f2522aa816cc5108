"""Sizes, rates and seconds as people read them: one unit family and one rule for digits.

Sizes are binary (`GiB`, `MiB`, `KiB`), rates are `GiB/s` (never decimal `GB/s`, about 7% apart
from `GiB/s`), and both are written in three significant digits, in fixed point, never in exponent
form and never rounded to zero: `2.34 GiB`, `16.0 GiB`, `443 KiB`, `0.00284 GiB/s`. The bench's
CLI, the dashboard and the HTML report all print through these functions, so one figure reads the
same everywhere. No jax, no numpy: `bench`, `dashboard` and `shapes` import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MISSING = "-"  # what an unknown figure (None or NaN) prints as
DIGITS = 3  # significant digits of a size or a rate
UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
GIB = 1 << 30


def significant(value: float, digits: int = DIGITS) -> str:
    """`value` with `digits` significant digits in fixed point; every whole digit is kept.

    Example:
        >>> significant(2.3456), significant(16), significant(0.0028412), significant(1234.5)
        ('2.35', '16.0', '0.00284', '1234')
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    if decimals and abs(float(text)) >= 10 ** (digits - decimals):  # 9.996 rounded up to 10.00
        text = f"{value:.{decimals - 1}f}"
    return text


def format_bytes(n: float | None) -> str:
    """A size in the largest binary unit it reaches, three significant digits: `1.50 GiB`,
    `16.0 GiB`, `443 KiB`, `512 B`; `-` for None or NaN.

    Example:
        >>> format_bytes(3 << 30), format_bytes(443_520), format_bytes(None)
        ('3.00 GiB', '433 KiB', '-')
    """
    if n is None or n != n:
        return MISSING
    for unit, size in UNITS:
        if abs(n) >= size:
            return f"{significant(n / size)} {unit}"
    return f"{int(n)} B"


def column_unit(values: Iterable[float | None]) -> tuple[str, int]:
    """The one unit for a column of sizes: the largest binary unit its largest known value
    reaches (`("GiB", 2**30)`; `("B", 1)` for none), so that a column never mixes units.

    Example:
        >>> column_unit([900 << 20, 3 << 30, None])
        ('GiB', 1073741824)
    """
    known = [abs(float(v)) for v in values if v is not None and v == v]
    largest = max(known, default=0.0)
    return next(((unit, size) for unit, size in UNITS if largest >= size), ("B", 1))


def format_bytes_in(n: float | None, unit: tuple[str, int]) -> str:
    """A size in `unit` (from `column_unit`), three significant digits: `0.838 GiB`; `-` for None
    or NaN.

    Example:
        >>> format_bytes_in(858 << 20, ("GiB", 1 << 30))
        '0.838 GiB'
    """
    if n is None or n != n:
        return MISSING
    name, size = unit
    return f"{int(n)} B" if size == 1 else f"{significant(float(n) / size)} {name}"


def format_gib(n: float | None) -> str:
    """A size in GiB whatever its size (a table whose column is in GiB), three significant
    digits: `2.00 GiB`, `0.000413 GiB`; `-` for None or NaN.

    Example:
        >>> format_gib(443_520)
        '0.000413 GiB'
    """
    if n is None or n != n:
        return MISSING
    return f"{significant(float(n) / GIB)} GiB"


def format_rate(bytes_per_s: float | None) -> str:
    """A rate in GiB/s whatever its size, three significant digits: `1.88 GiB/s`,
    `0.116 GiB/s` (1 Gbit/s), `0.00284 GiB/s`; `-` for None or NaN.

    Example:
        >>> format_rate(2 * 10**9)
        '1.86 GiB/s'
    """
    if bytes_per_s is None or bytes_per_s != bytes_per_s:
        return MISSING
    return f"{significant(float(bytes_per_s) / GIB)} GiB/s"


def format_seconds(s: float | None) -> str:
    """Seconds with two decimals (`1.20 s`, `20.00 s`), and in three significant digits below
    0.1 s, where two decimals would keep one digit or none (`0.0541 s`, `0.000541 s`); `-` for
    None or NaN.

    Example:
        >>> format_seconds(1.2), format_seconds(0.000541)
        ('1.20 s', '0.000541 s')
    """
    if s is None or s != s:
        return MISSING
    value = float(s)
    return f"{value:.2f} s" if abs(value) >= 0.1 or value == 0 else f"{significant(value)} s"
