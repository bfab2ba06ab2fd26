"""Posterior intervals of the probabilities the pages show (docs/method.md, "Uncertainty").

Every function returns None for a model without a posterior (an older or
squared-loss file): the pages then show the probability alone, as before.
"""

from __future__ import annotations

import numpy as np

from dashboard import state
from dashboard.components.formats import percent
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.posterior import probability_interval


def duel_g_sd(model: state.TrainedModel, data: DuelData, duel: int) -> float | None:
    """Posterior sd of g for duel ``duel`` of ``data`` (in its context for a C-GPM)."""
    fn = model.function
    if fn.posterior_factor is None:
        return None
    left, right = data.left[[duel]], data.right[[duel]]
    if fn.kind == "cgpm" and data.context_index is not None:
        sd = fn.decision_sd_on_pool(data.items, left, right, data.contexts,
                                    data.context_index[[duel]])  # fmt: skip
    else:
        sd = fn.decision_sd_on_pool(data.items, left, right)
    return float(sd[0])


def pair_g_sd(
    model: state.TrainedModel, x_a: np.ndarray, x_b: np.ndarray, context_row: int | None = None
) -> float | None:
    """Posterior sd of g(A, B) for model-space rows: under observed context
    ``context_row`` of a C-GPM, or (None) its context average, as ``PairPreference``."""
    fn = model.function
    if fn.posterior_factor is None:
        return None
    u = None if context_row is None or fn.contexts is None else fn.contexts[[context_row]]
    return float(fn.decision_sd(np.atleast_2d(x_a), np.atleast_2d(x_b), u)[0])


def interval_caption(name: str, g: float, sd: float | None) -> str | None:
    """'90 % interval of P(name): lo – hi (model uncertainty)', or None without a sd."""
    if sd is None:
        return None
    lo, hi = probability_interval(g, sd)
    return (
        f"90 % interval of P({name}): {percent(lo)} – {percent(hi)} (model uncertainty: "
        "how far the duels pin the model's coefficients down)"
    )
