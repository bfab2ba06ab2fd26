"""The duels of an explanation call: their items, canonical orientation and ids.

Each side is given as item ids, pool rows (integers) or model-space covariate rows
(a 2-D float array: items outside the pool, for what-if questions; the reference
pool never changes). All of them become rows of one table of distinct query rows.

Exact antisymmetry: every duel is put in a canonical orientation (the smaller query
row on the left, rows ordered by value) and deduplicated (with its context, if any)
before anything is computed; values are computed once per canonical duel and
negated for swapped ones. A duel and its swap are therefore the same floats negated
within a call (and across calls of explainers that keep no factorizations); a later
call of the same explainer agrees to rounding (1e-15 relative).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.errors import DataValidationError
from prefshap_core.explain.games.base import DuelBatch
from prefshap_core.kernels.rows import unique_rows
from prefshap_core.models.preference_function import PreferenceFunction


@dataclass(frozen=True)
class Side:
    rows: np.ndarray  # (D, d) model-space rows
    ids: np.ndarray  # (D,) str


def resolve_side(fn: PreferenceFunction, items: np.ndarray, side: str) -> Side:
    """Model-space rows and ids of one side: ids, pool rows, or covariate rows."""
    items = np.asarray(items)
    d = np.shape(fn.items)[1]
    if items.ndim == 2:
        if items.shape[1] != d or items.dtype.kind not in "fiu":
            raise DataValidationError(
                f"covariate rows must be numbers, (duels, {d}) in model space; got {items.shape}",
                column=side,
            )
        rows = np.asarray(items, dtype=np.float64)
        bad = np.argwhere(~np.isfinite(rows))
        if len(bad):
            raise DataValidationError(
                "covariate rows must be finite", row=int(bad[0, 0]) + 1, column=side
            )
        return Side(rows, np.array([f"custom-{k + 1}" for k in range(len(rows))]))
    if items.ndim != 1:
        raise DataValidationError("expected one item per duel", column=side)
    if items.dtype.kind in "iu":
        bad = np.flatnonzero((items < 0) | (items >= len(fn.items)))
        if len(bad):
            raise DataValidationError(
                f"item row {items[bad[0]]} is outside the model's {len(fn.items)} items",
                row=int(bad[0]) + 1,
                column=side,
            )
        pool_rows = items.astype(np.int64)
    else:
        index = {str(i): k for k, i in enumerate(fn.item_ids)}
        pool_rows = np.empty(len(items), dtype=np.int64)
        for k, item in enumerate(items):
            row = index.get(str(item))
            if row is None:
                raise DataValidationError(
                    f"unknown item id {item!r} (not in the model's items)",
                    row=k + 1,
                    column=side,
                )
            pool_rows[k] = row
    rows = np.asarray(fn.items, dtype=np.float64)[pool_rows]
    return Side(rows, np.asarray(fn.item_ids)[pool_rows].astype(str))


@dataclass(frozen=True)
class CanonicalDuels:
    """The distinct canonical duels of a call and how each input duel maps onto them."""

    batch: DuelBatch  # distinct duels, left <= right as query rows
    inverse: np.ndarray  # (D,) distinct duel of each input duel
    sign: np.ndarray  # (D,) -1.0 where the input duel is the canonical one swapped


def canonical_duels(
    left: np.ndarray, right: np.ndarray, contexts: np.ndarray | None = None
) -> CanonicalDuels:
    """Deduplicate duels given as model-space rows (and context rows) per side."""
    n = len(left)
    queries, index = unique_rows(np.vstack([left, right]))
    li, ri = index[:n], index[n:]
    sign = np.where(li > ri, -1.0, 1.0)
    cols = [np.minimum(li, ri), np.maximum(li, ri)]
    context_pool = None
    if contexts is not None:
        context_pool, context_index = unique_rows(contexts)
        cols.append(context_index)
    keys, inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    batch = DuelBatch(
        items=queries,
        left=keys[:, 0],
        right=keys[:, 1],
        contexts=context_pool,
        context=keys[:, 2] if contexts is not None else None,
    )
    return CanonicalDuels(batch, inverse.reshape(-1), sign)
