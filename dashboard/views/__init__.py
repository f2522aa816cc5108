"""The dashboard's pages, listed once: adding a page is one file in this folder plus one line in
`PAGES`. Each file is a Streamlit script whose `main()` is made of widget calls.

`app.py` registers them (the first is the default), `loadbench dashboard --help` names them, and
the tests and `make screenshots` walk them. Importing this package runs no page and imports
nothing heavy (no streamlit, no jax).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Page:
    """One page: its script in `dashboard/views/`, its title in the sidebar, and its icon."""

    file: str
    title: str
    icon: str

    @property
    def script(self) -> str:
        """The path Streamlit's AppTest switches to (`views/phases.py`)."""
        return f"views/{self.file}"

    @property
    def url_path(self) -> str:
        """The page's path in the URL (Streamlit's default: the file's stem)."""
        return self.file.removesuffix(".py")


PAGES: Final = (
    Page("overview.py", "Overview", ":material/scatter_plot:"),
    Page("phases.py", "Phases", ":material/stacked_bar_chart:"),
    Page("timeline.py", "Timeline", ":material/timeline:"),
    Page("target_host.py", "Target host", ":material/dns:"),
    Page("compare.py", "Compare", ":material/compare_arrows:"),
    Page("history.py", "History", ":material/history:"),
    Page("memray.py", "memray", ":material/local_fire_department:"),
)


def titles() -> str:
    """`Overview, Phases, ...`: the pages as the help text names them."""
    return ", ".join(p.title for p in PAGES)
