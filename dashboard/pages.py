"""The dashboard's pages, declared once: each view's script, title, icon and URL path.

``app.py`` builds the navigation from :data:`ALL`; views switch and link to pages
with ``st.switch_page(pages.DUEL.page())`` / ``st.page_link(pages.DATA.page(), ...)``;
deep links (:mod:`dashboard.links`) and the tests take URL paths and scripts from
here. Adding a page: its view file under ``views/`` and one :class:`View` in
:data:`ALL`.

Why :class:`View` and not module-level ``st.Page`` objects: ``st.Page()`` outside a
script run (a test importing this module) returns an empty shell with no title or
URL path, and one made during a run would be shared by every session of the
server, while ``st.navigation`` marks the page it returns as runnable on that
object itself, so two sessions opening the same page at once would race on the
mark. :meth:`View.page` makes a fresh ``st.Page`` for the run that asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

DASHBOARD = Path(__file__).resolve().parent  # app.py's folder: page scripts are relative to it


@dataclass(frozen=True)
class View:
    """One page of the dashboard."""

    script: str  # relative to dashboard/ (what AppTest.switch_page takes), e.g. "views/duel.py"
    title: str
    icon: str
    url_path: str  # the page's URL (/duel); a contract: links made before must still open

    def page(self) -> st.Page:
        """This page as an ``st.Page``, for ``st.navigation``, ``st.switch_page`` and
        ``st.page_link`` (inside a script run)."""
        return st.Page(
            DASHBOARD / self.script,
            title=self.title,
            icon=self.icon,
            url_path=self.url_path,
            default=self == DEFAULT,
        )


DATA = View("views/data.py", "Data", ":material/table_view:", "data")
TRAIN = View("views/train.py", "Train", ":material/model_training:", "train")
EXPLAIN = View("views/explain.py", "Explain", ":material/insights:", "explain")
PLAYERS = View("views/players.py", "Players", ":material/person_search:", "players")
DUEL = View("views/duel.py", "Duel", ":material/sports_mma:", "duel")
HEAD_TO_HEAD = View(
    "views/head_to_head.py", "Head-to-head", ":material/compare_arrows:", "head-to-head"
)
CONTEXT_EFFECTS = View(
    "views/context_effects.py", "Context effects", ":material/tune:", "context-effects"
)
RANKINGS = View("views/rankings.py", "Rankings", ":material/leaderboard:", "rankings")
INTRANSITIVITY = View(
    "views/intransitivity.py", "Intransitivity", ":material/cycle:", "intransitivity"
)

ALL: tuple[View, ...] = (
    DATA,
    TRAIN,
    EXPLAIN,
    PLAYERS,
    DUEL,
    HEAD_TO_HEAD,
    RANKINGS,
    CONTEXT_EFFECTS,
    INTRANSITIVITY,
)  # the navigation's order
DEFAULT = EXPLAIN  # served at the root URL: the demo's explanation is useful at once
