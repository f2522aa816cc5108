"""Several processes over one link: each process's bytes received against its share, and the
aggregate throughput of them all.

A multi-process `sharded` load from a remote source (`bench run --source http|s3 --processes
2,4`) has each process request only its own index ranges: its share (`share_bytes`, the bytes of
its distinct ranges) plus its headers (`header_bytes`). `process_shares` gives, per configuration
and process, the medians over the ok repeats of what each received against that; `share_lines`
says it under the summary's block, with the aggregate: every process's bytes over the slowest
process's wall (the summed row's `received_bytes_per_s`), held against the link's bandwidth where
the link is shaped. The processes share that one link (`bench.link`: one namespace, one veth
pair, one token bucket), so the aggregate, not one process, is what the link bounds. No jax.
"""

from __future__ import annotations

import pandas as pd

from bench.link import UNSHAPED
from bench.link.shaping import Link
from bench.units import format_bytes, format_rate
from bench.vocabulary import OK
from loader.vocabulary import TOTAL

#: the per-process figures `process_shares` gives (medians over the ok repeats)
FIGURES = ("bytes_received", "share_bytes", "header_bytes", "wall_s")


def process_label(strategy: str, processes: int) -> str:
    """`sharded (2 processes)` for a multi-process row; the strategy alone for one process.

    Example:
        >>> process_label("sharded", 4)
        'sharded (4 processes)'
    """
    return f"{strategy} ({processes} processes)" if processes > 1 else strategy


def process_shares(phases: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per (configuration `keys`, process) of the multi-process remote loads in `phases`
    that report a share: the medians of `FIGURES` over their ok repeats, `runs` (how many), and
    `over_share` = received / (share + headers) - 1."""
    rows = phases[
        (phases["phase"] == TOTAL)
        & (phases["status"] == OK)
        & (pd.to_numeric(phases["processes"]) > 1)
        & (phases["process_index"] >= 0)
        & phases["share_bytes"].notna()
        & phases["bytes_received"].notna()
    ]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "process_index", *FIGURES, "runs", "over_share"])
    numeric = rows.assign(**{f: pd.to_numeric(rows[f]) for f in FIGURES})
    grouped = numeric.groupby([*keys, "process_index"], sort=True, dropna=False)
    out = grouped[list(FIGURES)].median().join(grouped.size().rename("runs")).reset_index()
    needed = out["share_bytes"] + out["header_bytes"].fillna(0)
    return out.assign(over_share=out["bytes_received"] / needed - 1)


def _aggregate(row: pd.Series) -> str:
    """`aggregate 0.110 GiB/s (every process's bytes over the slowest's wall), 0.94x the 1Gbit
    link they share`."""
    rate = row.get("received_bytes_per_s")
    if rate is None or pd.isna(rate):
        return "aggregate unknown (no ok repeat)"
    text = f"aggregate {format_rate(float(rate))} (all the bytes over the slowest one's wall)"
    link = row.get("link")
    if isinstance(link, str) and link != UNSHAPED:
        text += f", {float(rate) / Link.parse(link).bytes_per_s:.2f}x the {link} link they share"
    else:
        text += ", over loopback (no link shaped)"
    return text


def share_lines(summary_row: pd.Series, processes: pd.DataFrame) -> list[str]:
    """Under a summary block, for one multi-process row (`summary_frame`'s): its aggregate
    throughput, then each process's bytes received against its share plus headers, from its
    configuration's `process_shares` rows (none: no lines)."""
    if processes.empty:
        return []
    label = process_label(str(summary_row["strategy"]), int(summary_row["processes"]))
    runs = int(processes["runs"].min())
    head = f"  {label}, medians of {runs} run{'s' if runs != 1 else ''}: "
    lines = [head + _aggregate(summary_row)]
    for _, p in processes.iterrows():
        needed = p["share_bytes"] + (0 if pd.isna(p["header_bytes"]) else p["header_bytes"])
        lines.append(
            f"    process {int(p['process_index'])}: received {format_bytes(p['bytes_received'])} "
            f"against its share + headers {format_bytes(needed)} ({p['over_share']:+.2%}) "
            f"in {p['wall_s']:.2f} s"
        )
    return lines
