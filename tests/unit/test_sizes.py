"""One formatter of sizes, rates and seconds (`shapes.sizes`): binary units, rates in GiB/s, three
significant digits, never an exponent and never a figure rounded to zero; and no view (the
dashboard, the report, the CLI's commands) writes a unit of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shapes.sizes import format_bytes, format_gib, format_rate, format_seconds, significant

GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.3456, "2.35"),
        (16, "16.0"),
        (235.4, "235"),
        (1234.5, "1234"),  # whole digits are never cut
        (0.0028412, "0.00284"),
        (0.000034567, "0.0000346"),  # never `3.46e-05`
        (9.996, "10.0"),  # rounded up into the next decade: still three digits
        (0.0099996, "0.0100"),
        (-2.5, "-2.50"),
        (0, "0"),
    ],
)
def test_three_significant_digits_in_fixed_point(value, text):
    assert significant(value) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (3 * GIB, "3.00 GiB"),
        (16 * GIB, "16.0 GiB"),
        (int(2.34 * GIB), "2.34 GiB"),
        (443_520, "433 KiB"),
        (int(1.5 * MIB), "1.50 MiB"),
        (512 * MIB + 100 * KIB, "512 MiB"),
        (1 << 40, "1.00 TiB"),
        (1000 * GIB, "1000 GiB"),
        (512, "512 B"),
        (-int(2.5 * GIB), "-2.50 GiB"),  # a negative headroom
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_a_size_reads_in_the_largest_binary_unit_it_reaches(n, text):
    assert format_bytes(n) == text


def test_a_size_in_gib_whatever_its_size_never_prints_as_zero():
    assert format_gib(443_520) == "0.000413 GiB"
    assert format_gib(35_000) == "0.0000326 GiB"
    assert format_gib(int(1.5 * GIB)) == "1.50 GiB" and format_gib(None) == "-"


def test_a_rate_is_in_gib_per_second_never_in_decimal_gb():
    assert format_rate(2 * 10**9) == "1.86 GiB/s"  # 2 GB/s: 7% under "2.00"
    assert format_rate(10**9 / 8) == "0.116 GiB/s"  # a 1 Gbit/s link
    assert format_rate(0.00284 * GIB) == "0.00284 GiB/s"  # never "2.91 MiB/s" beside it
    assert format_rate(None) == "-"


def test_a_tiny_time_never_prints_as_zero_seconds():
    assert format_seconds(1.2) == "1.20 s" and format_seconds(20) == "20.00 s"
    assert format_seconds(0.000541) == "0.000541 s"  # a tiny checkpoint's ceiling
    assert format_seconds(0.0541) == "0.0541 s" and format_seconds(0.26) == "0.26 s"
    assert format_seconds(None) == "-"


# A unit written by hand in an output: decimal `{x:.2f} GB/s` or `500 MB/s`, or a size divided down
# to a unit in a format (`{n / (1 << 20):.1f} MiB`, `{n / 2**30:.1f}`). Typed inputs (`1.5GB/s`)
# are not outputs.
HAND_MADE = re.compile(r"(}|\d ) ?[GM]B/s|/ ?\(?(1 ?<< ?|2 ?\*\* ?)[123]0\)?:\.")
# The views that print through the formatter.
VIEWS = [
    *sorted((ROOT / "dashboard").rglob("*.py")),
    *sorted((ROOT / "bench" / "analysis" / "summary").glob("*.py")),
    ROOT / "bench" / "analysis" / "decision_words.py",
    ROOT / "bench" / "analysis" / "shares.py",
    ROOT / "bench" / "analysis" / "target.py",
    ROOT / "bench" / "analysis" / "remote.py",
    ROOT / "bench" / "commands" / "probe.py",
    ROOT / "bench" / "commands" / "recommend.py",
    ROOT / "shapes" / "cli.py",
]


@pytest.mark.parametrize("path", VIEWS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_view_writes_a_unit_of_its_own(path):
    code = [
        (i, line)
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and '"""' not in line
    ]
    found = [f"{path.name}:{i}: {line.strip()}" for i, line in code if HAND_MADE.search(line)]
    assert found == [], "print sizes and rates through shapes.sizes"
