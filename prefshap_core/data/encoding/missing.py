"""Missing cells: filling them, the 0/1 missing indicators, and the imputation notes."""

from __future__ import annotations

import numpy as np

from prefshap_core.data.duel_data import ImputationNote
from prefshap_core.data.encoding.spec import MISSING_SUFFIX, GroupEncoding


def fill_missing(group: GroupEncoding, block: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """``block`` with its ``missing`` rows filled: the group's fill value or category
    (a group with an indicator and no fill: no category, the row stays all 0)."""
    block = block.copy()
    if group.kind == "numeric":
        block[missing, 0] = group.fill
    elif group.fill is not None:  # else (indicator): no category
        block[missing, group.categories.index(group.fill)] = 1.0
    return block


def wants_indicator(missing: np.ndarray, share: float | None) -> bool:
    """Whether a column with these ``missing`` cells gets a missing indicator (``share``:
    the least share of missing cells that does; None: never)."""
    return share is not None and bool(missing.any()) and missing.mean() >= share


def with_indicator(group: GroupEncoding, block: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """``block`` followed by the group's 0/1 missing indicator column, if it has one."""
    if not group.missing_indicator:
        return block
    return np.concatenate([block, missing[:, None].astype(np.float64)], axis=1)


def imputation_note(table_name: str, group: GroupEncoding, n_missing: int) -> ImputationNote:
    """The report line of a group's ``n_missing`` filled cells (what they were filled with)."""
    marked = f", marked in {group.name + MISSING_SUFFIX!r}" if group.missing_indicator else ""
    if group.kind == "numeric":
        how = "mean" if group.missing_indicator else "median"
        filled = f"{how} {group.fill:g}{marked}"
    elif group.fill is None:
        filled = f"no category{marked}"
    else:
        filled = f"most frequent category {group.fill!r}"
    return ImputationNote(
        table=table_name, column=group.name, n_missing=n_missing, filled_with=filled
    )
