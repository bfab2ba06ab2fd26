"""The views' cached engine calls (dashboard/services/views_data.py) and the trained
model's accessors: the same values as the engine called directly, one cache entry
per input, and a copy for each caller."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dashboard import state
from dashboard.services import views_data
from prefshap_core.analysis.context_condition import categorical_context_groups
from prefshap_core.analysis.covariates import editable_columns, encode_covariates, raw_covariates
from prefshap_core.analysis.groups import ItemCondition
from prefshap_core.analysis.head_to_head import pair_preference
from prefshap_core.data.build import load_directory
from prefshap_core.paths import repo_root
from prefshap_core.workflow.explaining import explain_input_table
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.items import item_record
from prefshap_core.workflow.selections import (
    context_columns,
    duels_of_item,
    group_columns,
    numeric_item_columns,
)
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train


@pytest.fixture(scope="module")
def loaded() -> state.LoadedData:
    data = load_directory(repo_root() / "sample_data")
    return state.LoadedData("upload:views-data", "sample", data, data_fingerprint(data),
                            "upload")  # fmt: skip


@pytest.fixture(scope="module")
def model(loaded: state.LoadedData) -> state.TrainedModel:
    settings = TrainSettings(kind="cgpm", seed=0, n_centres=60, penalty=1e-3,
                                      lengthscale_scale=1.0, cme_lambda=1e-2)  # fmt: skip
    result = train(loaded.data, settings)
    return state.TrainedModel(result, loaded.fingerprint, settings_fingerprint(settings))


def test_trained_model_accessors_are_the_training_result_parts(
    model: state.TrainedModel,
) -> None:
    assert model.function is model.result.function
    assert model.settings is model.result.settings
    assert model.split is model.result.split
    assert model.kind == "cgpm" == model.settings.kind


def test_item_choices_most_duels_first_with_their_counts(loaded: state.LoadedData) -> None:
    data = loaded.data
    ids = [str(i) for i in data.item_ids]
    counts = {i: 0 for i in ids}
    for left, right in zip(data.left, data.right, strict=True):
        counts[ids[left]] += 1
        counts[ids[right]] += 1
    choices = views_data.item_choices(loaded)
    assert choices.counts == counts
    # Most duels first; equal counts keep the pool order.
    assert choices.ids == sorted(ids, key=lambda i: (-counts[i], ids.index(i)))
    assert choices.labels == {i: str(label) for i, label in zip(ids, data.labels, strict=True)}
    assert views_data.default_pair(loaded) == tuple(choices.ids[:2])


def test_item_record_and_duels_are_the_engine_s_and_each_caller_gets_a_copy(
    loaded: state.LoadedData,
) -> None:
    data = loaded.data
    record = views_data.item_record(loaded, "c01")
    direct = item_record(data, "c01")
    pd.testing.assert_frame_equal(record.duels, direct.duels)
    assert (record.wins, record.losses, record.n_duels) == (direct.wins, direct.losses,
                                                            direct.n_duels)  # fmt: skip
    record.duels.loc[:, "result"] = "changed by a page"
    assert set(views_data.item_record(loaded, "c01").duels["result"]) <= {"won", "lost", "tie"}
    other = views_data.item_record(loaded, "c02")
    assert other.item_id == "c02" and other.duels.equals(item_record(data, "c02").duels)

    opponent = str(direct.duels["opponent_id"].iloc[0])
    for outcome in ("all", "wins", "losses"):
        for against in (None, opponent):
            got = views_data.duels_of_item(loaded, "c01", outcome, against)
            want = duels_of_item(data, "c01", outcome=outcome, opponent=against)
            np.testing.assert_array_equal(got, want)
    wins = views_data.duels_of_item(loaded, "c01", "wins", None)
    assert np.all(data.winners()[wins] == data.item_index("c01"))
    table = views_data.explain_input_table(loaded, wins)
    pd.testing.assert_frame_equal(table, explain_input_table(data, wins))
    assert len(views_data.explain_input_table(loaded, wins[:1])) == 1


def test_selections_match_the_engine_and_a_direct_count(
    loaded: state.LoadedData, model: state.TrainedModel
) -> None:
    data = loaded.data
    columns = views_data.selection_columns(loaded)
    assert columns.groups == group_columns(data)
    assert columns.numeric == numeric_item_columns(data)
    assert columns.contexts == context_columns(data) == {"venue": ["indoor", "outdoor"]}

    fast = ItemCondition("speed", ">", 50.0)
    test = set(model.split.test.tolist())
    speed = pd.to_numeric(data.raw_items["speed"]).to_numpy()
    venue = data.raw_duels["venue"].astype(str).to_numpy()
    for held_out in (True, False):
        for context in (None, ("venue", "indoor")):
            got = views_data.group_duels(
                loaded, model, fast, None, held_out=held_out, context=context
            )
            want, wins = [], 0
            for k in range(data.n_duels):
                a_left, a_right = speed[data.left[k]] > 50, speed[data.right[k]] > 50
                if a_left == a_right or (held_out and k not in test):
                    continue
                if context is not None and venue[k] != context[1]:
                    continue
                want.append(k)
                wins += int(data.y[k] * (1 if a_left else -1) > 0)
            np.testing.assert_array_equal(got.duels, want)
            assert (got.wins, got.losses) == (wins, len(want) - wins)
    style = ItemCondition("style", "==", "balanced")
    versus = ItemCondition("style", "==", "defensive")
    both = views_data.group_duels(loaded, model, style, versus, held_out=False, context=None)
    rest = views_data.group_duels(loaded, model, style, None, held_out=False, context=None)
    assert 0 < len(both.duels) < len(rest.duels)

    for held_out in (True, False):
        got = views_data.context_duels(loaded, model, "venue", "outdoor", held_out=held_out)
        want = [k for k in range(data.n_duels)
                if venue[k] == "outdoor" and (not held_out or k in test)]  # fmt: skip
        np.testing.assert_array_equal(got, want)


def test_pairs_meetings_and_probabilities(
    loaded: state.LoadedData, model: state.TrainedModel
) -> None:
    data = loaded.data
    a, b = views_data.default_pair(loaded)
    met = views_data.pair_meetings(loaded, a, b)
    ra, rb = data.item_index(a), data.item_index(b)
    pair = [k for k in range(data.n_duels) if {data.left[k], data.right[k]} == {ra, rb}]
    assert met.table["duel"].tolist() == pair
    winner = {k: data.left[k] if data.y[k] > 0 else data.right[k] for k in pair if data.y[k]}
    assert (met.wins_a, met.wins_b) == (sum(w == ra for w in winner.values()),
                                        sum(w == rb for w in winner.values()))  # fmt: skip
    assert views_data.find_pair(loaded, f"{a} vs {b}") == (a, b)
    assert views_data.find_pair(loaded, a) is None
    with pytest.raises(KeyError):
        views_data.find_pair(loaded, "c01 vs nobody")

    x_a, x_b = data.items[[ra]], data.items[[rb]]
    got = views_data.pair_probabilities(loaded, model, x_a, x_b)
    want = pair_preference(model.function, x_a, x_b)
    assert got.g_average == want.g_average
    pd.testing.assert_frame_equal(got.by_context, want.by_context)
    assert set(got.by_context["value"]) == {"indoor", "outdoor"}
    edited = x_a.copy()
    edited[0, 0] += 1.0  # another row: another entry, not the cached one
    moved = views_data.pair_probabilities(loaded, model, edited, x_b)
    assert moved.g_average == pair_preference(model.function, edited, x_b).g_average
    assert moved.g_average != got.g_average


def test_model_contexts_and_what_if_columns(
    loaded: state.LoadedData, model: state.TrainedModel
) -> None:
    fn = model.function
    choices = views_data.context_choices(loaded, model)
    assert choices is not None and len(choices.labels) == len(fn.contexts)
    weights = np.asarray(fn.context_weights)
    assert sorted(choices.order) == list(range(len(fn.contexts)))
    assert np.all(np.diff(weights[choices.order]) <= 0)  # the most frequent first
    assert sorted(choices.labels) == ["venue = indoor", "venue = outdoor"]  # named columns
    assert views_data.context_groups(loaded, model) == categorical_context_groups(fn)

    data = loaded.data
    assert views_data.what_if_columns(loaded) == editable_columns(data)
    values = views_data.item_covariates(loaded, "c01")
    assert values == raw_covariates(data, "c01")
    row = data.items[[data.item_index("c01")]]
    np.testing.assert_array_equal(views_data.encoded_row(loaded, values),
                                  encode_covariates(data, values))  # fmt: skip
    np.testing.assert_allclose(views_data.encoded_row(loaded, values), row, atol=1e-12)
    faster = {**values, "speed": float(values["speed"]) + 5.0}
    np.testing.assert_array_equal(views_data.encoded_row(loaded, faster),
                                  encode_covariates(data, faster))  # fmt: skip
    assert not np.allclose(views_data.encoded_row(loaded, faster), row)
