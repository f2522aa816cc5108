"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, no download.

The app is started with the real CLI on a free port on 127.0.0.1 over the fixture folder; the test
waits for the charts, checks they rendered and that no Streamlit exception box is shown, and saves
screenshots under the test's tmp_path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
CHART = ".vega-embed canvas, .vega-embed svg"
EXCEPTION = '[data-testid="stException"]'

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing: install Debian's chromium (make browser-deps)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser test")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _dashboard(results: Path, log: Path) -> Iterator[str]:
    """Run `python -m dashboard.cli --results DIR --port P` until the health check answers."""
    port = _free_port()
    cmd = [sys.executable, "-m", "dashboard.cli", "--results", str(results), "--port", str(port)]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the dashboard did not start on {url}:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
        proc.terminate()  # the CLI stops its Streamlit child on SIGTERM: nothing must be left
        proc.wait(timeout=15)
        assert _is_down(url), "stopping `loadbench dashboard` left its Streamlit server running"
    finally:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(ProcessLookupError):  # anything of ours left: its whole group
            os.killpg(proc.pid, signal.SIGKILL)


def _is_down(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
    except OSError:
        return True
    return False


@pytest.fixture
def browser_page():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        yield page
        browser.close()


def _wait_for_charts(page, url: str, count: int) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    page.wait_for_function(
        f"document.querySelectorAll('{CHART}').length >= {count}", timeout=60_000
    )
    page.wait_for_timeout(800)  # let the vega renderers finish drawing


def test_charts_render_in_chromium(browser_page, fixture_results, tmp_path):
    page = browser_page
    with _dashboard(fixture_results.root, tmp_path / "streamlit.log") as url:
        _wait_for_charts(page, url, 2)
        assert page.locator(EXCEPTION).count() == 0
        marks = page.locator(".vega-embed").first.locator("canvas, svg")
        assert marks.first.bounding_box()["width"] > 100
        assert page.get_by_text("Shape set", exact=False).count() >= 2
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)

        _wait_for_charts(page, f"{url}/target_host", 1)
        assert page.locator(EXCEPTION).count() == 0
        assert page.get_by_text("Recommended", exact=False).count() >= 1
        page.screenshot(path=str(tmp_path / "target_host.png"), full_page=True)
    assert (tmp_path / "overview.png").stat().st_size > 10_000


def test_empty_state_in_chromium(browser_page, tmp_path):
    page = browser_page
    with _dashboard(tmp_path / "no-results", tmp_path / "streamlit.log") as url:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("make bench SHAPES=gpt2").wait_for(timeout=30_000)
        assert page.locator(EXCEPTION).count() == 0
        page.screenshot(path=str(tmp_path / "empty.png"), full_page=True)
