"""The long layout (one row per duel) under the user's own column names.

The overrides rename the user's columns to the upload format's (``left``, ``right``,
``winner`` / ``y``); the rest of the reading is :func:`build_duel_data`'s, unchanged.
"""

from __future__ import annotations

import pandas as pd

from prefshap_core.data.duel_rows import outcome_column
from prefshap_core.data.layouts.mapping import ColumnMapping, require_column, y_like
from prefshap_core.errors import DataValidationError


def long_duels(
    duels: pd.DataFrame, mapping: ColumnMapping, file_name: str
) -> tuple[pd.DataFrame, ColumnMapping, list[str]]:
    """The duels under the upload format's names, the columns used, the id columns.

    ``--left-column`` / ``--right-column`` without an outcome column (and none named
    ``winner`` or ``y``) read as winner / loser columns: the left column holds the winner.
    """
    renames: dict[str, str] = {}
    has_outcome = mapping.outcome is not None or any(c in duels.columns for c in ("winner", "y"))
    sides = ("left", "right") if has_outcome else ("winner", "loser")
    for given, flag, target in (
        (mapping.left, "--left-column", sides[0]),
        (mapping.right, "--right-column", sides[1]),
    ):
        if given is not None:
            renames[require_column(duels, given, flag, file_name)] = target
    if mapping.outcome is not None:
        given = require_column(duels, mapping.outcome, "--outcome-column", file_name)
        renames[given] = "y" if y_like(duels[given]) else "winner"
    for source, target in renames.items():
        if target in duels.columns and target not in renames and source != target:
            raise DataValidationError(
                f"the file already has a column {target!r}; with {source!r} mapped to "
                f"{target!r}, rename or drop that one",
                file=file_name,
                column=target,
            )
    renamed = duels.rename(columns=renames) if renames else duels
    outcome = outcome_column(renamed, file_name)
    back = {target: source for source, target in renames.items()}
    if outcome == "winner/loser":
        used = ColumnMapping(left=back.get("winner", "winner"), right=back.get("loser", "loser"))
        return renamed, used, ["winner", "loser"]
    used = ColumnMapping(
        left=back.get("left", "left"),
        right=back.get("right", "right"),
        outcome=back.get(outcome, outcome),
    )
    references = ["left", "right"] + (["winner"] if outcome == "winner" else [])
    return renamed, used, references
