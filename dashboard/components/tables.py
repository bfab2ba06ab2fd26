"""Paginated tables: large data stays responsive (only one page is sent to the browser)."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from dashboard.state import PERSIST


def paginated(
    frame: pd.DataFrame,
    *,
    key: str,
    page_size: int = 20,
    selectable: bool = False,
    column_config: dict | None = None,
) -> int | None:
    """Show ``frame`` one page at a time; returns the selected row's position in ``frame``.

    Row selection (``selectable``) reruns the page at once, so a click on a row can
    open something (e.g. the duel view).
    """
    n_pages = max(1, math.ceil(len(frame) / page_size))
    page = 1
    if n_pages > 1:
        page = st.pagination(n_pages, key=f"page:{key}", persist_state=PERSIST)
    page = min(page, n_pages)
    start = (page - 1) * page_size
    shown = frame.iloc[start : start + page_size]
    st.caption(
        f"Rows {start + 1:,}–{start + len(shown):,} of {len(frame):,}" if len(frame) else "No rows."
    )
    if not selectable:
        st.dataframe(shown, hide_index=True, column_config=column_config, width="stretch")
        return None
    event = st.dataframe(
        shown,
        hide_index=True,
        column_config=column_config,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key=f"table:{key}:{page}",
    )
    rows = event.selection.rows if event is not None else []
    return start + int(rows[0]) if rows else None


def without_duplicate_names(frame: pd.DataFrame, name: str, id_column: str) -> pd.DataFrame:
    """``frame`` without its ``name`` column when every name equals its id (data with
    no names): the same column twice only crowds the table. The id stays."""
    same = (
        name in frame
        and id_column in frame
        and frame[name].astype(str).equals(frame[id_column].astype(str))
    )
    return frame.drop(columns=[name]) if same else frame
