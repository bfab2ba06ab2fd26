"""The model's analyses other than explanations: intransitivity, rankings, and the
utility and intransitive parts of g (each a ``prefshap_core.analysis`` call)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import state
from prefshap_core.analysis.context_condition import condition_on_context
from prefshap_core.analysis.context_effects import ContextEffects, context_effects
from prefshap_core.analysis.cycle_uncertainty import CANDIDATE_TRIANGLES, SureCycles, sure_cycles
from prefshap_core.analysis.explorer import DatasetIntransitivity, dataset_intransitivity
from prefshap_core.analysis.rankings import Rankings, rankings
from prefshap_core.analysis.utility_split import duel_parts, has_utility_split
from prefshap_core.models.decision_parts import DecisionParts
from prefshap_core.workflow.results import TrainingResult


# -- intransitivity ----------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _intransitivity(
    data_fp: str,
    settings_fp: str,
    n_items: int,
    context: tuple[tuple[str, str], ...],
    top: int,
    _loaded: state.LoadedData,
    _model: state.TrainedModel,
) -> DatasetIntransitivity:
    return dataset_intransitivity(
        _model.function, _loaded.data, n_items, context=dict(context), top=top
    )


def intransitivity(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    n_items: int,
    context: dict[str, str],
    top: int = 20,
) -> DatasetIntransitivity:
    """The model's cyclic share and cycles on the most active items, and the data's
    own cycles (seconds at most: computed here, kept per model in this process)."""
    key = tuple(sorted(context.items()))
    return _intransitivity(loaded.fingerprint, model.settings_fp, n_items, key, top, loaded, model)


@st.cache_resource(show_spinner=False, max_entries=8)
def _scored_cycles(
    data_fp: str,
    settings_fp: str,
    n_items: int,
    context: tuple[tuple[str, str], ...],
    _result: DatasetIntransitivity,
    _model: state.TrainedModel,
) -> SureCycles:
    fn = condition_on_context(_model.function, dict(context))
    return sure_cycles(fn, _result.model, min_p_cycle=0.0, top=CANDIDATE_TRIANGLES)


def scored_cycles(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    result: DatasetIntransitivity,
    n_items: int,
    context: dict[str, str],
) -> SureCycles | None:
    """The model's strongest cycles with their posterior p_cycle (None: the model has
    no posterior); filter them with ``SureCycles.filtered``."""
    if model.function.posterior_factor is None:
        return None
    key = tuple(sorted(context.items()))
    return _scored_cycles(loaded.fingerprint, model.settings_fp, n_items, key, result, model)


# -- rankings -----------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _rankings(data_fp: str, settings_fp: str, _result: TrainingResult, _data) -> Rankings:
    return rankings(_result.function, _data, upm=_result.baseline_function)


def model_rankings(loaded: state.LoadedData, model: state.TrainedModel) -> Rankings:
    """The Rankings page's table, computed once per model and process (the UPM
    baseline's f(x) as its score when one was fitted, else Bradley-Terry)."""
    return _rankings(loaded.fingerprint, model.settings_fp, model.result, loaded.data)


# -- context effects ------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _context_effects(data_fp: str, settings_fp: str, _model, _data) -> ContextEffects:
    fn = _model.function
    label = dict(zip(_data.item_ids.astype(str), _data.labels.astype(str), strict=True))
    names = np.array([label.get(str(i), str(i)) for i in fn.item_ids])
    return context_effects(fn, item_names=names)


def model_context_effects(loaded: state.LoadedData, model: state.TrainedModel) -> ContextEffects:
    """A C-GPM's mean win probabilities per context value (the Context effects page),
    computed once per model and process (the Rankings page's opponents)."""
    return _context_effects(loaded.fingerprint, model.settings_fp, model, loaded.data)


# -- utility and intransitive parts of g ----------------------------------------------------
def has_parts(model: state.TrainedModel) -> bool:
    """Whether the model's g has a utility and an intransitive part (GPM / C-GPM, w > 0)."""
    return has_utility_split(model.function)


def decision_parts(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duels: np.ndarray,
    *,
    averaged: bool = False,
    swapped: bool = False,
) -> DecisionParts:
    """g's utility and intransitive parts on ``duels``, left vs right (``swapped``: right
    vs left); a C-GPM under each duel's context, or context-averaged (``averaged``,
    what its item explanations explain). Milliseconds for a page's duels."""
    parts = duel_parts(model.function, loaded.data, duels, averaged=averaged)
    return parts.swapped() if swapped else parts
