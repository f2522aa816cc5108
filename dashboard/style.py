"""How the dashboard and the report draw and print things: fixed colours and one number format.

Colours: every strategy keeps one colour on every page and under every filter. It is looked up by
name, never by its position among the strategies shown: registered strategies take the palette in
registry order, any other name (an extra or a peer) a slot chosen from a hash of its name. Phases
use a different, paler palette, so a phase is never mistaken for a strategy. A chart's legend lists
only what it draws (`strategy_scale(shown)`), with those fixed colours.

Numbers: sizes, rates and seconds through `shapes.sizes`, the one formatter the CLI prints with too
(binary units, rates in GiB/s, three significant digits); an unknown figure reads "-", as in the
CLI. A repeat is counted from 1, as the CLI counts it (`repeat_number`); a table's column of
sizes is in one unit (`sizes`), and a multiple is written `1.01x`, with the letter x the CLI and
the judge's sentence use.
Imports neither jax nor streamlit (the static report uses it too).
"""

from __future__ import annotations

import functools
import os
import zlib
from typing import Any

import altair as alt
import pandas as pd

from loader.vocabulary import (
    ASSEMBLE,
    BUILD,
    CAST,
    COMPILE,
    DEQUANTIZE,
    DOWNLOAD,
    KINDS,
    PEER,
    PHASE_ORDER,
    READ,
    REFERENCE,
    STRATEGY,
    STREAM,
    TOTAL,
    TRANSFER,
)
from shapes.sizes import (
    MISSING,
    column_unit,
    format_bytes,
    format_bytes_in,
    format_rate,
    format_seconds,
)

GIB = float(1 << 30)
MIB = float(1 << 20)
# Sixteen hues picked greedily for the largest CIELAB distance from each other, the host line's red
# and the reference grey (none too pale on white): the registered strategies take them in registry
# order, so any two of them are told apart at a glance (tests/dashboard: ΔE76 of at least 25).
STRATEGY_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#f032e6",
    "#8db600",
    "#008856",
    "#e377c2",
    "#9a6324",
    "#17becf",
    "#4363d8",
    "#c2b280",
    "#f99379",
    "#3cb44b",
    "#808000",
    "#911eb4",
    "#875692",
    "#b3446c",
    "#d62728",
    "#000075",
)
REFERENCE_COLOR = "#7f7f7f"
# A pastel palette for phases (bands, stacked bars; ColorBrewer Set3): never one of the strategy
# hues above, and no two phases alike (build and cast were two near-identical pale blues).
PHASE_COLORS = {
    DOWNLOAD: "#bc80bd",  # the `download` reference: a remote file fetched whole first
    BUILD: "#80b1d3",
    READ: "#fdb462",
    CAST: "#fb8072",
    TRANSFER: "#b3de69",
    DEQUANTIZE: "#fccde5",  # a quantized weight made a float leaf (on the host or the device)
    ASSEMBLE: "#bebada",
    STREAM: "#ffed6f",
    COMPILE: "#8dd3c7",  # `bench run --compile`: the forward lowered and compiled
    TOTAL: "#d9d9d9",
}
MEMORY_KINDS = {"anonymous": "#3f51b5", "file-backed": "#ffa726"}
# the path a user writes first (read everything, then build): the headline's yardstick
NAIVE = "eager"


def _catalog() -> dict[str, str]:
    """Registered strategy name -> kind (`strategy`, `reference`, `peer`), in registry order."""
    return _catalog_for(os.environ.get("LOADBENCH_EXTRA_STRATEGIES", ""))


@functools.cache
def _catalog_for(extra: str) -> dict[str, str]:
    """`_catalog` for one value of the extra-strategies variable (the registry depends on it)."""
    try:
        from bench import strategies

        entries = strategies.catalog()
    except Exception:  # noqa: BLE001 - a results-only view still draws, with hashed colours
        return {}
    return {name: _vocab_kind(e.kind) for name, e in entries.items()}


def _vocab_kind(kind: str | None) -> str:
    """A registry or results kind in the vocabulary's words (`model` is the older `strategy`)."""
    return kind if kind in (STRATEGY, REFERENCE, PEER) else STRATEGY


def base_name(label: str) -> str:
    """`sharded (2 processes)`, `pipelined · s3 · 1Gbit · c16` -> `sharded`, `pipelined`: the
    registered name behind a displayed label."""
    return label.split(" (", 1)[0].split(" · ", 1)[0]


def kind_of(name: str, recorded: str | None = None) -> str:
    """The kind of a strategy: what its results row recorded, else what the registry says."""
    if isinstance(recorded, str) and recorded:
        return _vocab_kind(recorded)
    return _catalog().get(base_name(name), STRATEGY)


