"""Explaining any pair, observed or not (Head-to-head, what-if edits)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from dashboard import state
from dashboard.services.explain_requests import Precision, session_precision
from dashboard.services.explainers import explainer_for
from prefshap_core.explain import ExplainOptions
from prefshap_core.explain.explanation import Explanation


def explain_pair(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    left: np.ndarray,
    right: np.ndarray,
    labels: tuple[str, str],
    *,
    ids: tuple[str, str] | None = None,
    what: str = "items",
    contexts: np.ndarray | None = None,
    precision: Precision | None = None,
) -> Explanation:
    """The explanation of one duel ``left`` vs ``right``: item ids, or model-space rows
    (what-if edits), ``labels`` their display names, ``ids`` the ids shown for them.
    Through the server's explainer of this model and options, whose kept
    factorizations make each edit fast; the same duel again (a rerun of the page)
    comes from a small in-process store."""
    options = (precision or session_precision()).options(what)
    parts = [np.asarray(left), np.asarray(right)] + ([] if contexts is None else [contexts])
    duel_key = "|".join(f"{p.dtype}:{p.shape}:{p.tobytes().hex()}" for p in parts)
    expl = _pair_explanation(
        (model.data_fp, model.settings_fp), options.key(), duel_key, model, options, left,
        right, contexts,
    )  # fmt: skip
    shown_ids = ids or (str(expl.left_ids[0]), str(expl.right_ids[0]))
    return replace(
        expl,
        duel_ids=np.array(["head-to-head"]),
        left_ids=np.array([shown_ids[0]]),
        right_ids=np.array([shown_ids[1]]),
        left_labels=np.array([labels[0]]),
        right_labels=np.array([labels[1]]),
        meta={**expl.meta, "dataset": loaded.title},
    )


@st.cache_resource(show_spinner=False, max_entries=64)
def _pair_explanation(
    model_key: tuple[str, str], options_key: str, duel_key: str,
    _model: state.TrainedModel, _options: ExplainOptions, _left, _right, _contexts,
) -> Explanation:  # fmt: skip
    return explainer_for(_model, _options)(_left, _right, contexts=_contexts)
