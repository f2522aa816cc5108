"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, no download.

The app is started with the real CLI on a free port on 127.0.0.1 over the fixture folder, at a
1400x1000 viewport. Every page (and the empty folder) is opened; each must draw without a Streamlit
exception box and without an element running past the viewport's right edge. On top: the Overview
headline names a strategy with its GiB and the least RAM that fits, the host RAM is a line on the
chart, the interrupted and the check run are not the default, a strategy keeps its colour when the
filter changes; Phases draws no negative bar for pipelined (whose phases overlap) and keeps its
strategy choice across a device-count change; the Timeline's anonymous / file-backed split has a
legend with its two entries. Screenshots land in tmp_path.
"""

from __future__ import annotations

import os
import re

import pytest
from browser import (
    CHROMIUM,
    EXCEPTION,
    VIEWPORT,
    dashboard,
    is_down,
    launch,
    legend,
    open_page,
    overflowing,
    settle,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing: install Debian's chromium (make browser-deps)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser test")
    pytest.skip(reason)


@pytest.fixture
def browser_page():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        yield browser.new_page(viewport=VIEWPORT)
        browser.close()


def _clean(page, name: str, tmp_path) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    assert page.locator(EXCEPTION).count() == 0, f"{name}: a Streamlit exception is shown"
    assert overflowing(page) == [], f"{name}: elements overflow the viewport width"


def _remove_tag(page, name: str) -> None:
    """Click the x of the Overview strategy filter's tag `name`."""
    page.locator(f'button[aria-label="Remove {name}"]').first.click()
    page.locator(f'button[aria-label="Remove {name}"]').first.wait_for(state="detached")
    settle(page, 1)


def _tags(page) -> set[str]:
    """The chips of the multiselects shown (each has a "Remove NAME" button)."""
    buttons = page.locator('[data-testid="stMultiSelect"] [aria-label^="Remove "]')
    return {str(b.get_attribute("aria-label"))[len("Remove ") :] for b in buttons.all()}


def _pick(page, label: str, option: str) -> None:
    page.locator(f'[data-testid="stSelectbox"] input[aria-label="{label}"]').click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page, 1)


def _phases(page, url: str, tmp_path) -> None:
    """Phases: pipelined (whose build runs inside its stream) draws no negative bar, and the
    strategy box keeps its choice across a change of device count and back."""
    open_page(page, url, "phases", 1)
    _clean(page, "phases", tmp_path)
    assert "pipelined" in _tags(page)
    axis = page.locator(".vega-embed svg").first.locator(".role-axis-label text")
    ticks = [t.strip() for t in axis.all_text_contents()]
    assert ticks and not [t for t in ticks if t.startswith(("-", "−"))], ticks
    _remove_tag(page, "stream")
    kept = _tags(page)
    assert "stream" not in kept and "pipelined" in kept
    _pick(page, "devices", "2")
    assert _tags(page) == {"eager"}, _tags(page)  # on 2 devices: eager and stream, stream out
    _pick(page, "devices", "8")
    assert _tags(page) == kept, "the strategy box lost its selection across a devices change"


def test_every_page_in_chromium(browser_page, fixture_results, tmp_path):
    page = browser_page
    outside: list[str] = []  # the dashboard asks nothing of the internet (no font CDN icon)
    page.on("request", lambda r: None if "://127.0.0.1" in r.url else outside.append(r.url))
    with dashboard(fixture_results.root, tmp_path / "streamlit.log") as (url, proc):
        open_page(page, url, "overview", 1)  # the largest shape set (one at a time)
        _clean(page, "overview", tmp_path)
        headline = page.locator('[data-testid="stAlert"]').first.inner_text()
        assert re.search(r"use \w+ on [\d.]+ GiB, \d+ devices?: [\d.]+ [GM]iB peak", headline), (
            headline
        )
        assert re.search(r"Least RAM that fits: [\d.]+ [GM]iB \(\w+\)", headline), headline
        host = page.locator(".vega-embed svg text", has_text="host RAM")
        assert host.count() >= 1, "the host RAM is not drawn on the chart"
        # the default is each shape set's newest complete, unconstrained run: beta, never the
        # newer interrupted gamma nor the check run delta
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert fixture_results.run_ids["beta"] in main
        assert fixture_results.run_ids["gamma"] not in main
        assert fixture_results.run_ids["delta"] not in main

        before = legend(page, 0, "strategy")
        assert set(before) == {"eager", "stream", "pipelined"}  # floor: the reference line
        _remove_tag(page, "eager")
        for _ in range(30):  # the chart is drawn again once the rerun has finished
            after = legend(page, 0, "strategy")
            if "eager" not in after:
                break
            page.wait_for_timeout(1000)
        assert set(after) == {"stream", "pipelined"}  # a legend lists only what is drawn
        assert after["stream"] == before["stream"], "stream changed colour with the filter"

        _phases(page, url, tmp_path)
        for name in ("target_host", "compare"):
            open_page(page, url, name, 1)
            _clean(page, name, tmp_path)
        open_page(page, url, "memray")
        _clean(page, "memray", tmp_path)

        open_page(page, url, "timeline", 1)
        _clean(page, "timeline", tmp_path)
        page.get_by_text("Split anonymous / file-backed").click()
        settle(page, 1)
        _clean(page, "timeline_split", tmp_path)
        assert list(legend(page, 0, "memory")) == ["anonymous", "anonymous + file-backed"]

        assert outside == [], outside
        proc.terminate()  # the CLI stops its Streamlit child on SIGTERM: nothing must be left
        proc.wait(timeout=15)
        assert is_down(url), "stopping `loadbench dashboard` left its Streamlit server running"


def test_empty_state_in_chromium(browser_page, tmp_path):
    page = browser_page
    folder = tmp_path / "no-results"
    with dashboard(folder, tmp_path / "streamlit.log") as (url, _):
        for name in ("overview", "timeline"):
            open_page(page, url, name)
            page.get_by_text(f"make bench SHAPES=gpt2 RESULTS={folder}").wait_for(timeout=30_000)
            _clean(page, f"empty_{name}", tmp_path)


def test_report_renders_offline(browser_page, fixture_results, tmp_path):
    """`loadbench report`: every chart draws from the file alone, with every request refused."""
    from bench.cli import main

    out = tmp_path / "report.html"
    assert main(["report", str(fixture_results.root), "--out", str(out)]) == 0
    page = browser_page
    asked: list[str] = []
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file:")
            else (asked.append(route.request.url), route.abort())
        ),
    )
    page.goto(out.as_uri())
    expected = out.read_text().count('vegaEmbed("#chart')
    page.wait_for_function(
        f"document.querySelectorAll('.chart svg, .chart canvas').length >= {expected}",
        timeout=60_000,
    )
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert asked == [] and expected >= 8
