"""The bench summary as JSON (`bench run --json`, `show --json`): one object per strategy and
configuration (`json_summary`), and the judge's decision per configuration with its sentence and
details (`json_decisions`), from the rows `frame` gives.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.analysis.decision_words import decision_json
from bench.analysis.shares import process_shares
from bench.analysis.summary.frame import (
    as_float,
    as_int,
    as_str,
    blocks,
    configuration_keys,
    file_dtype,
    first_of,
    flag,
    model_dtype,
    same_configuration,
    summary_frame,
)
from bench.link import FILE_SOURCE
from bench.records.results import Results


def _json_phases(row: pd.Series, phase_names: list[str]) -> dict[str, dict[str, float | None]]:
    return {
        p: {
            "wall_s": as_float(row.get(f"{p}_wall_s")),
            "peak_ratio": as_float(row.get(f"{p}_peak_ratio")),
        }
        for p in phase_names
        if as_float(row.get(f"{p}_wall_s")) is not None
    }


def _json_process(p: pd.Series) -> dict[str, Any]:
    return {
        "process_index": int(p["process_index"]),
        **{k: as_int(p[k]) for k in ("bytes_received", "share_bytes", "header_bytes")},
        "over_share": as_float(p["over_share"]),
        "wall_s": as_float(p["wall_s"]),
        "runs": int(p["runs"]),
    }


def _json_row(row: pd.Series, phase_names: list[str], shares: pd.DataFrame) -> dict[str, Any]:
    mine = same_configuration(shares, row)
    return {
        "strategy": row["strategy"],
        "kind": row["kind"],
        "shapes": row["shapes"],
        "status": row["status"],
        "repeats": int(row["repeats"]),
        "ok_repeats": int(row["ok_repeats"]),
        "dtype": row["dtype"],
        "model": as_str(row.get("model")) or "spec",
        **{k: as_float(row.get(k)) for k in ("load_s", "ready_s")},
        "compile_cache": as_str(row.get("compile_cache")),  # hit | miss: two conditions
        "file_dtype": file_dtype(row["shapes"], row["dtype"]),
        "model_dtype": model_dtype(row),
        "cache": as_str(row.get("cache")),
        "source": as_str(row.get("source")) or FILE_SOURCE,
        "link": as_str(row.get("link")),
        "concurrency": as_int(row.get("concurrency")),
        "devices": int(row["devices"]),
        "processes": int(row["processes"]),
        "checkpoint_bytes": as_int(row["checkpoint_bytes"]),
        "baseline_rss_bytes": as_int(row["baseline_rss_bytes"]),
        "peak_rss_bytes": as_int(row["peak_rss_bytes"]),
        "peak_ratio": as_float(row["peak_ratio"]),
        "wall_s": as_float(row["wall_s"]),
        "wall_s_min": as_float(row["wall_s_min"]),
        "wall_s_max": as_float(row["wall_s_max"]),
        "throughput_bytes_per_s": as_float(row["throughput_bytes_per_s"]),
        "received_bytes_per_s": as_float(row.get("received_bytes_per_s")),
        "ceiling_s": as_float(row.get("ceiling_s")),
        "ceiling_bytes": as_int(row.get("ceiling_bytes")),
        "ceiling_ratio": as_float(row.get("ceiling_ratio")),
        # the time against the reference timed beside each repeat (bench.intervals)
        "reference_s": as_float(row.get("reference_s")),
        "paired_ratio": as_float(row.get("paired_ratio")),
        "paired_low": as_float(row.get("paired_low")),
        "paired_high": as_float(row.get("paired_high")),
        "paired_repeats": as_int(row.get("paired_n")),
        "floor_ratio": as_float(row.get("floor_ratio")),
        "unstable": as_str(row.get("unstable")) is not None,  # never null (issue 54)
        "unstable_why": as_str(row.get("unstable")),
        "peak_rss_min": as_int(row.get("peak_rss_min")),
        "peak_rss_max": as_int(row.get("peak_rss_max")),
        "budget_bytes": as_int(row.get("budget_bytes")),
        "inflight_peak_bytes": as_int(row.get("inflight_peak_bytes")),
        "device_peak_bytes": as_int(row.get("device_peak_bytes")),
        "device_bytes_limit": as_int(row.get("device_bytes_limit")),
        "device_headroom_bytes": as_int(row.get("device_headroom_bytes")),
        "device_model_bytes": as_int(row.get("device_model_bytes")),
        "device_over_model_bytes": as_int(row.get("device_over_model_bytes")),
        "device_over_budget": (
            flag(row, "device_over_budget")
            if as_int(row.get("device_over_model_bytes")) is not None
            else None
        ),
        "device_ceiling_s": as_float(row.get("device_ceiling_s")),
        "device_ceiling_ratio": as_float(row.get("device_ceiling_ratio")),
        # programs the load compiled on the device, and the host bytes the probe's process grew
        # by at its first compile (`bench.analysis.device_summary.first_compile_lines`)
        "device_programs": as_int(row.get("device_programs")),
        "first_compile_host_bytes": as_int(row.get("first_compile_host_bytes")),
        "peak_anon_rss_bytes": as_int(row.get("peak_anon_rss_bytes")),
        "peak_file_rss_bytes": as_int(row.get("peak_file_rss_bytes")),
        "cpu_s": as_float(row.get("cpu_s")),
        "ceiling_cpu_s": as_float(row.get("ceiling_cpu_s")),
        "device_overreceived": bool(flag(row, "device_overreceived")),
        "staging_memory": as_str(row.get("staging_memory")),
        "peak_source": as_str(row["peak_source"]),
        "error": as_str(row["error"]),
        "phases": _json_phases(row, phase_names),
        "process_bytes": [_json_process(p) for _, p in mine.iterrows()],
    }


def json_summary(results: Results) -> list[dict[str, Any]]:
    """One object per (configuration, strategy): kind, status, repeats, dtypes, bytes, ratios,
    times, the in-flight high-water mark and budget (where reported), phases, and a multi-process
    remote load's bytes per process against its share (`process_bytes`)."""
    summary = summary_frame(results)
    names = [
        c.removesuffix("_wall_s")
        for c in summary.columns
        if c.endswith("_wall_s") and c != "wall_s"
    ]
    shares = process_shares(results.phases, configuration_keys(results.phases))
    return [_json_row(row, names, shares) for _, row in summary.iterrows()]


def json_decisions(results: Results) -> list[dict[str, Any]]:
    """`bench run --json`'s `decisions`: per configuration its shape set, model, model dtype and
    compile cache (`hit`, `miss`; None where the rows do not say) and the judge's record with its
    sentence (`decision_words.decision_json`), as the text summary ends each block."""
    return [
        {
            "shapes": str(group["shapes"].iloc[0]),
            **{key: first_of(group, key) for key in ("model", "model_dtype", "compile_cache")},
            **decision_json(answer),
        }
        for group, _, answer in blocks(results)
    ]
