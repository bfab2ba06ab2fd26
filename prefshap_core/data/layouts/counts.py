"""Count tables: one row per pair (or per judge and pair) with each side's wins and ties.

As prefmod and BradleyTerry2 publish paired comparisons (``item1, item2, win1, win2,
tied``; ``home.team, away.team, home.wins, away.wins``). Each row becomes that many
duels of each outcome (a tie is half a win each way, as everywhere), in row order:
the first item's wins, the second's, the ties; so a count of 2 is exactly the duel
twice. Each duel remembers its row (``groups``): a split keeps a row's duels together.
The row's other columns are never context covariates unless named (``use_columns``):
a count table's extra columns are more counts or shares, not conditions of a duel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import SOURCE_ROW, row_numbers, text_cells
from prefshap_core.data.layouts.mapping import ColumnMapping, require_column
from prefshap_core.data.layouts.pairs import is_win_stem, paired_columns
from prefshap_core.errors import DataValidationError

TIE_NAMES = ("tied", "ties", "tie", "draws", "draw", "drawn")
# Each counted outcome is a duel row in memory: a file cannot ask for more than this
# (about 2 GB of duel arrays; the largest public count tables hold thousands).
MAX_COUNTED_DUELS = 20_000_000


@dataclass(frozen=True)
class CountColumns:
    left: str
    right: str
    counts: tuple[str, ...]  # first's wins, second's wins[, ties]


def find_count_columns(duels: pd.DataFrame, mapping: ColumnMapping) -> CountColumns | None:
    """The item and count columns of a count table, or None if it is not one."""
    columns = [str(c) for c in duels.columns]
    pairs = paired_columns(columns)
    if mapping.counts is not None:
        counts = tuple(mapping.counts)
    else:
        wins = [p for p in pairs if is_win_stem(p.stem)]
        if not wins:
            return None
        ties = [c for c in columns if c.lower() in TIE_NAMES]
        counts = (wins[0].first, wins[0].second, *ties[:1])
    items = [p for p in pairs if p.first not in counts and p.second not in counts]
    left = mapping.left or (items[0].first if items else None)
    right = mapping.right or (items[0].second if items else None)
    if left is None or right is None:
        for first, second in (("left", "right"), ("a", "b"), ("item1", "item2")):
            if first in columns and second in columns:
                left, right = left or first, right or second
                break
    if left is None or right is None:
        return None
    return CountColumns(left, right, counts)


def expand_counts(
    duels: pd.DataFrame, found: CountColumns, keep: list[str], file_name: str
) -> tuple[pd.DataFrame, np.ndarray]:
    """One long-format duel per counted outcome (``left, right, y, duel_id`` + ``keep``)
    and each duel's source row."""
    for column, flag in ((found.left, "--left-column"), (found.right, "--right-column")):
        require_column(duels, column, flag, file_name)
    if len(found.counts) not in (2, 3):
        raise DataValidationError(
            "--count-columns takes two or three columns: the first item's wins, the "
            f"second's, and optionally the ties (got {', '.join(found.counts)})",
            file=file_name,
        )
    rows = row_numbers(duels)
    counts = [
        _counts(duels[require_column(duels, c, "--count-columns", file_name)], rows, c, file_name)
        for c in found.counts
    ]
    outcomes = (1, -1, 0)[: len(counts)]
    per_row = np.stack(counts, axis=1)  # (rows, outcomes)
    total = per_row.sum(axis=1)
    if int(total.sum()) > MAX_COUNTED_DUELS:
        raise DataValidationError(
            f"the counts add up to {int(total.sum()):,} duels, more than the "
            f"{MAX_COUNTED_DUELS:,} this reader holds; is a count column really a count?",
            file=file_name,
        )
    position = np.repeat(np.arange(len(duels)), total)
    y = np.repeat(np.tile(np.asarray(outcomes, dtype=np.int64), len(duels)), per_row.ravel())
    within = np.arange(len(position)) - np.repeat(np.cumsum(total) - total, total) + 1
    source = rows[position]
    expanded = pd.DataFrame(
        {
            "left": text_cells(duels[found.left])[position],
            "right": text_cells(duels[found.right])[position],
            "y": y.astype(str).astype(object),
            "duel_id": [f"{r}.{k}" for r, k in zip(source.tolist(), within.tolist(), strict=True)],
        },
        index=pd.Index(source, name=SOURCE_ROW),
    )
    for column in keep:
        expanded[column] = duels[column].to_numpy()[position]
    if len(expanded) == 0:
        raise DataValidationError("every count is zero: there are no duels", file=file_name)
    return expanded, source


def _counts(series: pd.Series, rows: np.ndarray, column: str, file_name: str) -> np.ndarray:
    cells = text_cells(series)
    values = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(float)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
    bad &= ~pd.isna(cells)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataValidationError(
            f"a count must be a whole number, 0 or more: got {cells[first]!r}"
            + (f" ({int(bad.sum()) - 1} more rows too)" if bad.sum() > 1 else ""),
            file=file_name,
            row=int(rows[first]),
            column=column,
        )
    return np.nan_to_num(values, nan=0.0).astype(np.int64)  # an empty count: no duels
