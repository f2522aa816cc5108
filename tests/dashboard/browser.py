"""Driving the dashboard in Debian's headless Chromium (Playwright, no browser download).

Shared by the browser test and `make screenshots` (`python tests/dashboard/browser.py --out DIR`):
start `loadbench dashboard` on a free port, open a page and wait for its charts, read a Vega legend,
find elements that overflow the viewport.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}
CHART = ".vega-embed svg, .vega-embed canvas"
EXCEPTION = '[data-testid="stException"]'
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `python tests/dashboard/browser.py` from a checkout
    sys.path.insert(0, str(REPO))
from dashboard.views import PAGES as _PAGES  # noqa: E402

PAGES = {p.url_path: ("" if i == 0 else p.url_path) for i, p in enumerate(_PAGES)}

# Elements whose right edge passes the viewport, unless an ancestor inside the main scroll area
# that fits hides the rest, or
# they sit inside a widget that scrolls by design (a data grid, a code block).
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth, out = [];
  const scrolls = '[data-testid="stDataFrame"], [data-testid="stCode"], [data-testid="stTable"]';
  for (const el of document.querySelectorAll('[data-testid="stMain"] *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 1 || el.closest(scrolls)) continue;
    let clipped = false;
    for (let a = el.parentElement; a && a.dataset.testid !== 'stMain'; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (['hidden', 'clip'].includes(s.overflowX) && a.getBoundingClientRect().right <= vw + 1) {
        clipped = true;
        break;
      }
    }
    if (!clipped) {
      const cls = (el.getAttribute('class') || '').slice(0, 40);
      const testid = el.closest('[data-testid]')?.dataset.testid;
      out.push(`${el.tagName.toLowerCase()}.${cls} [${testid}] right=${Math.round(r.right)}`);
    }
  }
  return out.slice(0, 10);
}"""

# label -> fill colour of each entry of the legends titled `title`, in the chart number `index`.
LEGEND_JS = """([index, title]) => {
  const svg = document.querySelectorAll('.vega-embed svg')[index];
  const out = {};
  for (const legend of svg.querySelectorAll('g.role-legend')) {
    const t = legend.querySelector('.role-legend-title text');
    if (!t || t.textContent !== title) continue;
    const labels = legend.querySelectorAll('.role-legend-label text');
    const symbols = legend.querySelectorAll('.role-legend-symbol path');
    labels.forEach((label, i) => { out[label.textContent] = symbols[i]?.getAttribute('fill'); });
  }
  return out;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def dashboard(results: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `python -m dashboard.cli --results DIR --port P` until its health check answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "dashboard.cli", "--results", str(results), "--port", str(port)]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=REPO
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the dashboard did not start on {url}:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.3)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):  # anything of ours left: its whole group
            os.killpg(proc.pid, signal.SIGKILL)


def is_down(url: str) -> bool:
    return not _healthy(url)


def settle(page, charts: int = 0, drawing_ms: int = 800) -> None:
    """Wait until Streamlit stops running the script and `charts` charts have drawn, then
    `drawing_ms` more for the vega renderers (0 where only widgets are read)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    page.wait_for_timeout(500)
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
    )
    if charts:
        page.wait_for_function(
            f"document.querySelectorAll('{CHART}').length >= {charts}", timeout=60_000
        )
    page.wait_for_function(  # the grey placeholders of elements not drawn yet
        "!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60_000
    )
    page.wait_for_function(  # elements of an earlier run, faded until this one replaces them
        "!document.querySelector('[data-stale=\"true\"]')", timeout=60_000
    )
    if drawing_ms:
        page.wait_for_timeout(drawing_ms)  # let the vega renderers finish drawing


def open_page(page, url: str, name: str, charts: int = 0) -> None:
    page.goto(f"{url}/{PAGES[name]}", wait_until="domcontentloaded")
    settle(page, charts)


def overflowing(page) -> list[str]:
    return page.evaluate(OVERFLOW_JS)


def legend(page, index: int, title: str) -> dict[str, str]:
    return page.evaluate(LEGEND_JS, [index, title])


def full_screenshot(page, path: Path) -> Path:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size(
        {"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height) + 40)}
    )
    page.wait_for_timeout(1500)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)
    return path


def launch(pw):
    return pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)


# The Overview's chart in its other modes (first screen only): name -> the link's query string.
OVERVIEW_VIEWS = {
    "checkpoint_2.5GiB": "ram=2.5&peak=checkpoint",
    "checkpoint_linear": "peak=checkpoint&log=0",
    "linear": "log=0",
}


def screenshots(results: Path, out: Path) -> list[Path]:
    """A full-page screenshot of every page over `results`, and of the empty state, into `out`."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmp:
        browser = launch(pw)
        page = browser.new_page(viewport=VIEWPORT)
        with dashboard(results, Path(tmp) / "app.log") as (url, _):
            for name in PAGES:  # a page may rightly draw no chart (one run: nothing to compare)
                open_page(page, url, name)
                with contextlib.suppress(Exception):
                    page.wait_for_selector(CHART, timeout=15_000)
                shots.append(full_screenshot(page, out / f"{name}.png"))
            page.goto(f"{url}/?ram=2.5", wait_until="domcontentloaded")  # a tight host, by link
            settle(page, 1)
            shots.append(full_screenshot(page, out / "overview_2.5GiB.png"))
            page.screenshot(path=str(out / "overview_first_screen.png"))  # 1400x1000, as seen
            shots.append(out / "overview_first_screen.png")
            for name, query in OVERVIEW_VIEWS.items():  # the chart's other axes, by link
                page.goto(f"{url}/?{query}", wait_until="domcontentloaded")
                settle(page, 1)
                page.screenshot(path=str(out / f"overview_{name}.png"))
                shots.append(out / f"overview_{name}.png")
            open_page(page, url, "timeline", 1)
            page.get_by_text("Split anonymous / file-backed").click()
            settle(page, 1)
            shots.append(full_screenshot(page, out / "timeline_split.png"))
        with dashboard(Path(tmp) / "no-results", Path(tmp) / "empty.log") as (url, _):
            open_page(page, url, "overview")
            shots.append(full_screenshot(page, out / "empty.png"))
        browser.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    """`make screenshots`: every page over RESULTS (default: the test fixture) into --out."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--results", help="results folder (default: write the test fixture)")
    parser.add_argument("--out", default="screenshots")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(args.results) if args.results else None
        if results is None:
            sys.path.insert(0, str(Path(__file__).parent))
            from fixture_results import write_results

            results = write_results(Path(tmp) / "results").root
        for shot in screenshots(results, Path(args.out)):
            print(shot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
