"""Fixtures for the dashboard tests: a results folder written per SCHEMA.md, and AppTest helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dashboard.views import PAGES as ALL_PAGES

sys.path.insert(0, str(Path(__file__).parent))  # fixture_results, importable by name

from fixture_results import FixtureInfo, write_results  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
PAGES = [p.script for p in ALL_PAGES[1:]]  # the Overview is the landing page


@pytest.fixture(scope="session")
def fixture_results(tmp_path_factory: pytest.TempPathFactory) -> FixtureInfo:
    """Two runs on two machines, 3 strategies x 2 shape sets x 3 repeats, a crash, a memray run."""
    return write_results(tmp_path_factory.mktemp("results"))


@pytest.fixture
def app(fixture_results: FixtureInfo, monkeypatch: pytest.MonkeyPatch):
    """A function `app(page=None)` returning a run AppTest over the fixture folder."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("LOADBENCH_RESULTS", str(fixture_results.root))

    def make(page: str | None = None, folder: Path | None = None) -> AppTest:
        if folder is not None:
            monkeypatch.setenv("LOADBENCH_RESULTS", str(folder))
        at = AppTest.from_file(str(APP), default_timeout=120).run()
        if page:
            at.switch_page(page).run()
        return at

    return make


@pytest.fixture(scope="session")
def sa3_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One sa3-like run of every registered strategy (`fixture_sa3`): the issue-36 screen."""
    from fixture_sa3 import write_sa3

    return write_sa3(tmp_path_factory.mktemp("sa3"))
