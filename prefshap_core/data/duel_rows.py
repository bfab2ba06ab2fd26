"""Validating the rows of a duels table: ids, outcome, duel ids; located problems.

Outcome forms (sample_data/README.md): ``left``, ``right`` and either ``winner`` (an
id, ``left``/``right``, or ``draw``/``tie``) or ``y`` (1, -1, or 0 for a tie); or
``winner`` and ``loser`` columns of ids (no left/right: the orientation is
randomised later, as for every form). A row with no outcome (an empty cell, ``NA``,
``NaN``, ``null``...) is *skipped* and counted, never fatal.

Invalid rows are collected by kind (one ``DuelRowProblem`` per reason, with every row
it hits) so that a strict build can list every kind at once (first row and count of
each) and a lenient build can drop them and report each rejected row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import text_cells, text_codes
from prefshap_core.errors import DataProblems, DataValidationError

TIE_WORDS = frozenset({"draw", "tie"})
_Y_VALUES = {
    "1": 1, "+1": 1, "1.0": 1, "+1.0": 1,
    "-1": -1, "-1.0": -1,
    "0": 0, "+0": 0, "-0": 0, "0.0": 0,
}  # fmt: skip
_FIRST_ROWS_SHOWN = 5


@dataclass(frozen=True)
class DuelRowProblem:
    """One kind of invalid duel row, with the rows it hits."""

    reason: str
    column: str
    rows: np.ndarray  # positions in the duels table
    first_detail: str


@dataclass(frozen=True, eq=False)
class DuelRows:
    """Per row of the duels table (garbage where invalid or skipped)."""

    left: np.ndarray  # item rows
    right: np.ndarray
    y: np.ndarray  # int8: +1 left won, -1 right won, 0 tie
    duel_ids: np.ndarray  # str
    skipped: np.ndarray  # bool: no outcome
    problems: list[DuelRowProblem]


def outcome_column(duels: pd.DataFrame, file_name: str) -> str:
    """``"winner"``, ``"y"`` or ``"winner/loser"``: how this table gives outcomes."""
    columns = [str(c) for c in duels.columns]
    has_sides = "left" in columns and "right" in columns
    if not has_sides and "winner" in columns and "loser" in columns:
        return "winner/loser"
    for needed in ("left", "right"):
        if needed not in columns:
            raise DataValidationError(
                f"there is no {needed!r} column (columns found: {', '.join(columns[:12])}); "
                "a duels file needs left, right and an outcome column (winner or y), "
                "or winner and loser columns",
                file=file_name,
                column=needed,
            )
    if "loser" in columns:
        raise DataValidationError(
            "a 'loser' column goes with a 'winner' column and no left/right columns; "
            "with left and right, give the outcome as winner or y",
            file=file_name,
            column="loser",
        )
    given = [c for c in ("winner", "y") if c in columns]
    if len(given) != 1:
        raise DataValidationError(
            "give the outcome in exactly one column: 'winner' (the winning id, or "
            "'left'/'right', or 'draw'/'tie') or 'y' (1 if left won, -1 if right won, "
            "0 for a tie); " + ("both are present" if given else "neither is present"),
            file=file_name,
        )
    return given[0]


def validate_duel_rows(
    duels: pd.DataFrame,
    outcome: str,
    item_index: pd.Index,
    rows: np.ndarray,
    items_file: str,
) -> DuelRows:
    """Item rows, y and duel ids per duel, which rows have no outcome, and the problems."""
    if outcome == "winner/loser":
        side_columns = ("winner", "loser")
        left_ids, right_ids = text_cells(duels["winner"]), text_cells(duels["loser"])
        y = np.ones(len(duels), dtype=np.int8)
        outcome_bad = np.zeros(len(duels), dtype=bool)
        skipped = np.zeros(len(duels), dtype=bool)
        outcome_cells = left_ids
    else:
        side_columns = ("left", "right")
        left_ids, right_ids = text_cells(duels["left"]), text_cells(duels["right"])
        outcome_cells = text_cells(duels[outcome])
        skipped = pd.isna(outcome_cells)
        if outcome == "winner":
            y, outcome_bad = _y_from_winner(duels["winner"], outcome_cells, left_ids, right_ids)
        else:
            y, outcome_bad = _y_from_column(duels["y"])
    left, right = item_index.get_indexer(left_ids), item_index.get_indexer(right_ids)
    has_ids = "duel_id" in duels.columns
    given_ids = text_cells(duels["duel_id"]) if has_ids else rows.astype(str).astype(object)

    problems: list[DuelRowProblem] = []
    flagged = skipped.copy()

    def check(mask: np.ndarray, reason: str, column: str, detail: Callable[[int], str]) -> None:
        hits = np.flatnonzero(mask & ~flagged)
        if len(hits) == 0:
            return
        flagged[hits] = True
        problems.append(DuelRowProblem(reason, column, hits, detail(hits[0])))

    for side, ids, index in zip(side_columns, (left_ids, right_ids), (left, right), strict=True):
        word = side if outcome != "winner/loser" else f"{side}'s"
        check(pd.isna(ids), f"the {word} item id is missing", side, lambda i: "")
        check(
            index < 0,
            "unknown item id",
            side,
            lambda i, ids=ids: f"{ids[i]!r} is not an id in {items_file}",
        )
    check(
        left == right,
        "an item duels itself",
        side_columns[1],
        lambda i: f"{side_columns[0]} and {side_columns[1]} are both {left_ids[i]!r}",
    )
    if outcome == "winner":

        def detail(i: int) -> str:
            return (
                f"winner {outcome_cells[i]!r} is neither the left item {left_ids[i]!r} "
                f"nor the right item {right_ids[i]!r} (nor 'left'/'right'/'draw'/'tie')"
            )

        check(outcome_bad, "the winner is not one of the two items", outcome, detail)
    elif outcome == "y":
        check(
            outcome_bad,
            "y must be 1 (left won), -1 (right won) or 0 (a tie)",
            outcome,
            lambda i: f"got {outcome_cells[i]!r}",
        )
    if has_ids:
        check(pd.isna(given_ids), "the duel id is missing", "duel_id", lambda i: "")
        candidates = pd.Series(np.where(flagged, None, given_ids), dtype=object)
        duplicate = candidates.duplicated(keep="first").to_numpy() & candidates.notna().to_numpy()

        def earlier(i: int) -> str:
            first = int(np.flatnonzero(given_ids == given_ids[i])[0])
            return f"{given_ids[i]!r} is also the id of row {rows[first]}"

        check(duplicate, "the duel id is used by an earlier row", "duel_id", earlier)
    return DuelRows(
        left=left,
        right=right,
        y=y,
        duel_ids=given_ids.astype(str),
        skipped=skipped,
        problems=_merge_same_reason(problems),
    )


def _merge_same_reason(problems: list[DuelRowProblem]) -> list[DuelRowProblem]:
    """One problem per reason (an unknown left id and an unknown right id are one kind)."""
    merged: dict[str, DuelRowProblem] = {}
    for problem in problems:
        earlier = merged.get(problem.reason)
        if earlier is None:
            merged[problem.reason] = problem
            continue
        first = earlier if earlier.rows[0] < problem.rows[0] else problem
        rows = np.union1d(earlier.rows, problem.rows)
        merged[problem.reason] = DuelRowProblem(
            problem.reason, first.column, rows, first.first_detail
        )
    return list(merged.values())


def _lower_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's code into its distinct lower-cased texts (-1: missing)."""
    codes, texts = text_codes(series)
    lower = np.array([t.lower() if t is not None else "" for t in texts.tolist()], dtype=object)
    return codes, lower


