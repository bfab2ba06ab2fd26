"""Distinct duels split into groups that bound the coalition values held at once.

The explainer evaluates each group's ``K x duels`` values in turn and joins the
groups' results; the split changes no number (every duel is explained alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Coalition values held at once (K x duels, float64): 2^25 values = 256 MB.
_MAX_VALUES_IN_MEMORY = 1 << 25


def bounded_duel_groups(n_unique: int, n_coalitions: int) -> list[np.ndarray]:
    """Split the distinct duels so that K x duels values stay bounded in memory."""
    size = max(1, _MAX_VALUES_IN_MEMORY // max(1, n_coalitions))
    return [np.arange(s, min(s + size, n_unique)) for s in range(0, max(n_unique, 1), size)]


def join_group_results(results: list[Any]) -> Any:
    """Per duel group results -> one: (phi, se) pairs by rows, value tables by columns."""
    if isinstance(results[0], tuple):
        return tuple(np.concatenate(parts, axis=0) for parts in zip(*results, strict=True))
    return np.concatenate(results, axis=1)
