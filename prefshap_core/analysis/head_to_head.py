"""Head-to-head: P(A beats B) under each observed context value and on average.

The two sides are pool items or hypothetical covariate rows (model space, e.g. an
item whose covariates the user edited). "Each observed context value" follows
:mod:`contexts`: per value of each context group, the model averaged over the
observed contexts that have it, weighted by their counts. The context-averaged
probability is the model's g_bar (its item explanations' output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.analysis.contexts import context_slices, data_context_labels
from prefshap_core.analysis.pairwise import win_probability
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.preference_function import PreferenceFunction


@dataclass(frozen=True)
class PairPreference:
    """The model on one pair, seen from side A."""

    g_average: float  # g_bar (C-GPM) or g
    g_by_context: np.ndarray | None  # (p,) g under each observed context (C-GPM)
    by_context: pd.DataFrame  # group, value, share (of observed duels), g, p_a

    @property
    def p_average(self) -> float:
        return float(win_probability(self.g_average))

    def g_under(self, context_row: int | None) -> float:
        """g(u, a, b) under observed context ``context_row``; None (or a model without
        contexts): g_bar, the context average."""
        if context_row is None or self.g_by_context is None:
            return self.g_average
        return float(self.g_by_context[context_row])

    def p_under(self, context_row: int | None) -> float:
        """P(A beats B) = sigmoid(:meth:`g_under`)."""
        return float(win_probability(self.g_under(context_row)))


def pair_preference(
    fn: PreferenceFunction, x_a: np.ndarray, x_b: np.ndarray, compute: Compute | None = None
) -> PairPreference:
    """g(A, B) averaged over the observed contexts and per observed context value."""
    pool = np.vstack([np.atleast_2d(x_a), np.atleast_2d(x_b)]).astype(np.float64)
    g_average = float(fn.decision_on_pool(pool, [0], [1], compute=compute)[0])
    columns = ["group", "value", "share", "g", "p_a"]
    if fn.kind != "cgpm" or fn.contexts is None or fn.context_space is None:
        return PairPreference(g_average, None, pd.DataFrame(columns=columns))
    assert fn.context_weights is not None
    n = len(fn.contexts)
    g_u = fn.decision_on_pool(
        pool, np.zeros(n), np.ones(n), fn.contexts, np.arange(n), compute=compute
    )
    total = float(np.sum(fn.context_weights))
    rows = []
    for piece in context_slices(fn.context_space, fn.contexts, fn.context_weights):
        w = piece.weights
        g = float(w @ g_u / w.sum())
        rows.append([piece.group, piece.value, float(w.sum() / total), g, 0.0])
    table = pd.DataFrame(rows, columns=columns)
    table["p_a"] = win_probability(table["g"].to_numpy())
    return PairPreference(g_average, g_u, table)


@dataclass(frozen=True)
class Meetings:
    """The pair's past duels, from A's side."""

    wins_a: int
    wins_b: int
    table: pd.DataFrame  # duel (index), duel_id, winner (label), context (if any)

    @property
    def n_duels(self) -> int:
        return len(self.table)


def meetings(data: DuelData, a: str, b: str) -> Meetings:
    """Every duel between items ``a`` and ``b`` (ids), and who won how often."""
    ra, rb = data.item_index(a), data.item_index(b)
    pair = ((data.left == ra) & (data.right == rb)) | ((data.left == rb) & (data.right == ra))
    idx = np.flatnonzero(pair)
    winners = data.winners()[idx]
    labels = np.asarray(data.labels).astype(str)
    table = pd.DataFrame({"duel": idx, "duel_id": data.duel_ids[idx], "winner": labels[winners]})
    labels = data_context_labels(data)
    if labels is not None and data.context_index is not None:
        table["context"] = labels[data.context_index[idx]]
    return Meetings(int((winners == ra).sum()), int((winners == rb).sum()), table)


def most_active_pair(data: DuelData) -> tuple[str, str]:
    """The ids of the two items with the most duels (ties: pool order)."""
    if data.n_items < 2:
        raise ValueError("a head-to-head needs at least two items")
    activity = np.bincount(data.left, minlength=data.n_items) + np.bincount(
        data.right, minlength=data.n_items
    )
    first, second = np.argsort(-activity, kind="stable")[:2]
    return str(data.item_ids[first]), str(data.item_ids[second])
