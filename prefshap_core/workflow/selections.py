"""Selections: which duels a view shows (an item's, between groups, under a context).

Also the raw columns such selections can be made on, and seeded samples of large ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from prefshap_core.data.duel_data import DuelData


def sample_duels(duels: np.ndarray, max_duels: int | None, seed: int = 0) -> np.ndarray:
    """The distinct duels, capped to a seeded random sample of ``max_duels`` (sorted).

    Explaining costs grow with the number of distinct items queried; views of large
    subsets explain a reproducible sample and say so.
    """
    duels = np.unique(np.asarray(duels, dtype=np.int64))
    if max_duels is not None and len(duels) > max_duels:
        duels = np.sort(np.random.default_rng(seed).choice(duels, size=max_duels, replace=False))
    return duels


def _within(data: DuelData, within: np.ndarray | None) -> np.ndarray:
    return np.arange(data.n_duels) if within is None else np.asarray(within, dtype=np.int64)


def duels_of_item(
    data: DuelData,
    item_id: str,
    outcome: str = "all",
    within: np.ndarray | None = None,
    opponent: str | None = None,
) -> np.ndarray:
    """Duel indices where ``item_id`` took part (``outcome``: all, wins, losses or ties),
    against ``opponent`` only when given."""
    row = data.item_index(item_id)
    idx = _within(data, within)
    left, right, y = data.left[idx], data.right[idx], data.y[idx]
    mine = (left == row) | (right == row)
    if opponent is not None:
        other = data.item_index(opponent)
        mine &= (left == other) | (right == other)
    won = ((left == row) & (y > 0)) | ((right == row) & (y < 0))
    if outcome == "all":
        keep = mine
    elif outcome == "wins":
        keep = mine & won
    elif outcome == "losses":
        keep = mine & ~won & (y != 0)
    elif outcome == "ties":
        keep = mine & (y == 0)
    else:
        raise ValueError(f"outcome must be all, wins, losses or ties, got {outcome!r}")
    return idx[keep]


def group_columns(data: DuelData, max_values: int = 50) -> dict[str, list[str]]:
    """Categorical columns of the raw item table usable for "A vs B" selections."""
    if data.raw_items is None:
        return {}
    out: dict[str, list[str]] = {}
    for column in data.raw_items.columns:
        values = data.raw_items[column].dropna().astype(str)
        n_unique = values.nunique()
        numeric = pd.to_numeric(values, errors="coerce").notna().mean() > 0.8
        if 1 < n_unique <= max_values and not numeric:
            out[str(column)] = sorted(values.unique().tolist())
    return out


def numeric_item_columns(data: DuelData) -> list[str]:
    """Numeric columns of the raw item table (for range selections like Speed > 100):
    those the model reads as numbers, with more than two distinct values."""
    if data.raw_items is None:
        return []
    spec_numeric = {
        name
        for g, name in enumerate(data.item_space.group_names)
        if len(data.item_space.group_columns(g)) == 1
        and data.item_space.feature_names[data.item_space.group_columns(g)[0]] == name
    }
    out = []
    for column in data.raw_items.columns:
        if str(column) not in spec_numeric:
            continue
        numbers = pd.to_numeric(data.raw_items[column], errors="coerce")
        if numbers.notna().all() and numbers.nunique() > 2:
            out.append(str(column))
    return out


def _item_values(data: DuelData, column: str) -> np.ndarray:
    if data.raw_items is None or column not in data.raw_items.columns:
        raise KeyError(f"no item column {column!r}")
    return data.raw_items[column].astype(str).to_numpy()


def duels_between_groups(
    data: DuelData, column: str, value_a: str, value_b: str, within: np.ndarray | None = None
) -> np.ndarray:
    """Duels between an item with ``column == value_a`` and one with ``value_b``."""
    values = _item_values(data, column)
    idx = _within(data, within)
    vl, vr = values[data.left[idx]], values[data.right[idx]]
    keep = ((vl == value_a) & (vr == value_b)) | ((vl == value_b) & (vr == value_a))
    return idx[keep]


def context_columns(data: DuelData) -> dict[str, list[str]]:
    """Context columns of the duels table and their values (for "under context" views)."""
    if not data.has_context or data.raw_duels is None or data.context_encoding is None:
        return {}
    sources = dict.fromkeys(s for g in data.context_encoding.groups for s in g.sources)
    names = [c for c in sources if c in data.raw_duels.columns]
    return {c: sorted(data.raw_duels[c].dropna().astype(str).unique().tolist()) for c in names}


def duels_in_context(
    data: DuelData, column: str, value: str, within: np.ndarray | None = None
) -> np.ndarray:
    """Duels whose context column ``column`` equals ``value``."""
    if data.raw_duels is None or column not in data.raw_duels.columns:
        raise KeyError(f"no context column {column!r}")
    idx = _within(data, within)
    values = data.raw_duels[column].astype(str).to_numpy()
    return idx[values[idx] == str(value)]
