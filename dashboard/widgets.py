"""Parts every page shares: the results (or the empty state), unreadable-file notes, run pickers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from bench.records.results import LOCAL
from bench.vocabulary import OK, STATUSES
from dashboard import MAKE_COMMAND, data, frames, link, style
from loader.vocabulary import TOTAL


def empty_state(folder: str) -> None:
    """Say there is nothing to show yet and which command makes results in the folder shown."""
    st.info(f"No results yet in `{folder}`. Make some there with:")
    st.code(f"{MAKE_COMMAND} RESULTS={folder}", language="bash")
    st.caption(
        f"or `loadbench bench run --shapes gpt2 --out {folder}`; then reload this page. "
        "Point the dashboard elsewhere with `loadbench dashboard --results DIR`."
    )


def show_errors(errors: list[tuple[str, str]]) -> None:
    """One warning per unreadable file or line: which file and why (the rest is still shown)."""
    for file, message in errors:
        st.warning(f"Could not read part of `{file}`: {message}", icon="⚠️")


def page_results() -> Any:
    """The results for this page, with errors shown; stops the page with the empty state if none.

    Returns:
        The bench reader's `Results` (with at least one phase row).
    """
    folder = data.results_folder()
    try:
        results = data.load_results(folder)
    except Exception as e:  # the reader failed as a whole: say so, do not show a traceback
        st.error(f"Could not read the results folder `{folder}`: {type(e).__name__}: {e}")
        st.stop()
    if results is not None:
        show_errors(list(results.errors))
    if results is None or results.phases.empty:
        empty_state(str(folder))
        st.stop()
    return results


def run_ids(results: Any) -> list[str]:
    """The runs that have phase rows, newest first."""
    return list(frames.run_facts(results.runs, results.phases)["run_id"])


def pick_run(
    results: Any,
    *,
    key: str,
    label: str = "Run",
    index: int | None = None,
    newest: bool = False,
    param: link.Param[str] = link.RUN,
) -> str:
    """A run selector, newest first, each labelled with machine, date, shape sets, status and
    limits; it opens on the newest complete, unconstrained run (`index` picks another). With
    `newest`, its first choice is `frames.NEWEST`: each shape set's own default run, left out of
    the URL; any other run is in the URL as `param` (`run`; Compare's base: `base`).

    Returns:
        The run id, or `frames.NEWEST`.
    """
    labels = frames.run_labels(results.runs, results.phases)
    ids = run_ids(results)
    if index is None:
        first = frames.default_run(results.runs, results.phases)
        index = ids.index(first) if first in ids else 0
    if newest:
        ids, index, labels = (
            [frames.NEWEST, *ids],
            0,
            {frames.NEWEST: frames.newest_label(results.runs, results.phases), **labels},
        )
    return link.bound(
        key,
        param,
        ids[min(index, len(ids) - 1)],
        lambda: st.selectbox(label, ids, key=key, format_func=lambda r: labels.get(r, r)),
        valid=ids.__contains__,
        omit=frames.NEWEST,
    )


def run_phases(results: Any, run_id: str) -> pd.DataFrame:
    """The phase rows of `run_id`, or of each shape set's default run for `frames.NEWEST`."""
    if run_id == frames.NEWEST:
        return frames.default_phases(results.runs, results.phases)
    return results.phases[results.phases["run_id"] == run_id]


def pick_shapes(
    phases: pd.DataFrame, *, key: str, options: list[str] | None = None, column: Any = st
) -> str:
    """A shape-set selector over `options` (default: the shape sets in `phases`, by name), in
    the URL as `shapes`."""
    names = options if options is not None else sorted(phases["shapes"].unique())
    return link.bound(
        key,
        link.SHAPES,
        names[0],
        lambda: column.selectbox("Shape set", names, key=key),
        valid=names.__contains__,
    )


ROUTE_WORDS = {LOCAL: "local disk"}  # how a route reads in its picker


def pick_route(rows: pd.DataFrame, *, key: str, column: Any = st) -> str | None:
    """A "Loaded from" selector over the routes of `rows` (local disk, `s3 · 1Gbit · c16`, ...;
    `frames.route_order`), drawn where there are several, in the URL as `route`.

    Returns:
        The route picked (the only one where there is one; None where `rows` is empty).
    """
    names = frames.route_order(rows)
    if len(names) <= 1:
        return names[0] if names else None
    return link.bound(
        key,
        link.ROUTE,
        names[0],
        lambda: column.selectbox(
            "Loaded from",
            names,
            key=key,
            format_func=lambda r: ROUTE_WORDS.get(r, r),
            help="local disk, or the source, the shaped link and the concurrency (range requests "
            "in flight) of a remote load: each is its own configuration, never pooled",
        ),
        valid=names.__contains__,
    )


def remote_figures(rows: pd.DataFrame) -> None:
    """What a remote load's rows say about its link (`frames.remote_figures`): the median wall
    against the link's ceiling, and the bytes received; nothing for local rows."""
    figures = frames.remote_figures(rows)
    if figures.empty:
        return
    shown = pd.DataFrame(
        {
            "strategy": figures["strategy"],
            "wall (median)": figures["wall_s"].map(style.seconds),
            "link ceiling": figures["ceiling_s"].map(style.seconds),
            "wall ÷ ceiling": figures["ceiling_ratio"].map(style.ratio),
            "bytes received": figures["bytes_received"].map(style.size),
            "x checkpoint": (figures["bytes_received"] / figures["checkpoint_bytes"]).map(
                lambda r: style.UNKNOWN if pd.isna(r) else f"{r:.3f}x"
            ),
            "requests": figures["requests"].map(
                lambda n: style.UNKNOWN if pd.isna(n) else f"{n:,.0f}"
            ),
        }
    )
    st.markdown(
        "**Over the link**: the link's ceiling is the checkpoint's bytes over its bandwidth; "
        "medians of the ok repeats"
    )
    st.dataframe(shown, hide_index=True, width="content")


def pick_cache(phases: pd.DataFrame, *, key: str) -> pd.DataFrame:
    """The rows of one page-cache state (warm or cold), with a selector when the run has both."""
    caches = sorted(phases["cache"].dropna().unique(), key=lambda c: (c != "warm", c))
    if len(caches) >= 2:
        cache = link.bound(
            key,
            link.CACHE,
            caches[0],
            lambda: st.radio(
                "Page cache",
                caches,
                horizontal=True,
                key=key,
                help="cold: the checkpoint was evicted from the page cache before each load",
            ),
            valid=caches.__contains__,
            omit=caches[0],
        )
        phases = phases[phases["cache"] == cache]
    capped = pd.to_numeric(phases.get("disk_read_bytes_per_s", pd.Series(dtype=float))).dropna()
    if len(capped):
        st.caption(
            f"Disk reads capped at {style.rate(capped.iloc[0])} in this run "
            "(`bench run --disk-read-speed`): cold times are that disk's, not this machine's."
        )
    return phases


Format = str | Callable[[float], str]  # `"{:.2f}x"`, or a function such as `style.seconds`


def number_table(table: pd.DataFrame, formats: dict[str, Format], labels: dict[str, str]) -> Any:
    """`table` as a Styler whose numbers use `formats` (`str.format` style, or a function of
    `style`) and whose missing values (a failed run has no peak or time) read as "-", not a grey
    "None"; `labels` renames columns. The formats live in the Styler: a column_config format
    would override na_rep."""
    by_column: dict[Any, Any] = dict(formats)
    styler = table.style.format(by_column, na_rep=style.UNKNOWN)
    return styler, {c: st.column_config.Column(label) for c, label in labels.items()}


def status_table(phases: pd.DataFrame) -> None:
    """Every child run of `phases` with its status and error: never filtered, never hidden."""
    totals = frames.route_labelled(data.whole_run(phases))  # `pipelined · s3 · 1Gbit · c16`
    totals = totals[totals["phase"] == TOTAL]
    cols = ["strategy", "repeat", "dtype", "devices", "status", "peak_ratio", "wall_s", "error"]
    table = totals[cols].sort_values(["strategy", "repeat"]).reset_index(drop=True)
    table["repeat"] = table["repeat"].map(style.repeat_number)  # from 1, as `bench run` says
    table["error"] = table["error"].where(table["error"].map(lambda e: isinstance(e, str)), "")
    for number in ("peak_ratio", "wall_s"):  # a failed run's None reads "-", never "None"
        table[number] = pd.to_numeric(table[number], errors="coerce")
    counts = table["status"].value_counts()
    st.markdown(" · ".join(f"**{s}**: {int(counts[s])}" for s in STATUSES if s in counts))
    styler, config = number_table(
        table,
        {"peak_ratio": "{:.2f}x", "wall_s": style.seconds},
        {"peak_ratio": "x checkpoint", "wall_s": "wall"},
    )
    st.dataframe(
        styler.apply(_status_style, axis=1), hide_index=True, width="stretch", column_config=config
    )


def _status_style(row: pd.Series) -> list[str]:
    color = "" if row["status"] == OK else "background-color: rgba(198, 40, 40, 0.15)"
    return [color] * len(row)


HOST_RAM = "host_ram_gib"  # session state: the host RAM shown, kept across pages
HOST_RAM_SET = "host_ram_set"  # session state: the user set it (else it follows the run shown)
GIB = float(1 << 30)


def _keep_host_ram(key: str) -> None:
    st.session_state[HOST_RAM] = st.session_state[key]
    st.session_state[HOST_RAM_SET] = True


def host_ram(column: Any, default_bytes: float | None, *, key: str, help: str) -> int:
    """The host RAM input (GiB), shared by the Overview and the Target host page. Until the user
    sets it, it follows `default_bytes` (the RAM of the machine that measured the run shown);
    once set, the value is kept in session state across pages and runs.

    Returns:
        The host RAM in bytes.
    """
    linked = link.take(key, link.RAM)
    if linked is not None and 0.25 <= linked <= 65536:
        st.session_state[HOST_RAM] = linked
        st.session_state[HOST_RAM_SET] = True
    if not st.session_state.get(HOST_RAM_SET):
        st.session_state[HOST_RAM] = round(float(default_bytes or 16 * GIB) / GIB, 2)
    st.session_state[key] = float(st.session_state[HOST_RAM])
    gib = column.number_input(
        "Host RAM (GiB)",
        min_value=0.25,
        max_value=65536.0,
        step=0.5,
        key=key,
        help=help,
        on_change=_keep_host_ram,
        args=(key,),
    )
    link.keep(link.RAM, float(gib))
    return int(gib * GIB)


def _remember_excluded(key: str, options: list[str]) -> None:
    excluded = set(st.session_state.get(f"{key}_excluded", ()))
    chosen = set(st.session_state[key])
    st.session_state[f"{key}_excluded"] = (excluded - set(options)) | (set(options) - chosen)


def pick_strategies(
    options: list[str], *, key: str, label: str = "Strategies", column: Any = st
) -> list[str]:
    """A strategy multiselect whose choice survives a change of its options (another device
    count, shape set or run): what the user took out stays out, every other strategy is in,
    so switching away and back leaves the selection as it was. In the URL as `strategies` (the
    ones chosen) where some are out."""
    linked = link.take(key, link.STRATEGIES)
    if linked is not None:
        st.session_state[f"{key}_excluded"] = set(options) - set(linked)
    excluded = set(st.session_state.get(f"{key}_excluded", ()))
    st.session_state[key] = [o for o in options if o not in excluded]
    chosen = column.multiselect(
        label, options, key=key, on_change=_remember_excluded, args=(key, list(options))
    )
    link.keep(link.STRATEGIES, list(chosen) if len(chosen) < len(options) else None)
    return chosen