def with_kind(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with a `kind` column (kept where results recorded one, else from the registry)."""
    recorded = rows["kind"] if "kind" in rows.columns else pd.Series(None, index=rows.index)
    kinds = [kind_of(s, r) for s, r in zip(rows["strategy"], recorded, strict=True)]
    return rows.assign(kind=kinds)


def strategy_color(name: str) -> str:
    """The one colour of a strategy (by name), whatever else is shown."""
    name = base_name(name)
    catalog = _catalog()
    if catalog.get(name) == REFERENCE:
        return REFERENCE_COLOR
    names = [n for n, k in catalog.items() if k != REFERENCE]
    if name in names:
        return STRATEGY_PALETTE[names.index(name) % len(STRATEGY_PALETTE)]
    spare = len(STRATEGY_PALETTE) - len(names)  # unregistered names take the slots left over
    if spare <= 0:
        return STRATEGY_PALETTE[zlib.crc32(name.encode()) % len(STRATEGY_PALETTE)]
    return STRATEGY_PALETTE[len(names) + zlib.crc32(name.encode()) % spare]


def legend_order(names) -> list[str]:
    """Strategies as a legend lists them: reference lines, ours, then peers; by name within each."""
    rank = {k: i for i, k in enumerate(KINDS)}
    unique = dict.fromkeys(str(s) for s in names)
    return sorted(unique, key=lambda n: (rank.get(kind_of(n), len(KINDS)), n))


def strategy_scale(shown) -> alt.Scale:
    """A colour scale whose domain is exactly the strategies shown, each in its fixed colour; a
    strategy shown over several routes (`pipelined · s3 · 1Gbit · c1`, `... · c64`) takes its
    colour for the first and lighter shades of it for the others, in order."""
    domain = legend_order(shown)
    seen: dict[str, int] = {}
    colours = []
    for label in domain:
        nth = seen[base_name(label)] = seen.get(base_name(label), -1) + 1
        colours.append(_lighter(strategy_color(label), min(ROUTE_SHADE * nth, 0.75)))
    return alt.Scale(domain=domain, range=colours)


ROUTE_SHADE = 0.35  # how much white each further route of one strategy mixes into its colour


def _lighter(colour: str, white: float) -> str:
    """`#rrggbb` mixed with `white` (0 to 1) of white."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * white):02x}" for c in rgb)


def phase_scale(shown) -> alt.Scale:
    """The phase palette over the phases shown, in load order."""
    present = set(shown)
    domain = [p for p in PHASE_ORDER if p in present] + sorted(present - set(PHASE_ORDER))
    return alt.Scale(domain=domain, range=[PHASE_COLORS.get(p, "#eeeeee") for p in domain])


def byte_unit(largest: float | None) -> tuple[str, float]:
    """(`GiB`, 2**30) when `largest` is at least a GiB, else (`MiB`, 2**20): one rule everywhere."""
    return ("GiB", GIB) if largest is not None and abs(largest) >= GIB else ("MiB", MIB)


def number_format(unit: str) -> str:
    """The d3 format of a byte unit: GiB with 2 decimals, MiB with 1."""
    return ",.2f" if unit == "GiB" else ",.1f"


UNKNOWN = MISSING  # an unknown figure, as the CLI writes it (`shapes.sizes.MISSING`)


def size(n: float | None) -> str:
    """Bytes as `1.23 GiB` or `457 MiB` (`shapes.sizes.format_bytes`; `-` when unknown)."""
    return UNKNOWN if n is None or pd.isna(n) else format_bytes(float(n))


def sizes(column: pd.Series) -> pd.Series:
    """A table's column of sizes in one unit, the one its largest value reaches (`column_unit`):
    `0.838 GiB` beside `1.35 GiB`, never `858 MiB` beside `1.35 GiB`; `-` where unknown.

    Example:
        >>> sizes(pd.Series([858 << 20, 1.35 * 2**30, None])).tolist()
        ['0.838 GiB', '1.35 GiB', '-']
    """
    values = pd.to_numeric(column, errors="coerce")
    unit = column_unit(values.dropna().tolist())
    return values.map(lambda n: UNKNOWN if pd.isna(n) else format_bytes_in(float(n), unit))


def repeat_number(stored: Any) -> int:
    """A repeat as a user reads it, counted from 1 as `bench run` prints it (`repeat 1`): the
    stored `repeat` field counts from 0 and keeps doing so."""
    return int(stored) + 1


def seconds(s: float | None) -> str:
    """Seconds as `1.90 s`, `0.000541 s` (`shapes.sizes.format_seconds`; `-` when unknown)."""
    return UNKNOWN if s is None or pd.isna(s) else format_seconds(float(s))


def ratio(r: float | None) -> str:
    """A multiple: `1.01x`, the letter x as the CLI and the judge's sentence write it (`-` when
    unknown)."""
    return UNKNOWN if r is None or pd.isna(r) else f"{float(r):.2f}x"


def rate(bytes_per_s: float | None) -> str:
    """Throughput as `1.88 GiB/s`, `0.00284 GiB/s` (`shapes.sizes.format_rate`; `-` when
    unknown)."""
    return (
        UNKNOWN if bytes_per_s is None or pd.isna(bytes_per_s) else format_rate(float(bytes_per_s))
    )
