"""Which column plays which part: the column mapping, the item id guess, R row names.

A published table rarely names its columns as the upload format does. The reader
guesses each part (the item table's id column is the one whose values the duel file
references, whatever its name) and every guess can be overridden by a
:class:`ColumnMapping` field (the CLI's ``--id-column``, ``--left-column``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from prefshap_core.data.context_table import normalised_keys
from prefshap_core.data.csv_io import ROW_NAMES, text_cells, unnamed_column_reason
from prefshap_core.errors import DataValidationError

LAYOUTS = ("long", "counts", "wide", "rankings")
MAPPING_FIELDS = ("id", "left", "right", "outcome", "context_key", "counts", "event", "rank")


@dataclass(frozen=True)
class ColumnMapping:
    """The columns of the user's tables, by part; None: guess it (or: not used).

    ``counts``: the columns holding the first item's wins, the second's, and
    optionally the ties, of a count table (``--count-columns A,B[,T]``).
    """

    id: str | None = None
    left: str | None = None
    right: str | None = None
    outcome: str | None = None
    context_key: str | None = None
    counts: tuple[str, ...] | None = None
    event: str | None = None
    rank: str | None = None

    @classmethod
    def from_texts(cls, texts: dict[str, str]) -> ColumnMapping:
        """From ``{field: column}`` as a form gives them (empty: guess; counts ``"A,B[,T]"``)."""
        given: dict = {k: v.strip() for k, v in texts.items() if v and v.strip()}
        unknown = sorted(set(given) - set(MAPPING_FIELDS))
        if unknown:
            raise ValueError(f"not a part of the column mapping: {', '.join(unknown)}")
        if "counts" in given:
            given["counts"] = tuple(c.strip() for c in given["counts"].split(","))
        return cls(**given)

    def to_json(self) -> dict[str, str | None]:
        """The JSON line's ``"mapping"``: the columns used (null where unused)."""
        return {
            "id": self.id,
            "left": self.left,
            "right": self.right,
            "outcome": self.outcome,
            "context_key": self.context_key,
            "weight": ",".join(self.counts) if self.counts else None,
        }


def require_column(table: pd.DataFrame, column: str, flag: str, file_name: str) -> str:
    """``column`` if the table has it; else an error naming the flag and the columns."""
    columns = [str(c) for c in table.columns]
    if column not in columns:
        raise DataValidationError(
            f"{flag} names a column the file does not have (columns: {', '.join(columns[:12])})",
            file=file_name,
            column=column,
        )
    return column


def referenced_keys(table: pd.DataFrame, columns: Sequence[str]) -> set[str]:
    """Every normalised, non-missing value of ``columns`` (the ids a file refers to)."""
    found: set[str] = set()
    for column in columns:
        found.update(k for k in normalised_keys(table[column]).tolist() if k is not None)
    return found


def is_key_of(series: pd.Series, wanted: set[str]) -> bool:
    """Whether the column's values are unique, never missing, and include all of ``wanted``."""
    keys = normalised_keys(series)
    if any(k is None for k in keys.tolist()):
        return False
    if len(set(keys.tolist())) != len(keys):
        return False
    return wanted <= set(keys.tolist())


def guess_id_column(
    items: pd.DataFrame, wanted: set[str], given: str | None, file_name: str
) -> str:
    """The item table's id column: ``given``, else the column holding every referenced id.

    Several such columns: ``id`` first, then R row names, then the first in the header.
    None: ``id`` (so that the unknown ids are reported against it as before), or with
    no ``id`` column the key column holding the most of them (the rest are reported).
    """
    if given is not None:
        return require_column(items, given, "--id-column", file_name)
    columns = [str(c) for c in items.columns]
    candidates = [c for c in columns if wanted and is_key_of(items[c], wanted)]
    for preferred in ("id", ROW_NAMES):
        if preferred in candidates:
            return preferred
    if candidates:
        return candidates[0]
    if "id" not in columns and ROW_NAMES in columns:
        raise unnamed_column_error(file_name)
    if "id" not in columns:  # some ids unknown: the key holding most, so they are named
        overlap = {c: len(wanted & set(normalised_keys(items[c]).tolist())) for c in columns}
        keys = [c for c in columns if overlap[c] and is_key_of(items[c], set())]
        if keys:
            return max(keys, key=lambda c: overlap[c])
    return "id"


def unnamed_column_error(file_name: str) -> DataValidationError:
    return DataValidationError(unnamed_column_reason(1), file=file_name, column="#1")


def align_ids(
    items: pd.DataFrame,
    id_column: str,
    duels: pd.DataFrame,
    references: Sequence[str],
    also: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tables with ids in one form where only normalising (``1.0`` = ``1``) matches them.

    Tables whose ids already match as written come back unchanged (the same objects);
    ``also``: columns rewritten with the references (a winner column of ids or words).
    """
    if id_column not in items.columns:
        return items, duels
    written = set(t for t in text_cells(items[id_column]).tolist() if t is not None)
    used = set()
    for column in references:
        used.update(t for t in text_cells(duels[column]).tolist() if t is not None)
    if used <= written:
        return items, duels
    items = items.copy()
    items[id_column] = normalised_keys(items[id_column])
    duels = duels.copy()
    for column in [*references, *(c for c in also if c in duels.columns)]:
        duels[column] = normalised_keys(duels[column])
    return items, duels


def resolve_context_row_names(
    duels: pd.DataFrame, contexts: pd.DataFrame, given_key: str | None, contexts_file: str
) -> pd.DataFrame:
    """A contexts table keyed by R row names: the key takes the name of the duel column
    whose values it holds (``given_key`` first); nothing refers to it: the advice to delete it.
    """
    if str(contexts.columns[0]) != ROW_NAMES:
        return contexts
    candidates = [given_key] if given_key is not None else [str(c) for c in duels.columns]
    for column in candidates:
        if column not in duels.columns or column in contexts.columns:
            continue
        wanted = referenced_keys(duels, [column])
        if wanted and is_key_of(contexts[ROW_NAMES], wanted):
            return contexts.rename(columns={ROW_NAMES: column})
    raise unnamed_column_error(contexts_file)


def key_first(contexts: pd.DataFrame, key: str) -> pd.DataFrame:
    """The contexts table with ``key`` (``--context-key``) as its first column (the join key)."""
    columns = [str(c) for c in contexts.columns]
    if key in columns:
        return contexts[[key] + [c for c in columns if c != key]]
    return contexts.rename(columns={columns[0]: key})


def y_like(series: pd.Series) -> bool:
    """An outcome column of 1 / -1 / 0 (``y``) rather than winners' ids or words."""
    texts = {t for t in text_cells(series).tolist() if t is not None}
    return bool(texts) and texts <= {"1", "+1", "-1", "0", "1.0", "-1.0", "0.0", "+1.0"}
