"""The Data page's column-mapping panel: which column of the user's files is which.

The reader guesses every part; the panel shows each guess as a field's placeholder and
takes overrides. It is open whenever the reader is not sure (another layout than one
row per duel, an R row-name key, an ambiguous id column) or the files could not be read.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.components.text import md

MAPPING_PARTS = (
    ("id", "Item id (items table)"),
    ("left", "First item (winner/loser: the winner)"),
    ("right", "Second item (winner/loser: the loser)"),
    ("outcome", "Outcome or choice"),
    ("context_key", "Context key (joins contexts.csv)"),
    ("counts", "Counts: first's wins, second's wins[, ties]"),
    ("event", "Rankings: event"),
    ("rank", "Rankings: rank"),
)


def overrides() -> tuple[tuple[str, str], ...]:
    """The mapping panel's overrides as last entered (the panel is drawn further down)."""
    pairs = []
    for part, _ in MAPPING_PARTS:
        text = st.session_state.get(f"data:mapping:{part}") or ""
        if text.strip():
            pairs.append((part, text.strip()))
    return tuple(pairs)


def panel(loaded: state.LoadedData | None, *, open_: bool) -> None:
    """Fields overriding the reader's column guesses, each showing the current guess
    (the files just read, else the upload in use); open when the reader is not sure."""
    doubt = loaded.data.report.doubt if loaded is not None else ""
    if loaded is None:  # nothing read (yet): the guesses behind the upload in use
        active = state.active()
        loaded = active if active is not None and active.source == "upload" else None
    report = loaded.data.report if loaded is not None else None
    used = report.mapping if report is not None else None
    guesses = used.to_json() if used is not None else {}
    if used is not None and used.counts:
        guesses["counts"] = ",".join(used.counts)
    for part in ("event", "rank"):
        guesses[part] = getattr(used, part, None)
    label = "Column mapping: which column is which (the reader guesses; change any)"
    with st.expander(label, expanded=open_):
        if doubt:
            st.caption(f"Worth checking: {md(doubt)}.")
        columns = st.columns(4)
        for k, (part, label) in enumerate(MAPPING_PARTS):
            guess = guesses.get(part)
            columns[k % 4].text_input(
                label, key=f"data:mapping:{part}", placeholder=f"guess: {guess}" if guess else ""
            )
