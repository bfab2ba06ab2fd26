"""Context covariates from their own table: ``contexts.csv`` joined to the duels on a key.

The first column of ``contexts.csv`` names the key, which must also be a column of
``duels.csv`` (e.g. ``student``: who made the choice). Its other columns become each
duel's context covariates; the key itself never is. Keys are compared as trimmed
strings after numeric normalisation (``"1"`` = ``"1.0"`` = ``"01"``); a duplicate key
is an error; a duel whose key is not in the table is an invalid row (dropped in
lenient mode, an error in strict mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import is_number_text, row_numbers, text_codes
from prefshap_core.data.duel_rows import DuelRowProblem, KeyWords, key_problems
from prefshap_core.data.id_columns import IgnoredColumn, split_id_like
from prefshap_core.errors import DataProblems, DataValidationError


@dataclass(frozen=True, eq=False)
class ContextJoin:
    key: str
    columns: list[str]  # context covariates taken from the contexts table
    position: np.ndarray  # (duels,) row of the contexts table per duel; -1: unknown key
    problem: DuelRowProblem | None  # the duels whose key is unknown
    ignored: list[IgnoredColumn]


def normalised_keys(series: pd.Series) -> np.ndarray:
    """Trimmed key texts, numbers in one canonical form ("1.0" -> "1"); None if missing."""
    codes, texts = text_codes(series)
    canonical = np.array([_canonical(t) for t in texts.tolist()] + [None], dtype=object)
    return canonical[codes]


def join_contexts(
    duels: pd.DataFrame,
    contexts: pd.DataFrame,
    *,
    duels_file: str,
    contexts_file: str,
    reserved: tuple[str, ...],
    use_columns: tuple[str, ...] = (),
) -> ContextJoin:
    """Match every duel to its row of ``contexts`` by the key (the first column)."""
    key = str(contexts.columns[0])
    if key not in duels.columns:
        raise DataValidationError(
            f"the first column of {contexts_file} ({key!r}) is the key that joins it to "
            f"{duels_file}, but {duels_file} has no such column (its columns: "
            f"{', '.join(map(str, duels.columns[:12]))})",
            file=contexts_file,
            column=key,
        )
    rows = row_numbers(contexts)
    keys = normalised_keys(contexts[key])
    _check_keys(keys, rows, key, contexts_file)
    others = [str(c) for c in contexts.columns[1:]]
    clash = [c for c in others if c in duels.columns or c in reserved]
    if clash:
        raise DataValidationError(
            f"this column is also a column of {duels_file} (or one of {', '.join(reserved)}): "
            "rename it in one of the files",
            file=contexts_file,
            column=clash[0],
        )
    columns, ignored = split_id_like(contexts, others, "contexts", use_columns)
    if not columns:
        raise DataValidationError(
            f"has no context covariates besides the key {key!r}"
            + (f" ({'; '.join(i.describe() for i in ignored)})" if ignored else ""),
            file=contexts_file,
        )
    duel_keys = normalised_keys(duels[key])
    position = pd.Index(keys).get_indexer(duel_keys)
    unknown = np.flatnonzero(position < 0)
    problem = None
    if len(unknown):
        first = unknown[0]
        detail = (
            "the key is missing"
            if duel_keys[first] is None
            else f"{duel_keys[first]!r} is not a key in {contexts_file}"
        )
        problem = DuelRowProblem("unknown context key", key, unknown, detail)
    return ContextJoin(key, columns, position, problem, ignored)


KEY_WORDS = KeyWords("key", "keys", "have no key", "repeat a key")


def _check_keys(keys: np.ndarray, rows: np.ndarray, key: str, file_name: str) -> None:
    problems = key_problems(keys, rows, key, file_name, KEY_WORDS)
    if problems:
        raise DataProblems(problems)


def _canonical(text: str | None) -> str | None:
    if text is None or not is_number_text(text):
        return text
    try:
        number = Decimal(text)
    except InvalidOperation:
        return text
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")
