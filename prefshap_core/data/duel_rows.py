"""Validating the rows of a duels table: ids, outcome, duel ids; located problems.

Invalid rows are collected by kind (one ``DuelRowProblem`` per reason, with every row
it hits) so that a strict build can name the first one and count the rest, and a
lenient build (real-data loaders) can drop them and report the counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import text_cells
from prefshap_core.errors import DataValidationError

_Y_VALUES = {"1": 1, "+1": 1, "-1": -1, "1.0": 1, "+1.0": 1, "-1.0": -1}


@dataclass(frozen=True)
class DuelRowProblem:
    """One kind of invalid duel row, with the rows it hits."""

    reason: str
    column: str
    rows: np.ndarray  # positions in the duels table
    first_detail: str


def outcome_column(duels: pd.DataFrame, file_name: str) -> str:
    columns = [str(c) for c in duels.columns]
    for needed in ("left", "right"):
        if needed not in columns:
            raise DataValidationError(
                f"there is no {needed!r} column (columns found: {', '.join(columns[:12])}); "
                "a duels file needs left, right and an outcome column (winner or y)",
                file=file_name,
                column=needed,
            )
    given = [c for c in ("winner", "y") if c in columns]
    if len(given) != 1:
        raise DataValidationError(
            "give the outcome in exactly one column: 'winner' (the winning id, or "
            "'left'/'right') or 'y' (1 if left won, -1 if right won); "
            + ("both are present" if given else "neither is present"),
            file=file_name,
        )
    return given[0]


def validate_duel_rows(
    duels: pd.DataFrame,
    outcome: str,
    item_index: pd.Index,
    rows: np.ndarray,
    items_file: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[DuelRowProblem]]:
    """Item rows, y and duel ids per duel (garbage where invalid), and the problems."""
    left_ids, right_ids = text_cells(duels["left"]), text_cells(duels["right"])
    left, right = item_index.get_indexer(left_ids), item_index.get_indexer(right_ids)
    if "duel_id" in duels.columns:
        given_ids = text_cells(duels["duel_id"])
    else:
        given_ids = np.array([str(r) for r in rows], dtype=object)
    outcome_cells = text_cells(duels[outcome])
    if outcome == "winner":
        y, outcome_bad = _y_from_winner(outcome_cells, left_ids, right_ids)
    else:
        y, outcome_bad = _y_from_column(outcome_cells)

    problems: list[DuelRowProblem] = []
    flagged = np.zeros(len(duels), dtype=bool)

    def check(mask: np.ndarray, reason: str, column: str, detail: Callable[[int], str]) -> None:
        hits = np.flatnonzero(mask & ~flagged)
        if len(hits) == 0:
            return
        flagged[hits] = True
        problems.append(DuelRowProblem(reason, column, hits, detail(hits[0])))

    for side, ids, index in (("left", left_ids, left), ("right", right_ids, right)):
        check(pd.isna(ids), f"the {side} item id is missing", side, lambda i: "")
        check(
            index < 0,
            "unknown item id",
            side,
            lambda i, ids=ids: f"{ids[i]!r} is not an id in {items_file}",
        )
    check(
        left == right,
        "an item duels itself",
        "right",
        lambda i: f"left and right are both {left_ids[i]!r}",
    )
    check(pd.isna(outcome_cells), "the outcome is missing", outcome, lambda i: "")
    if outcome == "winner":

        def detail(i: int) -> str:
            return (
                f"winner {outcome_cells[i]!r} is neither the left item {left_ids[i]!r} "
                f"nor the right item {right_ids[i]!r} (nor 'left'/'right')"
            )

        check(outcome_bad, "the winner is not one of the two items", outcome, detail)
    else:
        check(
            outcome_bad,
            "y must be 1 (left won) or -1 (right won)",
            outcome,
            lambda i: f"got {outcome_cells[i]!r}",
        )
    check(pd.isna(given_ids), "the duel id is missing", "duel_id", lambda i: "")
    seen: dict[str, int] = {}
    duplicate = np.zeros(len(duels), dtype=bool)
    first_of: dict[int, int] = {}
    for position, duel_id in enumerate(given_ids.tolist()):
        if duel_id is None or flagged[position]:
            continue
        if duel_id in seen:
            duplicate[position] = True
            first_of[position] = seen[duel_id]
        else:
            seen[duel_id] = position
    check(
        duplicate,
        "the duel id is used by an earlier row",
        "duel_id",
        lambda i: f"{given_ids[i]!r} is also the id of row {rows[first_of[i]]}",
    )
    return left, right, y, given_ids.astype(str), _merge_same_reason(problems)


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


def _y_from_winner(
    winner: np.ndarray, left_ids: np.ndarray, right_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    words = np.array([w.lower() if w is not None else None for w in winner.tolist()], dtype=object)
    left_won = (winner == left_ids) | ((words == "left") & (winner != right_ids))
    right_won = (winner == right_ids) | ((words == "right") & (winner != left_ids))
    y = np.where(left_won, 1, -1).astype(np.int8)
    return y, ~(left_won ^ right_won) & ~pd.isna(winner)


def _y_from_column(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.array([_Y_VALUES.get(c, 0) if c is not None else 0 for c in cells.tolist()])
    return values.astype(np.int8), (values == 0) & ~pd.isna(cells)


def raise_first_problem(problems: list[DuelRowProblem], rows: np.ndarray, file_name: str) -> None:
    problem = min(problems, key=lambda p: rows[p.rows[0]])
    detail = f": {problem.first_detail}" if problem.first_detail else ""
    raise DataValidationError(
        problem.reason + detail + more_rows(len(problem.rows) - 1, "have the same problem"),
        file=file_name,
        row=int(rows[problem.rows[0]]),
        column=problem.column,
    )


def describe_problem(problem: DuelRowProblem, rows: np.ndarray) -> str:
    detail = f", {problem.first_detail}" if problem.first_detail else ""
    return (
        f"{len(problem.rows)} {'row' if len(problem.rows) == 1 else 'rows'}: {problem.reason} "
        f"(first: row {rows[problem.rows[0]]}, column '{problem.column}'{detail})"
    )


def more_rows(count: int, what: str) -> str:
    """E.g. ' (3 more rows have the same problem)'; empty when there are none."""
    if count <= 0:
        return ""
    return f" ({count} more {'row' if count == 1 else 'rows'} {_singular(what, count)})"


def _singular(verb_phrase: str, count: int) -> str:
    return verb_phrase.replace("have ", "has ", 1) if count == 1 else verb_phrase
