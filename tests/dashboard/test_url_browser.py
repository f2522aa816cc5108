"""Every page reopened from its URL in Chromium keeps every widget's value (issue 43).

Over `fixture_url` in Debian's headless Chromium (the page tests' browser and server helpers):
each page is set away from its defaults widget by widget, as a user would (clicking options,
chips, toggles and radios, typing numbers), then its address is opened in a new tab, a new
Streamlit session; every widget on the page, read from the DOM by its key (`st-key-<key>`), must
show the value it had, and the page must write back the same address. A widget whose URL binding
is taken out comes back at its default there, and this test fails on its page.

The headless twin, every scenario, is `test_dashboard_url.py`; here one scenario a page (two for
the Target host, whose shape source swaps its widgets).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser import EXCEPTION, VIEWPORT, dashboard, settle
from fixture_url import scenarios, write_url
from test_dashboard_browser import browser_page  # noqa: F401 (the fixture)

from dashboard.views import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

IN_CHROMIUM = (
    "overview",
    "phases",
    "timeline",
    "target_measured",
    "target_custom",
    "compare",
    "history",
    "memray",
)

# key -> the value each keyed widget on screen shows (main area and sidebar).
WIDGETS_JS = """() => {
  const out = {};
  for (const el of document.querySelectorAll('[class*="st-key-"]')) {
    const key = [...el.classList].find((c) => c.startsWith('st-key-')).slice(7);
    const kind = el.querySelector('[data-testid]')?.dataset.testid;
    if (kind === 'stSelectbox') {
      out[key] = el.querySelector('input[role="combobox"]').value;
    } else if (kind === 'stMultiSelect') {
      out[key] = [...el.querySelectorAll('[aria-label^="Remove "]')]
        .map((b) => b.getAttribute('aria-label').slice(7)).filter((t) => t !== 'all');
    } else if (kind === 'stNumberInput' || kind === 'stTextInput') {
      out[key] = el.querySelector('input').value;
    } else if (kind === 'stCheckbox') {
      out[key] = el.querySelector('input[type="checkbox"]').checked;
    } else if (kind === 'stRadio') {
      const checked = el.querySelector('input[type="radio"]:checked');
      out[key] = checked ? checked.closest('label').innerText.trim() : null;
    }
  }
  return out;
}"""


def widgets(page) -> dict[str, Any]:
    return page.evaluate(WIDGETS_JS)


def steady(page, tries: int = 20) -> tuple[dict[str, Any], str]:
    """The widgets and the address once the page stopped changing: no run in progress, no stale
    element left from an earlier run, the same widgets and address in two looks at least a second
    apart (each look waits for the script's run to end first)."""
    before = None
    for _ in range(tries):
        settle(page, drawing_ms=0)
        page.wait_for_function("!document.querySelector('[data-stale=\"true\"]')")
        now = (widgets(page), page.url)
        if now == before:
            return now
        before = now
        page.wait_for_timeout(500)
    raise AssertionError(f"the page kept changing: {before}")


def _box(page, key: str):
    return page.locator(f".st-key-{key}")


def _choose(page, key: str, text: str) -> None:
    """Open the select `key`, type `text` to narrow its list (a long list is drawn in part), and
    click the option whose text holds it."""
    field = _box(page, key).locator('input[role="combobox"]')
    field.click()
    field.fill(text)
    page.get_by_role("option", name=re.compile(re.escape(text))).first.click()


def _chips(page, key: str, wanted: list[str]) -> None:
    """Make the multiselect `key` hold exactly the chips `wanted`: remove, then add."""
    for chip in widgets(page)[key]:
        if chip not in wanted:
            _box(page, key).locator(f'[aria-label="Remove {chip}"]').first.click()
            settle(page, drawing_ms=0)
    for chip in wanted:
        if chip not in widgets(page)[key]:
            _choose(page, key, chip)
            settle(page, drawing_ms=0)
            page.keyboard.press("Escape")


def _set(page, change: tuple[Any, ...]) -> None:
    """Set one widget as a user would: `(kind, key, value)` or `(kind, key, value, text)`."""
    kind, key, value, *shown = change
    text = shown[0] if shown else value
    box = _box(page, key)
    if kind == "selectbox":
        _choose(page, key, str(text))
    elif kind == "multiselect":
        _chips(page, key, [str(t) for t in text])
    elif kind in ("number_input", "text_input"):
        field = box.locator("input")
        field.fill(f"{value:g}" if isinstance(value, float) else str(value))
        field.press("Enter")
    elif kind == "toggle":
        if box.locator('input[type="checkbox"]').is_checked() != value:
            box.locator("label").first.click()
    elif kind == "radio":
        box.locator("label", has_text=str(text)).first.click()
    settle(page, drawing_ms=0)


def _open(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    steady(page)


@pytest.fixture(scope="module")
def url_results(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return write_url(tmp_path_factory.mktemp("url"))


def test_every_page_reopened_from_its_url_in_chromium(browser_page, url_results, tmp_path):  # noqa: F811
    page = browser_page
    paths = {p.script: ("" if i == 0 else p.url_path) for i, p in enumerate(PAGES)}
    found = scenarios(url_results)
    assert {found[n].page for n in IN_CHROMIUM} == set(paths), "a page has no scenario here"
    with dashboard(url_results.root, tmp_path / "streamlit.log") as (url, _):
        for name in IN_CHROMIUM:
            scenario = found[name]
            _open(page, f"{url}/{paths[scenario.page]}")
            defaults = widgets(page)
            for change in scenario.changes:
                _set(page, change)
            shown, link = steady(page)  # the address bar follows the last run
            page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
            assert page.locator(EXCEPTION).count() == 0, name
            same = [k for k in shown if shown[k] == defaults.get(k) and k not in scenario.left]
            assert same == [], f"{name}: still at their defaults: {same} ({shown})"

            other = page.context.browser.new_page(viewport=VIEWPORT)  # a new session
            _open(other, link)
            reopened, again = steady(other)
            other.screenshot(path=str(tmp_path / f"{name}_reopened.png"), full_page=True)
            lost = {k: (v, reopened.get(k)) for k, v in shown.items() if reopened.get(k) != v}
            assert lost == {}, f"{name}: reopened from {link}, these lost their values: {lost}"
            assert again == link, name
            other.close()
