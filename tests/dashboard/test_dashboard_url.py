"""Every page's whole state is in its URL (`dashboard.link`), headless through AppTest: each page
is set to values other than its defaults, widget by widget, then opened afresh (a new session)
from the query string it wrote; every widget must come back with its value. A widget whose URL
binding is taken out comes back at its default, and its page fails here. The same round trip in
Chromium is `test_url_browser.py`.

Over `fixture_url.write_url` (the fixture runs, plus a run over s3 at concurrency 1 and 64): it
has two shape sets, several runs, routes, device counts, a memray capture and links to predict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import APP
from fixture_url import NAMES, scenarios, write_url

from dashboard.views import PAGES

WIDGETS = ("selectbox", "multiselect", "number_input", "toggle", "radio", "text_input", "checkbox")


@pytest.fixture(scope="module")
def url_results(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return write_url(tmp_path_factory.mktemp("url"))


def _open(folder: Path, page: str, query: dict[str, Any] | None = None):
    """A run AppTest on `page` (a fresh session), with `query` in its URL."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    if not page.endswith("overview.py"):  # the landing page
        at.switch_page(page)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def widgets(at) -> dict[str, Any]:
    """Every keyed widget on the page (the sidebar's too) and its value."""
    out = {}
    for kind in WIDGETS:
        for widget in at.get(kind):
            if widget.key and not widget.key.startswith("$$"):
                out[widget.key] = widget.value
    return out


def _set(at, kind: str, key: str, value: Any) -> None:
    widget = getattr(at, kind)(key=key)
    (widget.set_value(value) if kind != "toggle" else widget.set_value(bool(value))).run()
    assert not at.exception, [e.value for e in at.exception]


def test_every_page_has_a_scenario(url_results):
    found = scenarios(url_results)
    assert list(found) == list(NAMES)
    assert {s.page for s in found.values()} == {p.script for p in PAGES}


@pytest.mark.parametrize("name", NAMES)
def test_a_page_reopened_from_its_url_keeps_every_widget(name, url_results, monkeypatch):
    monkeypatch.setenv("LOADBENCH_RESULTS", str(url_results.root))
    scenario = scenarios(url_results)[name]
    at = _open(url_results.root, scenario.page)
    defaults = widgets(at)
    for kind, key, value, *_ in scenario.changes:
        _set(at, kind, key, value)
    shown = widgets(at)
    unchanged = [k for k in shown if shown[k] == defaults.get(k) and k not in scenario.left]
    assert unchanged == [], f"the scenario leaves these at their defaults: {unchanged}"
    query = dict(at.query_params)
    reopened = _open(url_results.root, scenario.page, query)
    assert widgets(reopened) == shown, query
    assert dict(reopened.query_params) == query  # and it writes back the same link


def _gpt2_headline(at) -> str:
    """The Overview's gpt2 answer (a success or an error box)."""
    boxes = [b.value for b in [*at.success, *at.error] if "**`gpt2`**" in b.value]
    assert len(boxes) == 1, boxes
    return boxes[0]


def test_the_overview_from_its_link_answers_the_configuration_in_it(url_results, monkeypatch):
    """A link to the 2-device configuration opens with the 2-device headline over its table, as
    picking it on screen gives, not the first configuration's."""
    monkeypatch.setenv("LOADBENCH_RESULTS", str(url_results.root))
    beta = url_results.run_ids["beta"]
    at = _open(url_results.root, "views/overview.py", {"run": beta})
    first = _gpt2_headline(at)
    _set(at, "selectbox", "overview_config_gpt2", "native, 2 device(s), model spec")
    picked = _gpt2_headline(at)
    assert picked != first  # the two configurations answer differently
    linked = _open(url_results.root, "views/overview.py", dict(at.query_params))
    assert linked.selectbox(key="overview_config_gpt2").value == "native, 2 device(s), model spec"
    assert _gpt2_headline(linked) == picked
