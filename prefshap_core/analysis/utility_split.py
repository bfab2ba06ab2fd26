"""How much of a model's g on a dataset's duels is utility, how much intransitive.

The duel-level form of :meth:`PreferenceFunction.decision_parts_on_pool`: the same
duels, pool and contexts as the estimators' ``decision_function``, so the parts sum
to the g the pages show.
"""

from __future__ import annotations

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.decision_parts import DecisionParts
from prefshap_core.models.preference_function import PreferenceFunction


def has_utility_split(fn: PreferenceFunction) -> bool:
    """Whether g has both parts: a GPM / C-GPM with a positive utility weight."""
    return fn.kind != "upm" and fn.utility_weight > 0


def duel_parts(
    fn: PreferenceFunction,
    data: DuelData,
    duels: np.ndarray,
    *,
    averaged: bool = False,
    compute: Compute | None = None,
) -> DecisionParts:
    """The utility and intransitive parts of g on ``duels`` (indices of ``data``),
    left vs right. A C-GPM is evaluated under each duel's own context, or with
    ``averaged`` (or data without contexts) as the context-averaged model g_bar,
    which is what its item explanations explain."""
    idx = np.asarray(duels, dtype=np.int64)
    contexts = context_index = None
    if fn.kind == "cgpm" and not averaged and data.contexts is not None:
        assert data.context_index is not None
        contexts, context_index = data.contexts, data.context_index[idx]
    return fn.decision_parts_on_pool(
        data.items, data.left[idx], data.right[idx], contexts, context_index, compute=compute
    )
