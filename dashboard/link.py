"""The view in the URL: a link to the dashboard opens the view it was copied from.

The page is the URL's path (`/target_host`); the rest of the view is in its query string
(Streamlit's `st.query_params`): `run`, `shapes`, `ram` (the host RAM in GiB), `route` (where the
bytes came from: `local`, or `s3 · 1Gbit · c16`, where the results hold several) and `strategies`
(the ones chosen, where some were taken out). A page reads a parameter once per session
(`take`), the first time it draws the widget the parameter sets: that is when a link is opened
or the page reloaded; after that the widget holds the value and the page writes it back
(`keep`) on every run, so the address bar always holds the view on screen. A parameter whose
value the results do not hold (a run since deleted) is ignored and the widget keeps its default.

Example:
    `http://127.0.0.1:8501/?shapes=sa3&ram=2.5&strategies=eager,pipelined` opens the Overview
    on sa3 for a 2.5 GiB host, with two strategies on the chart.
"""

from __future__ import annotations

import streamlit as st

RUN, SHAPES, RAM, ROUTE, STRATEGIES = "run", "shapes", "ram", "route", "strategies"
PARAMS = (RUN, SHAPES, RAM, ROUTE, STRATEGIES)
_TAKEN = "_link_taken"  # session state: the (widget key, parameter) pairs already read


def take(key: str, param: str) -> str | None:
    """The URL's value of `param` for the widget `key`, the first time the widget asks in this
    session (a link opened, a reload); None after that or where the URL has none."""
    taken: set[tuple[str, str]] = st.session_state.setdefault(_TAKEN, set())
    if (key, param) in taken:
        return None
    taken.add((key, param))
    value = st.query_params.get(param)
    return value if value else None


def take_list(key: str, param: str) -> list[str] | None:
    """`take` for a comma-separated list (`strategies=eager,pipelined`)."""
    value = take(key, param)
    return [v for v in value.split(",") if v] if value is not None else None


def take_float(key: str, param: str) -> float | None:
    """`take` for a number (`ram=2.5`); None where the URL's value is not one."""
    value = take(key, param)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def keep(param: str, value: str | list[str] | None) -> None:
    """Write `param` into the URL (a list comma-separated); None removes it."""
    if isinstance(value, list):
        value = ",".join(value)
    if value is None:
        if param in st.query_params:
            del st.query_params[param]
    elif st.query_params.get(param) != value:
        st.query_params[param] = value
