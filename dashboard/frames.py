"""Pure views of results frames (no Streamlit, no jax): whole-run rows, phase medians, bands.

The dashboard pages (through `dashboard.data`) and the static report (`dashboard.report`) share
them; which runs there are and which is shown by default is `dashboard.runs`.
"""

from __future__ import annotations

import pandas as pd

from bench.records.results import headline
from loader.vocabulary import OK, TOTAL


def whole_run(phases: pd.DataFrame) -> pd.DataFrame:
    """The rows that describe a whole run: single-process rows and the summed multi-process row."""
    return phases if phases.empty else headline(phases)


def phase_medians(phases: pd.DataFrame) -> pd.DataFrame:
    """Median per (strategy, phase) over the ok repeats, with what each phase adds to the peak.

    `adds_bytes` is the phase's peak minus the RSS when it started (the previous phase's end, or
    the baseline for the first phase); `peak_over_baseline_bytes` is the phase peak minus baseline.
    """
    ok = whole_run(phases)
    ok = ok[(ok["status"] == OK) & (ok["phase"] != TOTAL)].sort_values("phase_order")
    if ok.empty:
        return pd.DataFrame()
    start = ok.groupby("result_id")["phase_end_rss_bytes"].shift(1)
    ok = ok.assign(start_rss=start.fillna(ok["baseline_rss_bytes"]))
    ok = ok.assign(
        adds_bytes=ok["phase_peak_rss_bytes"] - ok["start_rss"],
        peak_over_baseline_bytes=ok["phase_peak_rss_bytes"] - ok["baseline_rss_bytes"],
    )
    cols = [
        "phase_wall_s",
        "adds_bytes",
        "peak_over_baseline_bytes",
        "phase_anon_rss_bytes",
        "phase_file_rss_bytes",
        "phase_peak_ratio",
        "checkpoint_bytes",
        "phase_order",
    ]
    return ok.groupby(["strategy", "phase"], as_index=False)[cols].median()


def overlapping_phases(rows: pd.DataFrame) -> dict[str, list[str]]:
    """strategy -> `"a ∥ b"` for each pair of its phases that ran at the same time.

    Such phases are not disjoint slices of the run (a pipelined load builds while it reads): their
    times and peaks each include the shared span, so they must not be added up.
    """
    if "phase_overlaps" not in rows.columns:
        return {}
    out: dict[str, list[str]] = {}
    for strategy, phase, others in rows[["strategy", "phase", "phase_overlaps"]].itertuples(
        index=False
    ):
        listed = hasattr(others, "__iter__") and not isinstance(others, str)  # NaN in old runs
        for other in list(others) if listed else []:
            pair = " ∥ ".join(sorted((str(phase), str(other))))
            if pair not in out.setdefault(strategy, []):
                out[strategy].append(pair)
    return {k: v for k, v in out.items() if v}


def phase_bands(
    phases: pd.DataFrame, result_ids: list[str], labels: dict[str, str]
) -> pd.DataFrame:
    """Phase start/end seconds of each result, from its phase rows (cumulative phase walls)."""
    out = []
    for rid in result_ids:
        rows = whole_run(phases[phases["result_id"] == rid])
        rows = rows[rows["phase"] != TOTAL].sort_values("phase_order")
        end = rows["phase_wall_s"].astype(float).cumsum()
        out.append(
            pd.DataFrame(
                {
                    "label": labels[rid],
                    "phase": rows["phase"],
                    "start_s": end - rows["phase_wall_s"],
                    "end_s": end,
                }
            )
        )
    return (
        pd.concat(out, ignore_index=True)
        if out
        else pd.DataFrame(columns=["label", "phase", "start_s", "end_s"])
    )
