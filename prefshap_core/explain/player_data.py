"""What the plots show next to the Shapley values: each player's difference and labels.

For an item explanation, ``data`` is ``x_left - x_right`` per single-column player in
raw units (NaN for multi-column groups) and ``data_labels`` says what met what
("185 vs 190", "Fire/Flying vs Water"); for a context explanation, each duel's raw
context value per player and its label.
"""

from __future__ import annotations

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace


def _player_labels(space: FeatureSpace, rows: np.ndarray) -> np.ndarray:
    """(n, p) str: each row's raw value per single-column player, its categories per group."""
    raw = space.to_raw(rows)
    out = np.empty((len(rows), space.n_groups), dtype=object)
    for g, name in enumerate(space.group_names):
        cols = space.group_columns(g)
        if len(cols) == 1:
            out[:, g] = [f"{v:.4g}" for v in raw[:, cols[0]]]
            continue
        prefix = f"{name}="
        cats = [
            space.feature_names[j][len(prefix) :]
            if space.feature_names[j].startswith(prefix)
            else space.feature_names[j]
            for j in cols
        ]
        active = raw[:, cols] >= 0.5
        out[:, g] = [
            "/".join(c for c, on in zip(cats, hit, strict=True) if on) or "none" for hit in active
        ]
    return out


def player_differences(
    space: FeatureSpace, x_left: np.ndarray, x_right: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """data (x_left - x_right in raw units; NaN for groups) and "left vs right" labels."""
    data = np.full((len(x_left), space.n_groups), np.nan)
    for g in range(space.n_groups):
        cols = space.group_columns(g)
        if len(cols) == 1:
            j = cols[0]
            data[:, g] = (x_left[:, j] - x_right[:, j]) * space.scale[j]
    rows, inverse = np.unique(np.vstack([x_left, x_right]), axis=0, return_inverse=True)
    per_row = _player_labels(space, rows)[inverse.reshape(-1)]
    n = len(x_left)
    labels = np.char.add(np.char.add(per_row[:n].astype(str), " vs "), per_row[n:].astype(str))
    return data, labels.astype(object)


def context_columns(space: FeatureSpace, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw context value per single-column player (NaN for groups) and display labels."""
    raw = space.to_raw(contexts)
    values = np.full((len(contexts), space.n_groups), np.nan)
    for g in range(space.n_groups):
        cols = space.group_columns(g)
        if len(cols) == 1:
            values[:, g] = raw[:, cols[0]]
    rows, inverse = np.unique(contexts, axis=0, return_inverse=True)
    return values, _player_labels(space, rows)[inverse.reshape(-1)]
