"""Context effects of a C-GPM: who prefers what under each context value.

For each context group and each of its observed values (a :class:`ContextSlice`,
"french = good"), every item's mean win probability against the pool under that
value, beside the one under the observed context mix:

    p_v(i) = mean_{j != i} sigmoid( g_v(i, j) ),   g_v = E_U[ g(U, ., .) | U in slice v ]

``g_v`` averages g over the observed contexts having that value, weighted by how
often each occurred (the other context columns keep their observed mix), exactly as
the Rankings page's ``p_mean[<slice>]`` and ``prefshap cycles --context``. The change
``p_v(i) - p_mix(i)`` (in probability points) and the rank under each value say how
a value moves an item: a heatmap item x value (:func:`prefshap_core.plots.context_effects`)
and :func:`strongest_shifts` in words. Opponents are the pool, or a seeded sample of
``max_opponents`` of it (the same for every item and value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.analysis.contexts import context_slices
from prefshap_core.analysis.pairwise import preference_matrices
from prefshap_core.analysis.rankings import (
    MAX_OPPONENTS,
    mean_win_probability,
    sampled_opponents,
)
from prefshap_core.compute import Compute
from prefshap_core.models.preference_function import PreferenceFunction


@dataclass(frozen=True, eq=False)
class ContextEffects:
    """Mean win probabilities of every item under the mix and under each context value."""

    item_ids: np.ndarray  # (n,) str, pool order
    item_names: np.ndarray  # (n,) str display names (ids without names)
    groups: tuple[str, ...]  # (L,) the context group of each value
    levels: tuple[str, ...]  # (L,) "group = value"
    shares: np.ndarray  # (L,) share of the observed duels with that value
    p_mix: np.ndarray  # (n,) under the observed context mix (g_bar)
    p_level: np.ndarray  # (n, L) under each value
    n_opponents: int
    sampled: bool

    @property
    def change(self) -> np.ndarray:
        """(n, L) p_v(i) - p_mix(i): what each value does to each item."""
        return self.p_level - self.p_mix[:, None]

    @property
    def rank_mix(self) -> np.ndarray:
        """(n,) rank under the mix (1: the highest mean win probability; ties by id)."""
        return _ranks(self.p_mix, self.item_ids)

    @property
    def rank_level(self) -> np.ndarray:
        """(n, L) rank under each value."""
        cols = [_ranks(self.p_level[:, k], self.item_ids) for k in range(len(self.levels))]
        return np.stack(cols, axis=1) if cols else np.zeros((len(self.item_ids), 0), np.int64)

    def item_order(self) -> np.ndarray:
        """Item rows by their largest |change| over the values, strongest first (ties: id)."""
        if not self.levels:
            return np.arange(len(self.item_ids))
        strength = np.abs(self.change).max(axis=1)
        return np.lexsort((self.item_ids, -strength))

    def strongest(self, k: int = 3) -> list[tuple[int, int]]:
        """The ``k`` (item row, value column) pairs of largest |change|, strongest first,
        at most one per item (so a few items do not fill the list)."""
        out: list[tuple[int, int]] = []
        if not self.levels:
            return out
        change = self.change
        for row in self.item_order():
            if len(out) == k:
                break
            column = int(np.argmax(np.abs(change[row])))
            if change[row, column] != 0:
                out.append((int(row), column))
        return out


def context_effects(
    fn: PreferenceFunction,
    *,
    max_opponents: int = MAX_OPPONENTS,
    seed: int = 0,
    item_names: np.ndarray | None = None,
    compute: Compute | None = None,
) -> ContextEffects:
    """The context effects of a C-GPM over its own item pool (see module doc);
    ``item_names``: display names in pool order (default: the model's own)."""
    if fn.kind != "cgpm" or fn.context_space is None or fn.contexts is None:
        raise ValueError(f"context effects need a C-GPM, this model is {fn.kind!r}")
    assert fn.context_weights is not None
    n = len(fn.items)
    # the Rankings page's sample: its p_mean columns are these numbers
    opponents = sampled_opponents(n, max_opponents, seed)
    sampled = len(opponents) < n
    self_mask = np.arange(n)[:, None] == opponents[None, :]
    slices = context_slices(fn.context_space, fn.contexts, fn.context_weights)
    weight_sets = [None] + [s.weights for s in slices]
    matrices = preference_matrices(fn, fn.items, fn.items[opponents], weight_sets, compute=compute)
    p = [mean_win_probability(g, self_mask) for g in matrices]
    total = float(np.sum(fn.context_weights))
    return ContextEffects(
        item_ids=np.asarray(fn.item_ids).astype(str),
        item_names=fn.item_labels if item_names is None else np.asarray(item_names).astype(str),
        groups=tuple(s.group for s in slices),
        levels=tuple(s.label for s in slices),
        shares=np.array([float(s.weights.sum()) / total for s in slices]),
        p_mix=p[0],
        p_level=np.stack(p[1:], axis=1) if slices else np.zeros((n, 0)),
        n_opponents=len(opponents),
        sampled=sampled,
    )


def strongest_shifts(effects: ContextEffects, k: int = 3) -> str:
    """One sentence for the strongest shifts, e.g. "Paris gains 12.3 points of mean
    win probability under french = good (rank 5 -> 1)"; "" when nothing moves."""
    pairs = effects.strongest(k)
    if not pairs:
        return ""
    ranks, mix_ranks = effects.rank_level, effects.rank_mix
    parts = []
    for row, column in pairs:
        change = 100.0 * float(effects.change[row, column])
        verb = "gains" if change > 0 else "loses"
        parts.append(
            f"{effects.item_names[row]} {verb} {abs(change):.1f} points of mean win "
            f"probability under {effects.levels[column]} "
            f"(rank {mix_ranks[row]} → {ranks[row, column]})"
        )
    return "Strongest shifts: " + "; ".join(parts) + "."


def _ranks(p: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """1-based ranks by decreasing ``p``, ties broken by id (the Rankings page's order)."""
    order = np.lexsort((ids, -np.asarray(p)))
    ranks = np.empty(len(p), dtype=np.int64)
    ranks[order] = np.arange(1, len(p) + 1)
    return ranks
