"""Captions of how much of g is the utility part and how much the intransitive part
(GPM / C-GPM with the sum kernel k_E + w k_UPM). The numbers come from the engine
through :func:`dashboard.services.analyses.decision_parts`; only their wording is here."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from dashboard import state
from dashboard.components.text import md
from dashboard.services.analyses import decision_parts, has_parts
from dashboard.services.training import model_title


def duel_caption(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duel: int,
    labels: tuple[str, str],
    *,
    swapped: bool,
) -> None:
    """One duel's g split in two, seen from ``labels[0]`` (``swapped``: the right side)."""
    if model.kind == "upm":
        return
    if not has_parts(model):
        title = model_title(model.kind)
        st.caption(f"Plain {title} (utility weight 0): no utility part, all of g is the {title}'s.")
        return
    parts = decision_parts(loaded, model, np.array([duel]), swapped=swapped)
    g, utility, intransitive = (
        float(v[0]) for v in (parts.total, parts.utility, parts.intransitive)
    )
    st.caption(
        f"g = {g:+.3f}: utility part {utility:+.3f} (transitive: f({md(labels[0])}) − "
        f"f({md(labels[1])})), intransitive part {intransitive:+.3f} (the matchup effect "
        "no ranking of the items can express)."
    )


def selection_caption(
    loaded: state.LoadedData, model: state.TrainedModel, duels: np.ndarray, *, averaged: bool
) -> None:
    """Over many duels: the utility part's share of g's size."""
    if not has_parts(model) or len(duels) == 0:
        return
    parts = decision_parts(loaded, model, duels, averaged=averaged)
    share = parts.utility_share()
    if math.isnan(share):  # g is 0 on every duel
        return
    utility, intransitive = parts.mean_sizes()
    st.caption(
        f"Of g over these {len(duels):,} duels, the utility part (transitive) carries "
        f"{share:.0%} and the intransitive part the rest: mean "
        f"|utility part| {utility:.3f}, mean |intransitive part| {intransitive:.3f}."
    )
