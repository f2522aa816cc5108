"""What `bench run` prints at the end: a table per shape set, or (`--json`) one object per strategy.

Both come from `bench.results.summarize` over the run's own file, so the terminal, the JSON and
the dashboard agree. Medians are over the ok repeats.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.results import Results, summarize
from bench.units import format_bytes
from loader.vocabulary import OK


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _int(value: Any) -> int | None:
    value = _num(value)
    return None if value is None else int(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _json_row(row: pd.Series, phase_names: list[str]) -> dict[str, Any]:
    phases = {
        p: {"wall_s": _num(row.get(f"{p}_wall_s")), "peak_ratio": _num(row.get(f"{p}_peak_ratio"))}
        for p in phase_names
        if _num(row.get(f"{p}_wall_s")) is not None
    }
    return {
        "strategy": row["strategy"], "kind": row["kind"], "shapes": row["shapes"],
        "status": row["status"], "repeats": int(row["repeats"]),
        "ok_repeats": int(row["ok_repeats"]), "dtype": row["dtype"],
        "devices": int(row["devices"]), "processes": int(row["processes"]),
        "checkpoint_bytes": _int(row["checkpoint_bytes"]),
        "baseline_rss_bytes": _int(row["baseline_rss_bytes"]),
        "peak_rss_bytes": _int(row["peak_rss_bytes"]), "peak_ratio": _num(row["peak_ratio"]),
        "wall_s": _num(row["wall_s"]), "wall_s_min": _num(row["wall_s_min"]),
        "wall_s_max": _num(row["wall_s_max"]),
        "throughput_bytes_per_s": _num(row["throughput_bytes_per_s"]),
        "peak_source": _str(row["peak_source"]), "error": _str(row["error"]), "phases": phases,
    }  # fmt: skip


def json_summary(results: Results) -> list[dict[str, Any]]:
    """One object per (shapes, strategy): kind, status, repeats, bytes, ratios, times, phases."""
    summary = summarize(results.phases)
    names = [
        c.removesuffix("_wall_s")
        for c in summary.columns
        if c.endswith("_wall_s") and c != "wall_s"
    ]
    return [_json_row(row, names) for _, row in summary.iterrows()]


def _cells(row: pd.Series) -> list[str]:
    ratio, wall = _num(row["peak_ratio"]), _num(row["wall_s"])
    spread = ""
    if wall is not None and row["ok_repeats"] > 1:
        spread = f" ({_num(row['wall_s_min']):.2f}-{_num(row['wall_s_max']):.2f})"
    tput = _num(row["throughput_bytes_per_s"])
    status = (
        row["status"]
        if row["ok_repeats"] == row["repeats"]
        else f"{row['status']} ({row['ok_repeats']}/{row['repeats']} ok)"
    )
    return [
        str(row["strategy"]),
        f"{ratio:.2f}x" if ratio is not None else "-",
        format_bytes(_num(row["peak_rss_bytes"])),
        f"{wall:.2f}{spread}" if wall is not None else "-",
        f"{tput / 1e9:.2f} GB/s" if tput is not None else "-",
        status,
    ]


def tables(results: Results) -> str:
    """A text table per shape set: strategy, peak over baseline (x checkpoint), peak RSS, wall
    time (median and min-max), throughput, status; then the first error of each failed strategy."""
    summary = summarize(results.phases)
    header = [
        "strategy",
        "(peak-base)/ckpt",
        "peak RSS",
        "wall s (min-max)",
        "throughput",
        "status",
    ]
    blocks = []
    for shapes, group in summary.groupby("shapes", sort=False):
        first = group.iloc[0]
        title = (
            f"{shapes}: checkpoint {format_bytes(first['checkpoint_bytes'])}, "
            f"{int(first['tensors'])} tensors, dtype {first['dtype']}, devices {int(first['devices'])}"
        )
        rows = [header] + [_cells(r) for _, r in group.iterrows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = [title] + [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        lines.insert(2, "  ".join("-" * w for w in widths))
        for _, r in group.iterrows():
            if r["status"] != OK and isinstance(r["error"], str):
                lines.append(
                    f"  {r['strategy']}: {r['status']}: {r['error'].strip().splitlines()[0][:200]}"
                )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else "no results\n"
