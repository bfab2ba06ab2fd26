"""What the views show besides explanations, computed by the engine once per input.

Pages rerun on every click; the engine calls here (pick lists, an item's record, the
duels of a selection, a pair's probabilities, the what-if editor's columns) would
otherwise redo their work over all duels each time.

Caching, decided once for this module: ``st.cache_data`` keyed explicitly by the
data's fingerprint (``loaded.fingerprint``), the model's (``model.settings_fp``
with it) and plain values (ids, column names, row bytes). The dataset and the model
themselves are passed as ``_``-prefixed arguments, which Streamlit does not hash:
the fingerprints stand for them. ``cache_data`` and not ``cache_resource``: the
results are a page's worth (small), and each caller gets its own copy, so a page
that sorts or filters one cannot change what another session is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import state
from prefshap_core.analysis.context_condition import categorical_context_groups
from prefshap_core.analysis.contexts import context_row_labels, data_context_labels
from prefshap_core.analysis.covariates import (
    EditableColumn,
    RawValue,
    editable_columns,
    encode_covariates,
    raw_covariates,
)
from prefshap_core.analysis.groups import (
    ItemCondition,
    duels_between,
    group_record,
    item_mask,
    orient_to_group,
)
from prefshap_core.analysis.head_to_head import (
    Meetings,
    PairPreference,
    meetings,
    most_active_pair,
    pair_preference,
)
from prefshap_core.data.duel_data import DuelData
from prefshap_core.explain.explanation import Explanation
from prefshap_core.workflow import explaining as engine_explaining
from prefshap_core.workflow import items as engine_items
from prefshap_core.workflow import selections as engine_selections
from prefshap_core.workflow.items import (
    ItemRecord,
    duel_counts,
    most_active_first,
    parse_pair,
)
from prefshap_core.workflow.selections import (
    context_columns,
    duels_in_context,
    group_columns,
    numeric_item_columns,
)

ConditionKey = tuple[str, str, str | float] | None  # an ItemCondition as a cache key


def _model_key(loaded: state.LoadedData, model: state.TrainedModel) -> tuple[str, str]:
    return loaded.fingerprint, model.settings_fp


def _condition_key(condition: ItemCondition | None) -> ConditionKey:
    return None if condition is None else (condition.column, condition.op, condition.value)


def _rows_key(rows: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    rows = np.asarray(rows)
    return str(rows.dtype), rows.shape, rows.tobytes()


# -- items ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ItemChoices:
    """A dataset's items as pick lists offer them."""

    ids: list[str]  # the most duels first (ties: pool order)
    labels: dict[str, str]  # id -> display label
    counts: dict[str, int]  # id -> number of duels


@st.cache_data(show_spinner=False, max_entries=16)
def _item_choices(data_fp: str, _data: DuelData) -> ItemChoices:
    counts = duel_counts(_data)
    order = most_active_first(_data)
    ids = _data.item_ids
    return ItemChoices(
        ids=[str(i) for i in ids[order]],
        labels={str(i): str(label) for i, label in zip(ids, _data.labels, strict=True)},
        counts={str(ids[k]): int(counts[k]) for k in order},
    )


def item_choices(loaded: state.LoadedData) -> ItemChoices:
    """Every item, the most active first, with its label and number of duels."""
    return _item_choices(loaded.fingerprint, loaded.data)


@st.cache_data(show_spinner=False, max_entries=16)
def _default_pair(data_fp: str, _data: DuelData) -> tuple[str, str]:
    return most_active_pair(_data)


def default_pair(loaded: state.LoadedData) -> tuple[str, str]:
    """The two items with the most duels (the Head-to-head page's first pair)."""
    return _default_pair(loaded.fingerprint, loaded.data)


@st.cache_data(show_spinner=False, max_entries=64)
def _item_record(data_fp: str, item_id: str, _data: DuelData) -> ItemRecord:
    return engine_items.item_record(_data, item_id)


def item_record(loaded: state.LoadedData, item_id: str) -> ItemRecord:
    """The item's wins, losses and table of duels."""
    return _item_record(loaded.fingerprint, item_id, loaded.data)


@st.cache_data(show_spinner=False, max_entries=128)
def _duels_of_item(
    data_fp: str, item_id: str, outcome: str, opponent: str | None, _data: DuelData
) -> np.ndarray:
    return engine_selections.duels_of_item(_data, item_id, outcome=outcome, opponent=opponent)


