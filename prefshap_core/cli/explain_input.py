"""Reading ``prefshap explain``'s DUELS.csv: item ids, winners, contexts, --lenient rows.

Every bad cell is a DataValidationError naming file, row and column. The command uses
:func:`usable_rows` (--lenient), :func:`outside_pool_rows`, :func:`read_duels`,
:func:`read_contexts` and :func:`tie_count`; the rest is private to this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import row_numbers
from prefshap_core.data.duel_rows import TIE_WORDS
from prefshap_core.data.encoding.spec import EncodingSpec
from prefshap_core.data.encoding.tables import encode_rows
from prefshap_core.data.layouts.explain_rows import ExplainDuels, side_rows
from prefshap_core.errors import DataValidationError
from prefshap_core.models.preference_function import PreferenceFunction


@dataclass(frozen=True)
class Duels:
    """The duels of DUELS.csv, one entry per row in file order."""

    left: np.ndarray  # item ids (str)
    right: np.ndarray
    winners: np.ndarray | None  # +1 left won, -1 right won, 0 tie or unknown; None: no column
    ids: np.ndarray  # the rows' numbers (str), the explanation's duel ids


def read_duels(
    table: pd.DataFrame,
    fn: PreferenceFunction,
    file_name: str,
    rows: tuple[np.ndarray, np.ndarray] | None = None,
) -> Duels:
    """Ids and winners of every row (an unknown id or a bad winner names its cell).

    ``rows``: both sides as covariate rows (:func:`outside_pool_rows`), for a wide
    table whose alternatives are not all in the model's pool; the winners are then
    read against the table's own (value-built) ids.
    """
    if rows is None:
        ids = (_ids(table, fn, "left", file_name), _ids(table, fn, "right", file_name))
    else:
        ids = (table["left"].to_numpy(), table["right"].to_numpy())
    left, right = rows or ids
    return Duels(
        left=left,
        right=right,
        winners=_winners(table, *ids, file_name),
        ids=np.array([str(r) for r in row_numbers(table)]),
    )


def outside_pool_rows(
    given: ExplainDuels, fn: PreferenceFunction, file_name: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """A wide table with alternatives not in the model's pool: both sides as encoded
    covariate rows (model space); None when every alternative is a pool item."""
    if given.layout != "wide":
        return None
    known = set(np.asarray(fn.item_ids).astype(str).tolist())
    ids = set(given.table["left"].tolist()) | set(given.table["right"].tolist())
    if ids <= known:
        return None
    spec = EncodingSpec.from_feature_space(fn.item_space, "items")
    return (
        encode_rows(side_rows(given, "left"), spec, file_name=file_name).model,
        encode_rows(side_rows(given, "right"), spec, file_name=file_name).model,
    )


def usable_rows(
    table: pd.DataFrame, fn: PreferenceFunction, file_name: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """--lenient: the rows whose ids and winner are valid, and the others with reasons."""
    known = set(np.asarray(fn.item_ids).astype(str).tolist())
    reasons = []
    for left, right, winner in zip(
        _column(table, "left", file_name),
        _column(table, "right", file_name),
        table["winner"] if "winner" in table.columns else [None] * len(table),
        strict=True,
    ):
        if left is None or right is None:
            reasons.append(("left" if left is None else "right", "missing item id"))
        elif str(left) not in known or str(right) not in known:
            side = "left" if str(left) not in known else "right"
            reasons.append((side, "unknown item id (not among the model's item_ids)"))
        elif winner is not None and not _is_outcome(winner, left, right):
            reasons.append(("winner", "the winner is neither the left nor the right item"))
        else:
            reasons.append(None)
    bad = np.array([r is not None for r in reasons], dtype=bool)
    rows = row_numbers(table)
    rejected = pd.DataFrame(
        {
            "file": file_name,
            "row": rows[bad],
            "line": rows[bad] + 1,
            "column": [r[0] for r in reasons if r is not None],
            "reason": [r[1] for r in reasons if r is not None],
        }
    )
    rejected = pd.concat([rejected, table[bad].reset_index(drop=True)], axis=1)
    if bad.all():
        raise DataValidationError("no usable duel rows (see the rejected rows)", file=file_name)
    return table[~bad], rejected


def _column(table: pd.DataFrame, name: str, file_name: str) -> pd.Series:
    if name not in table.columns:
        raise DataValidationError(
            f"missing column '{name}' (columns: {', '.join(map(str, table.columns))})",
            file=file_name,
        )
    return table[name]


def _ids(table: pd.DataFrame, fn: PreferenceFunction, side: str, file_name: str) -> np.ndarray:
    known = set(np.asarray(fn.item_ids).astype(str).tolist())
    values = _column(table, side, file_name)
    rows = row_numbers(table)
    for row, value in zip(rows, values, strict=True):
        if value is None or str(value) not in known:
            what = "missing item id" if value is None else f"unknown item id '{value}'"
            raise DataValidationError(
                f"{what} (not among the model's {len(known)} item_ids)",
                file=file_name, row=int(row), column=side,
            )  # fmt: skip
    return values.astype(str).to_numpy()


def _is_tie(winner: str) -> bool:
    return str(winner).strip().lower() in TIE_WORDS


def _is_outcome(winner: str, left: str, right: str) -> bool:
    return winner in ("left", "right", left, right) or _is_tie(winner)


def tie_count(table: pd.DataFrame, winners: np.ndarray | None) -> int:
    """Duels whose winner cell says draw / tie (not an unknown outcome)."""
    if winners is None:
        return 0
    cells = table["winner"].to_numpy()
    pairs = zip(winners, cells, strict=True)
    return int(sum(w == 0 and c is not None and _is_tie(c) for w, c in pairs))


def _winners(
    table: pd.DataFrame, left: np.ndarray, right: np.ndarray, file_name: str
) -> np.ndarray | None:
    if "winner" not in table.columns:
        return None
    out = np.zeros(len(left), dtype=np.int8)
    for k, (row, value) in enumerate(zip(row_numbers(table), table["winner"], strict=True)):
        if value is None:
            continue  # unknown outcome: explained all the same
        if value in ("left", left[k]):
            out[k] = 1
        elif value in ("right", right[k]):
            out[k] = -1
        elif not _is_tie(value):  # a tie stays 0: shown left vs right
            raise DataValidationError(
                f"winner '{value}' is neither the left ('{left[k]}') nor the right "
                f"('{right[k]}') item, nor 'left'/'right', nor 'draw'/'tie'",
                file=file_name, row=int(row), column="winner",
            )  # fmt: skip
    return out


def read_contexts(table: pd.DataFrame, fn: PreferenceFunction, file_name: str) -> np.ndarray:
    """Model-space contexts from model columns (raw values) or from group columns."""
    space = fn.context_space
    assert space is not None
    names = list(space.feature_names)
    if all(name in table.columns for name in names):
        raw = np.empty((len(table), len(names)))
        rows = row_numbers(table)
        for j, name in enumerate(names):
            numbers = pd.to_numeric(table[name], errors="coerce")
            bad = np.flatnonzero(numbers.isna().to_numpy())
            if len(bad):
                raise DataValidationError(
                    f"not a number: {table[name].iloc[bad[0]]!r}",
                    file=file_name, row=int(rows[bad[0]]), column=name,
                )  # fmt: skip
            raw[:, j] = numbers.to_numpy(dtype=np.float64)
        return space.standardise(raw)
    try:
        spec = EncodingSpec.from_feature_space(space, "context")
    except ValueError as err:
        raise DataValidationError(
            f"context columns missing: give the model's context columns {names}", file=file_name
        ) from err
    sources = sorted({s for g in spec.groups for s in g.sources})
    missing = [s for s in sources if s not in table.columns]
    if missing:
        raise DataValidationError(
            f"context columns missing: {', '.join(missing)} (either these, or the model's "
            f"context columns {', '.join(names)})",
            file=file_name,
        )
    return encode_rows(table, spec, file_name=file_name).model
