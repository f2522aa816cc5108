"""The dashboard's entry point: `streamlit run dashboard/app.py` (or `loadbench dashboard`).

It registers the pages (`dashboard.views.PAGES`) and opens on the Overview. The results folder
comes from the environment variable `LOADBENCH_RESULTS` (default `results`), never from the URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `streamlit run dashboard/app.py` from a plain checkout
    sys.path.insert(0, str(HERE.parent))

from dashboard import link  # noqa: E402 (after the path fix above)
from dashboard.views import PAGES  # noqa: E402


def main() -> None:
    """Register the pages (Overview first and default) and run the selected one."""
    # an emoji favicon is drawn inline; a `:material/...:` one is fetched from a font CDN
    st.set_page_config(page_title="loadbench", page_icon="💾", layout="wide")
    # Streamlit's 6rem above the title would push the Overview's table off a 1000 px screen
    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.5rem}</style>")
    pages = [
        st.Page(HERE / "views" / p.file, title=p.title, icon=p.icon, default=(i == 0))
        for i, p in enumerate(PAGES)
    ]
    link.begin()
    try:
        st.navigation(pages).run()
    finally:  # also when a page stops early (`st.stop`): the URL holds what is on screen
        link.prune()


main()
