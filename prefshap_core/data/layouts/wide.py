"""Wide choice tables: one row per choice, both alternatives' attributes on the row.

As stated-preference experiments publish them (``price1, time1, ..., price2, time2,
..., choice``, ``choice`` naming ``choice1`` or ``choice2``). There is no item table:
the items are the distinct attribute combinations, each named from its values in the
header's attribute order (``price=2400|time=150``); each row is a duel between its
two alternatives, won by the chosen one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.context_table import normalised_keys
from prefshap_core.data.csv_io import SOURCE_ROW, row_numbers, text_cells
from prefshap_core.data.layouts.mapping import require_column
from prefshap_core.data.layouts.pairs import ColumnPair, is_win_stem, paired_columns
from prefshap_core.errors import DataValidationError

CHOICE_NAMES = ("choice", "chosen", "choice_made", "selected", "choose")
_CHOICE_ID = re.compile(r"(choice|task|set)[._]?id", re.IGNORECASE)


@dataclass(frozen=True, eq=False)
class WideChoices:
    items: pd.DataFrame  # id, then one column per attribute
    duels: pd.DataFrame  # left, right, winner, duel_id, then the other columns
    attributes: list[str]
    choice: str


def find_wide(duels: pd.DataFrame, outcome: str | None) -> tuple[list[ColumnPair], str] | None:
    """The attribute pairs and the choice column of a wide choice table, or None."""
    columns = [str(c) for c in duels.columns]
    pairs = [p for p in paired_columns(columns) if not is_win_stem(p.stem)]
    choice = outcome or next((c for c in columns if c.lower() in CHOICE_NAMES), None)
    if not pairs or choice is None or choice not in columns:
        return None
    return pairs, choice


def is_wide_table(duels: pd.DataFrame) -> bool:
    """A table the reader takes as a wide choice table (no left/right columns)."""
    columns = set(map(str, duels.columns))
    sides = {"left", "right"} <= columns or {"winner", "loser"} <= columns
    return not sides and find_wide(duels, None) is not None


def item_ids(values: list[np.ndarray], attributes: list[str]) -> np.ndarray:
    """``price=2400|time=150`` per row, from each attribute's normalised values."""
    parts = [
        np.array([f"{a}={'' if v is None else v}" for v in column.tolist()], dtype=object)
        for a, column in zip(attributes, values, strict=True)
    ]
    ids = parts[0]
    for part in parts[1:]:
        ids = ids + "|" + part
    return ids


def wide_tables(
    duels: pd.DataFrame, pairs: list[ColumnPair], choice: str, file_name: str
) -> WideChoices:
    """The item table of the distinct alternatives and the long-format duels."""
    require_column(duels, choice, "--outcome-column", file_name)
    attributes = [p.stem for p in pairs]
    rows = row_numbers(duels)
    first = item_ids([normalised_keys(duels[p.first]) for p in pairs], attributes)
    second = item_ids([normalised_keys(duels[p.second]) for p in pairs], attributes)
    n = len(duels)
    every = np.concatenate([first, second])
    order = np.argsort(np.concatenate([2 * np.arange(n), 2 * np.arange(n) + 1]), kind="stable")
    seen = pd.Series(every[order]).drop_duplicates()
    where = order[seen.index.to_numpy()]  # position in `every` of each item's first use
    items = pd.DataFrame({"id": seen.to_numpy()})
    for pair in pairs:
        both = np.concatenate([duels[pair.first].to_numpy(), duels[pair.second].to_numpy()])
        items[pair.stem] = both[where]
    side = _chosen_side(duels[choice], pairs[0].tokens, rows, choice, file_name)
    long = pd.DataFrame(
        {"left": first, "right": second, "winner": side},
        index=pd.Index(rows, name=SOURCE_ROW),
    )
    paired = {c for p in pairs for c in (p.first, p.second)} | {choice}
    for column in duels.columns:
        if column in paired:
            continue
        name = "duel_id" if _CHOICE_ID.fullmatch(str(column)) else column
        long[name] = duels[column].to_numpy()
    return WideChoices(items, long, attributes, choice)


def _chosen_side(
    series: pd.Series, tokens: tuple[str, str], rows: np.ndarray, column: str, file_name: str
) -> np.ndarray:
    """``left`` / ``right`` per row from a choice naming one alternative; None: no choice."""
    cells = text_cells(series)
    lowered = [None if c is None else c.lower() for c in cells.tolist()]
    first, second = tokens[0].lower(), tokens[1].lower()
    words = {first: "left", second: "right", "left": "left", "right": "right"}
    side = np.full(len(cells), None, dtype=object)
    for k, text in enumerate(lowered):
        if text is None:
            continue
        side[k] = words.get(text) or (
            "left" if text.endswith(first) else "right" if text.endswith(second) else "?"
        )
    bad = np.flatnonzero(side == "?")
    if len(bad):
        raise DataValidationError(
            f"the choice {cells[bad[0]]!r} names neither alternative (expected a value "
            f"ending in {tokens[0]!r} or {tokens[1]!r}, as the paired columns do)"
            + (f"; {len(bad) - 1} more rows too" if len(bad) > 1 else ""),
            file=file_name,
            row=int(rows[bad[0]]),
            column=column,
        )
    return side