def duels_of_item(
    loaded: state.LoadedData, item_id: str, outcome: str, opponent: str | None
) -> np.ndarray:
    """The item's duels with this ``outcome`` (all, wins, losses), against ``opponent``
    only when given."""
    return _duels_of_item(loaded.fingerprint, item_id, outcome, opponent, loaded.data)


@st.cache_data(show_spinner=False, max_entries=32)
def _explain_input_table(data_fp: str, duels_key: bytes, _data, _duels) -> pd.DataFrame:
    return engine_explaining.explain_input_table(_data, _duels)


def explain_input_table(loaded: state.LoadedData, duels: np.ndarray) -> pd.DataFrame:
    """``duels`` as the ``prefshap explain --duels`` input table."""
    duels = np.asarray(duels, dtype=np.int64)
    return _explain_input_table(loaded.fingerprint, duels.tobytes(), loaded.data, duels)


# -- selections of duels (Explain) --------------------------------------------------------
@dataclass(frozen=True)
class SelectionColumns:
    """The raw columns duels can be selected on."""

    groups: dict[str, list[str]]  # categorical item columns -> their values
    numeric: list[str]  # numeric item columns (ranges such as Speed > 100)
    contexts: dict[str, list[str]]  # context columns of the duels -> their values


@st.cache_data(show_spinner=False, max_entries=16)
def _selection_columns(data_fp: str, _data: DuelData) -> SelectionColumns:
    return SelectionColumns(
        group_columns(_data),
        numeric_item_columns(_data),
        context_columns(_data),
    )


def selection_columns(loaded: state.LoadedData) -> SelectionColumns:
    """The item and context columns of the dataset that the Explain page offers."""
    return _selection_columns(loaded.fingerprint, loaded.data)


@dataclass(frozen=True)
class GroupDuels:
    """The duels of an A item against a B item, and A's record in them."""

    duels: np.ndarray
    mask_a: np.ndarray  # (n_items,) the items of group A
    mask_b: np.ndarray
    wins: int  # group A's
    losses: int


@st.cache_data(show_spinner=False, max_entries=32)
def _group_duels(
    model_key: tuple[str, str],
    cond_a: ConditionKey,
    cond_b: ConditionKey,
    held_out: bool,
    context: tuple[str, str] | None,
    _data: DuelData,
    _test: np.ndarray,
) -> GroupDuels:
    within = _test if held_out else None
    if context is not None:
        within = duels_in_context(_data, context[0], context[1], within=within)
    mask_a = item_mask(_data, None if cond_a is None else ItemCondition(*cond_a))
    mask_b = item_mask(_data, ItemCondition(*cond_b)) if cond_b is not None else ~mask_a
    duels, signs = duels_between(_data, mask_a, mask_b, within=within)
    wins, losses = group_record(_data, duels, signs)
    return GroupDuels(duels, mask_a, mask_b, wins, losses)


def group_duels(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    cond_a: ItemCondition,
    cond_b: ItemCondition | None,
    *,
    held_out: bool,
    context: tuple[str, str] | None,
) -> GroupDuels:
    """Duels between the items of ``cond_a`` and those of ``cond_b`` (None: the rest),
    among the model's test duels if ``held_out``, under ``context`` (column, value)."""
    return _group_duels(
        _model_key(loaded, model), _condition_key(cond_a), _condition_key(cond_b), held_out,
        context, loaded.data, model.split.test,
    )  # fmt: skip


def oriented_to_group(
    loaded: state.LoadedData, groups: GroupDuels, expl: Explanation, label: str
) -> Explanation:
    """``expl`` (duels of :func:`group_duels`) with each duel seen from its A item.
    Not cached: the explanation itself is, and this is one pass over its duels."""
    return orient_to_group(expl, loaded.data, groups.mask_a, groups.mask_b, label)


@st.cache_data(show_spinner=False, max_entries=32)
def _context_duels(
    model_key: tuple[str, str], column: str, value: str, held_out: bool, _data, _test
) -> np.ndarray:
    return duels_in_context(_data, column, value, within=_test if held_out else None)


def context_duels(
    loaded: state.LoadedData, model: state.TrainedModel, column: str, value: str, *, held_out: bool
) -> np.ndarray:
    """Duels whose context ``column`` is ``value``, among the test duels if ``held_out``."""
    return _context_duels(
        _model_key(loaded, model), column, value, held_out, loaded.data, model.split.test
    )


# -- pairs (Duel, Head-to-head) -------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=64)
def _meetings(data_fp: str, a: str, b: str, _data: DuelData) -> Meetings:
    return meetings(_data, a, b)