def _y_from_winner(
    series: pd.Series, winner: np.ndarray, left_ids: np.ndarray, right_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    codes, lower = _lower_codes(series)
    word = np.append(lower, "")[codes]  # code -1 (missing) picks ""
    is_left, is_right = winner == left_ids, winner == right_ids
    left_won = is_left | ((word == "left") & ~is_right)
    right_won = is_right | ((word == "right") & ~is_left)
    tie = np.isin(word, list(TIE_WORDS)) & ~is_left & ~is_right
    y = np.where(left_won, 1, np.where(tie, 0, -1)).astype(np.int8)
    decided = (left_won ^ right_won) | tie
    return y, ~decided & ~pd.isna(winner)


def _y_from_column(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    codes, texts = text_codes(series)
    known = np.array([t in _Y_VALUES for t in texts.tolist()] + [True])
    values = np.array([_Y_VALUES.get(t, 0) for t in texts.tolist()] + [0], dtype=np.int8)
    return values[codes], ~known[codes]


# -- reporting -------------------------------------------------------------------------
def problem_error(problem: DuelRowProblem, rows: np.ndarray, file_name: str) -> DataValidationError:
    """The problem as today's located message: first row, its detail, how many more."""
    detail = f": {problem.first_detail}" if problem.first_detail else ""
    # the file's rows: a count table's row is the source of several duels
    source = pd.unique(rows[problem.rows])
    shown = ", ".join(str(r) for r in source[:_FIRST_ROWS_SHOWN])
    more = len(source) - 1
    tail = ""
    if more:
        tail = f"{more_rows(more, 'have the same problem')}; rows {shown}"
        tail += ", ..." if len(source) > _FIRST_ROWS_SHOWN else ""
    return DataValidationError(
        problem.reason + detail + tail,
        file=file_name,
        row=int(rows[problem.rows[0]]),
        column=problem.column,
    )


def raise_problems(problems: list[DuelRowProblem], rows: np.ndarray, file_name: str) -> None:
    """Strict mode: every kind of problem at once, ordered by first row."""
    ordered = sorted(problems, key=lambda p: rows[p.rows[0]])
    raise DataProblems([problem_error(p, rows, file_name) for p in ordered])


def raise_first_problem(problems: list[DuelRowProblem], rows: np.ndarray, file_name: str) -> None:
    problem = min(problems, key=lambda p: rows[p.rows[0]])
    raise problem_error(problem, rows, file_name)


def describe_problem(problem: DuelRowProblem, rows: np.ndarray) -> str:
    detail = f", {problem.first_detail}" if problem.first_detail else ""
    return (
        f"{len(problem.rows)} {'row' if len(problem.rows) == 1 else 'rows'}: {problem.reason} "
        f"(first: row {rows[problem.rows[0]]}, column '{problem.column}'{detail})"
    )


def rejected_rows(
    problems: list[DuelRowProblem],
    skipped: np.ndarray,
    duels: pd.DataFrame,
    rows: np.ndarray,
    file_name: str,
) -> pd.DataFrame:
    """Every row not used, with its reason, followed by the row's own cells (by row)."""
    positions = [p.rows for p in problems] + [np.flatnonzero(skipped)]
    reasons = [p.reason for p in problems] + ["the outcome is missing (skipped)"]
    columns = [p.column for p in problems] + [""]
    if not any(len(p) for p in positions):
        return pd.DataFrame(columns=["file", "row", "line", "column", "reason"])
    where = np.concatenate(positions)
    kind = np.concatenate([np.full(len(p), k) for k, p in enumerate(positions)])
    order = np.argsort(where, kind="stable")
    where, kind = where[order], kind[order]
    table = pd.DataFrame(
        {
            "file": file_name,
            "row": rows[where],
            "line": rows[where] + 1,
            "column": np.asarray(columns, dtype=object)[kind],
            "reason": np.asarray(reasons, dtype=object)[kind],
        }
    )
    cells = duels.iloc[where].reset_index(drop=True)
    cells.columns = [f"{c}" if c not in table.columns else f"{c} (cell)" for c in cells.columns]
    return pd.concat([table, cells], axis=1)


@dataclass(frozen=True)
class KeyWords:
    """How the messages of :func:`key_problems` name the keys (e.g. "item id")."""

    key: str  # "item id"
    keys: str  # "item ids"
    no_key: str  # "have no id"
    repeat: str  # "repeat an earlier id"


def key_problems(
    keys: np.ndarray, rows: np.ndarray, column: str, file_name: str, words: KeyWords
) -> list[DataValidationError]:
    """Missing and repeated keys of a table's key column, each with its first row."""
    problems = []
    missing = np.flatnonzero(pd.isna(keys))
    if len(missing):
        problems.append(
            DataValidationError(
                f"the {words.key} is missing" + more_rows(len(missing) - 1, words.no_key),
                file=file_name,
                row=int(rows[missing[0]]),
                column=column,
            )
        )
    present = pd.Series(keys, dtype=object)
    again = np.flatnonzero(present.duplicated(keep="first").to_numpy() & present.notna())
    if len(again):
        repeated = keys[again[0]]
        first = int(np.flatnonzero(keys == repeated)[0])
        problems.append(
            DataValidationError(
                f"{words.key} {repeated!r} appears twice: rows {rows[first]} and "
                f"{rows[again[0]]}; {words.keys} must be unique"
                + more_rows(len(again) - 1, words.repeat),
                file=file_name,
                row=int(rows[again[0]]),
                column=column,
            )
        )
    return problems


def more_rows(count: int, what: str) -> str:
    """E.g. ' (3 more rows have the same problem)'; empty when there are none."""
    if count <= 0:
        return ""
    return f" ({count} more {'row' if count == 1 else 'rows'} {_singular(what, count)})"


def _singular(verb_phrase: str, count: int) -> str:
    return verb_phrase.replace("have ", "has ", 1) if count == 1 else verb_phrase
