"""Feature labels that say how much of a feature was made up: "height (17 % imputed)".

A feature whose values were mostly filled in (median, most frequent category) can
look important while saying little about the data, so every plot's label of it
carries the share of filled rows once that share reaches ``IMPUTED_NOTE_SHARE``.
"""

from __future__ import annotations

from collections.abc import Mapping

from prefshap_core.data.duel_data import DuelData

IMPUTED_NOTE_SHARE = 0.05  # from 5 % filled rows a label says so


def imputed_shares(data: DuelData) -> dict[str, float]:
    """Share of the rows whose value of each column was filled in: item columns over
    the item rows, context columns over the duels (each duel has its context row)."""
    rows = {"items": data.n_items, "context": data.n_duels}
    shares: dict[str, float] = {}
    for note in data.report.imputed:
        n = rows.get(note.table, 0)
        if n > 0 and note.n_missing > 0:
            shares[note.column] = max(shares.get(note.column, 0.0), note.n_missing / n)
    return shares


def imputed_note(share: float) -> str:
    """'17 % imputed' (whole percents; '< 1 %' never occurs above the threshold)."""
    return f"{round(100 * share):.0f} % imputed"


def feature_label(name: str, imputed: Mapping[str, float] | None, *, html: bool = True) -> str:
    """``name``, with its imputed share beneath it (``html``) or in brackets beside it
    when at least ``IMPUTED_NOTE_SHARE`` of its rows were filled in."""
    column = name.split(":", 1)[1] if name.startswith(("left:", "right:")) else name
    share = (imputed or {}).get(column, 0.0)
    if share < IMPUTED_NOTE_SHARE:
        return name
    note = imputed_note(share)
    if not html:
        return f"{name} ({note})"
    return f"{name}<br><span style='font-size:10px;color:#666666'>{note}</span>"