def pair_meetings(loaded: state.LoadedData, a: str, b: str) -> Meetings:
    """Every duel between items ``a`` and ``b``, and who won how often."""
    return _meetings(loaded.fingerprint, a, b, loaded.data)


@st.cache_data(show_spinner=False, max_entries=64)
def _find_pair(data_fp: str, text: str, _data: DuelData) -> tuple[str, str] | None:
    return parse_pair(_data, text)


def find_pair(loaded: state.LoadedData, text: str) -> tuple[str, str] | None:
    """``"A vs B"`` -> the two item ids, or None if not a pair; KeyError names a side
    that matches no item."""
    return _find_pair(loaded.fingerprint, text, loaded.data)


@st.cache_data(show_spinner=False, max_entries=64)
def _pair_preference(model_key: tuple[str, str], rows_key: tuple, _model, _x_a, _x_b):
    return pair_preference(_model.function, _x_a, _x_b)


def pair_probabilities(
    loaded: state.LoadedData, model: state.TrainedModel, x_a: np.ndarray, x_b: np.ndarray
) -> PairPreference:
    """The model on ``x_a`` vs ``x_b`` (model-space rows, edited or not): on average
    and per observed context value."""
    key = (_rows_key(x_a), _rows_key(x_b))
    return _pair_preference(_model_key(loaded, model), key, model, x_a, x_b)


@dataclass(frozen=True)
class ContextChoices:
    """A C-GPM's observed contexts as a picker offers them."""

    labels: list[str]  # per context row, e.g. "Outdoor / Clay"
    order: list[int]  # context rows, the most frequent first (ties: row order)


@st.cache_data(show_spinner=False, max_entries=16)
def _context_choices(model_key: tuple[str, str], _data: DuelData, _model) -> ContextChoices:
    fn = _model.function
    labels = context_row_labels(fn.context_space, fn.contexts, _data.context_encoding)
    order = np.argsort(-np.asarray(fn.context_weights), kind="stable").tolist()
    return ContextChoices(labels, order)


def context_choices(loaded: state.LoadedData, model: state.TrainedModel) -> ContextChoices | None:
    """The model's observed contexts (C-GPM), or None for a model without them."""
    fn = model.function
    if fn.kind != "cgpm" or fn.contexts is None or fn.context_space is None:
        return None
    return _context_choices(_model_key(loaded, model), loaded.data, model)


@st.cache_data(show_spinner=False, max_entries=16)
def _context_labels(data_fp: str, _data: DuelData) -> np.ndarray | None:
    return data_context_labels(_data)


def context_labels(loaded: state.LoadedData) -> np.ndarray | None:
    """(p,) the data's observed contexts as ``"column = value, ..."`` (None: none)."""
    return _context_labels(loaded.fingerprint, loaded.data)


@st.cache_data(show_spinner=False, max_entries=16)
def _context_groups(model_key: tuple[str, str], _model) -> dict[str, list[str]]:
    return categorical_context_groups(_model.function)


def context_groups(loaded: state.LoadedData, model: state.TrainedModel) -> dict[str, list[str]]:
    """The C-GPM's categorical context groups and their categories ({} otherwise)."""
    return _context_groups(_model_key(loaded, model), model)


# -- the what-if editor (Head-to-head) -------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=16)
def _editable_columns(data_fp: str, _data: DuelData) -> list[EditableColumn]:
    return editable_columns(_data)


def what_if_columns(loaded: state.LoadedData) -> list[EditableColumn]:
    """Every raw item column the model reads, as the editor offers it."""
    return _editable_columns(loaded.fingerprint, loaded.data)


@st.cache_data(show_spinner=False, max_entries=64)
def _raw_covariates(data_fp: str, item_id: str, _data: DuelData) -> dict[str, RawValue]:
    return raw_covariates(_data, item_id)


def item_covariates(loaded: state.LoadedData, item_id: str) -> dict[str, RawValue]:
    """The item's raw value per editable column."""
    return _raw_covariates(loaded.fingerprint, item_id, loaded.data)


@st.cache_data(show_spinner=False, max_entries=64)
def _encoded(data_fp: str, values: tuple[tuple[str, RawValue], ...], _data) -> np.ndarray:
    return encode_covariates(_data, dict(values))


def encoded_row(loaded: state.LoadedData, values: dict[str, RawValue]) -> np.ndarray:
    """(1, d) model-space row of an item given by its raw values (errors name the column)."""
    return _encoded(loaded.fingerprint, tuple(values.items()), loaded.data)
