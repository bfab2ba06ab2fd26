"""Columns that look like identifiers, which are not covariates unless the user opts in.

A model that learns from a student number or a row id learns nothing true (and a
C-GPM would happily train on it), so among the columns that would otherwise become
covariates by default, these are set aside and reported:

- a column named ``id`` (other than the items' id column), or whose name ends in
  ``_id``, ``Id`` or ``ID``;
- an integer-valued column whose values are all distinct, in the items table or a
  contexts table (at least :data:`MIN_DISTINCT` of them: a handful of distinct small
  numbers is a covariate), or one with more than :data:`MAX_DUEL_DISTINCT` distinct
  values in the duels table.

Columns the caller names (``use_columns``, ``--use-column``, a checkbox) or declares
(``numeric=``, ``categorical=``, explicit column lists) are always used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import is_number_text, text_codes

MIN_DISTINCT = 20
MAX_DUEL_DISTINCT = 100
_ID_SUFFIXES = ("_id", "Id", "ID")


@dataclass(frozen=True)
class IgnoredColumn:
    """A column set aside as id-like: where, and why."""

    table: str  # "items", "duels" or "contexts"
    column: str
    reason: str

    def describe(self) -> str:
        return f"{self.table} column '{self.column}' is not used: {self.reason}"


def id_like_reason(name: str, series: pd.Series, table: str) -> str | None:
    """Why ``series`` looks like an identifier in ``table``, or None."""
    hint = " (name it to use it anyway: --use-column, or the checkbox on the Data page)"
    if name.lower() == "id" or name.endswith(_ID_SUFFIXES):
        return "its name says it is an identifier" + hint
    codes, texts = text_codes(series)
    present = texts[[t is not None for t in texts.tolist()]] if len(texts) else texts
    if len(present) == 0 or not all(_is_integer_text(t) for t in present.tolist()):
        return None
    counts = np.bincount(codes[codes >= 0], minlength=len(texts))
    if table == "duels":
        if len(present) > MAX_DUEL_DISTINCT:
            return (
                f"integer values with {len(present):,} distinct values "
                f"(more than {MAX_DUEL_DISTINCT}) look like an identifier" + hint
            )
        return None
    if len(present) >= MIN_DISTINCT and counts.max() == 1:
        return f"integer values, all {len(present):,} distinct, look like an identifier" + hint
    return None


def split_id_like(
    table: pd.DataFrame, columns: Iterable[str], table_name: str, use_columns: Iterable[str]
) -> tuple[list[str], list[IgnoredColumn]]:
    """The columns to use and the id-like ones set aside (unless in ``use_columns``)."""
    wanted = set(use_columns)
    kept, ignored = [], []
    for column in columns:
        reason = None if column in wanted else id_like_reason(column, table[column], table_name)
        if reason is None:
            kept.append(column)
        else:
            ignored.append(IgnoredColumn(table_name, column, reason))
    return kept, ignored


def _is_integer_text(text: str) -> bool:
    return is_number_text(text) and float(text).is_integer()
