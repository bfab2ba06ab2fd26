"""Rankings: ``event, item, rank`` (a race, a results page) as all pairs within each event.

The better (smaller) rank wins, equal ranks tie; pairs follow the table's row order
(the earlier row is the left item) and are named ``<event>:<k>``. A row without a rank
takes part in no pair.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import SOURCE_ROW, row_numbers, text_cells
from prefshap_core.data.layouts.mapping import require_column
from prefshap_core.errors import DataValidationError

EVENT_NAMES = ("event", "race", "query", "session", "heat", "contest", "round", "list")
RANK_NAMES = ("rank", "position", "place", "ranking")


def find_rankings(
    duels: pd.DataFrame, event: str | None, rank: str | None
) -> tuple[str, str] | None:
    """The event and rank columns of a rankings table, or None if it is not one."""
    columns = [str(c) for c in duels.columns]
    rank = rank or next((c for c in columns if c.lower() in RANK_NAMES), None)
    event = event or next((c for c in columns if c.lower() in EVENT_NAMES), None)
    if rank is None or event is None:
        return None
    return event, rank


def ranking_pairs(
    table: pd.DataFrame, event: str, rank: str, item: str, keep: list[str], file_name: str
) -> pd.DataFrame:
    """The long-format duels (``left, right, y, duel_id`` + ``keep``) of every event."""
    require_column(table, event, "--event-column", file_name)
    require_column(table, rank, "--rank-column", file_name)
    rows = row_numbers(table)
    cells = text_cells(table[rank])
    ranks = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~pd.isna(cells) & ~np.isfinite(ranks))
    if len(bad):
        raise DataValidationError(
            f"a rank must be a number: got {cells[bad[0]]!r}",
            file=file_name,
            row=int(rows[bad[0]]),
            column=rank,
        )
    events, items = text_cells(table[event]), text_cells(table[item])
    ranked = np.flatnonzero(np.isfinite(ranks) & ~pd.isna(events))
    codes, names = pd.factorize(pd.Series(events[ranked], dtype=object))
    parts: list[tuple[np.ndarray, np.ndarray, list[str]]] = []
    for code, name in enumerate(names.tolist()):
        members = ranked[codes == code]
        first, second = np.triu_indices(len(members), k=1)
        labels = [f"{name}:{k}" for k in range(1, len(first) + 1)]
        parts.append((members[first], members[second], labels))
    if not parts or sum(len(p[2]) for p in parts) == 0:
        raise DataValidationError(
            "no event ranks two or more items: there are no duels", file=file_name
        )
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    y = np.sign(ranks[b] - ranks[a]).astype(np.int64)  # the smaller rank wins
    pairs = pd.DataFrame(
        {
            "left": items[a],
            "right": items[b],
            "y": y.astype(str).astype(object),
            "duel_id": [label for p in parts for label in p[2]],
        },
        index=pd.Index(rows[a], name=SOURCE_ROW),
    )
    for column in keep:
        pairs[column] = table[column].to_numpy()[a]
    return pairs
