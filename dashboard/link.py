"""The view in the URL: a link to the dashboard opens the view it was copied from, whole.

The page is the URL's path (`/target_host`); everything else on screen is in its query string
(Streamlit's `st.query_params`), one parameter per widget, each named once below: the run, the
shape set, the host RAM, the route, the strategies, and every toggle, radio, number and text of
every page (the Target host's accelerator, device RAM and shape source, the Timeline's overlays,
the History's selection, the Overview's "Peak as" and log scale, ...). Only an uploaded file (a
target's probe) cannot travel in a link; the Target host page says so beside its uploader.

How a widget is bound (`seed` before drawing it, `keep` after):
- `seed` gives the widget its value: the URL's the first time the widget asks in this session (a
  link opened, a reload; `take`), else what it already holds, else its default. A value the
  results do not hold (a run since deleted, a strategy not measured) is ignored.
- `keep` writes the value on screen back on every run, so the address bar always holds the view.
  A value equal to a fixed default is left out (`omit`), so a link stays short; a default that
  follows the results (the newest run, the machine's RAM) is written, so the link keeps it.
- `prune` (run by `app.py` after the page) removes every parameter no widget kept in this run:
  a widget no longer drawn (Device RAM with the accelerator off) leaves the URL with it.

Streamlit's own `bind="query-params"` names each parameter after its widget's key and writes a
selectbox's label into the URL; the hand-made binding here keeps the short names links have
carried since the first version (`?ram=2.5&shapes=sa3`) and values that survive a new run label.

Example:
    `http://127.0.0.1:8501/?shapes=sa3&ram=2.5&strategies=eager,pipelined&peak=checkpoint&log=0`
    opens the Overview on sa3 for a 2.5 GiB host, two strategies on the chart, the peak as a
    multiple of the checkpoint, linear axes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

import streamlit as st

T = TypeVar("T")
_TAKEN = "_link_taken"  # session state: the (widget key, parameter) pairs already read
_KEPT = "_link_kept"  # session state: the parameters a widget kept in this run


@dataclass(frozen=True)
class Param(Generic[T]):
    """One query parameter: its name in the URL and how a widget's value is written to it and
    read back (`read` raises ValueError or KeyError for text that is not a value)."""

    name: str
    read: Callable[[str], T]
    write: Callable[[T], str]

    def parse(self, text: str) -> T | None:
        """The value `text` stands for, or None where it stands for none."""
        try:
            return self.read(text)
        except (ValueError, KeyError):
            return None


def text(name: str) -> Param[str]:
    """A parameter holding text as it is (a run id, a shape set, a link such as `1Gbit`)."""
    return Param(name, str, str)


def number(name: str) -> Param[float]:
    """A number: `ram=2.5`."""
    return Param(name, float, lambda v: f"{v:g}")


def whole(name: str) -> Param[int]:
    """A whole number: `devices=8`."""
    return Param(name, int, str)


FLAGS = {"1": True, "0": False, "true": True, "false": False}


def flag(name: str) -> Param[bool]:
    """A toggle: `log=0`, `accelerator=1`."""
    return Param(name, lambda v: FLAGS[v.lower()], lambda v: "1" if v else "0")


def choice(name: str, words: Mapping[str, str]) -> Param[str]:
    """One of a few options, each written as a short word (`peak=checkpoint` for the option
    "x checkpoint")."""
    options = {word: option for option, word in words.items()}
    return Param(name, options.__getitem__, words.__getitem__)


def listed(name: str) -> Param[list[str]]:
    """A list, comma-separated: `strategies=eager,pipelined`."""
    return Param(name, lambda v: [x for x in v.split(",") if x], ",".join)


# Every parameter of every page, in one place (a page's parameters never share a name), but for
# a choice among a page's own options, declared beside them: the Overview's `peak`, the Target
# host's `source`, the History's `metric`.
RUN, BASE = text("run"), text("base")  # the run shown; Compare's base run
SHAPES, SPEC = text("shapes"), text("spec")  # a measured shape set; a preset or fetched spec
RAM, DEVICES = number("ram"), whole("devices")  # host RAM (GiB); device count
ROUTE, ROUTES = text("route"), listed("routes")  # where the bytes came from (`s3 · 1Gbit · c16`)
STRATEGIES = listed("strategies")  # the strategies chosen, where some were taken out
CACHE, CONFIG = text("cache"), text("config")  # page cache (warm, cold); configuration label
LOG = flag("log")  # Overview: logarithmic axes
DTYPE = text("dtype")  # Phases
RESULTS, ABSOLUTE, SPLIT = listed("results"), flag("absolute"), flag("split")  # Timeline
ACCELERATOR, DEVICE_RAM = flag("accelerator"), number("device_ram")  # Target host
CHECKPOINT, LARGEST, TENSORS = number("checkpoint"), number("largest"), whole("tensors")
LINK = text("link")  # Target host: the link typed in ("Predict over a link")
THRESHOLD = number("max_regression")  # Compare: percent
CAPTURE, INLINE = text("capture"), flag("inline")  # memray


def take(key: str, param: Param[T]) -> T | None:
    """The URL's value of `param` for the widget `key`, the first time the widget asks in this
    session (a link opened, a reload); None after that, where the URL has none, or where its
    text is not a value."""
    taken: set[tuple[str, str]] = st.session_state.setdefault(_TAKEN, set())
    if (key, param.name) in taken:
        return None
    taken.add((key, param.name))
    value = st.query_params.get(param.name)
    return param.parse(value) if value else None


def seed(key: str, param: Param[T], default: T, valid: Callable[[T], bool] | None = None) -> None:
    """Before the widget `key` is drawn: its value from the URL the first time (where `valid`),
    else what the widget holds (where still valid), else `default`. Draw the widget after it
    without a value of its own (`value=`, `index=`, `default=`): the session state holds it."""
    linked = take(key, param)
    if linked is not None and (valid is None or valid(linked)):
        st.session_state[key] = linked
    elif key not in st.session_state or (valid is not None and not valid(st.session_state[key])):
        st.session_state[key] = default


def keep(param: Param[T], value: T | None, omit: T | None = None) -> None:
    """Write `param` into the URL (None, or a value equal to `omit`, removes it) and note that a
    widget kept it in this run (`prune` leaves it)."""
    st.session_state.setdefault(_KEPT, set()).add(param.name)
    if value is None or (omit is not None and value == omit):
        if param.name in st.query_params:
            del st.query_params[param.name]
        return
    written = param.write(value)
    if st.query_params.get(param.name) != written:
        st.query_params[param.name] = written


def bound(
    key: str,
    param: Param[T],
    default: T,
    draw: Callable[[], T],
    *,
    valid: Callable[[T], bool] | None = None,
    omit: T | None = None,
) -> T:
    """One widget in the URL: `seed` it, draw it (`draw()` returns its value), `keep` it.

    Example:
        >>> log = link.bound(
        ...     "overview_log", link.LOG, True, lambda: st.toggle("Log scales", key="overview_log"),
        ...     omit=True,
        ... )
    """
    seed(key, param, default, valid)
    value = draw()
    keep(param, value, omit)
    return value


def begin() -> None:
    """At the start of a run of the app: no parameter kept yet."""
    st.session_state[_KEPT] = set()


def prune() -> None:
    """After the page ran: remove every parameter no widget kept in this run."""
    kept = st.session_state.get(_KEPT, set())
    for name in [n for n in st.query_params if n not in kept]:
        del st.query_params[name]
