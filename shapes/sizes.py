"""Byte sizes as people read them, in one unit family (GiB, MiB, KiB) across CLI and dashboard."""

from __future__ import annotations


def format_bytes(n: float | None) -> str:
    """`1.50 GiB`, `12.0 MiB`, `512 B`; `-` for None/NaN."""
    if n is None or n != n:
        return "-"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}" if unit in ("TiB", "GiB") else f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
