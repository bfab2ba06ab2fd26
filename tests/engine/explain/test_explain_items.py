"""Item explanations (Prop. 3.2) against the slow direct reference, and their plumbing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.errors import CancelledError, DataValidationError
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain import duel_groups as duel_groups_module
from prefshap_core.explain.cme.embedding import CoalitionEmbedding
from prefshap_core.explain.games import items as items_game
from prefshap_core.explain.games.items import ItemGame
from prefshap_core.explain.reference import (
    g_direct,
    item_shapley,
    item_value_of_players,
    random_preference_function,
    shapley_by_subsets,
)
from prefshap_core.progress import Progress

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]


def duels(fn, n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, len(fn.items), n), rng.integers(0, len(fn.items), n)


def explain(fn, left, right, *, compute=None, options=None, **call):
    return Explainer(fn, options, compute=compute)(left, right, **call)


def assert_matches_reference(fn, left, right, explanation, lam=None):
    lam = fn.cme_lambda if lam is None else lam
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        phi, base, output = item_shapley(fn, fn.items[a], fn.items[b], lam)
        np.testing.assert_allclose(explanation.values[i], phi, atol=1e-8, rtol=0)
        assert explanation.base_values[i] == base
        assert explanation.outputs[i] == pytest.approx(output, abs=1e-10)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("path", ["centres", "queries"])
def test_matches_reference(kind, path, monkeypatch):
    monkeypatch.setattr(CoalitionEmbedding, "path", path)
    # 14 items on 2 levels per numeric column: many repeated rows and classes.
    fn = random_preference_function(kind, n_items=14, n_centres=12, groups=GROUPS, seed=3, levels=2)
    assert len(np.unique(fn.items, axis=0)) < len(fn.items)
    left, right = duels(fn, 7, seed=1)
    explanation = explain(fn, left, right)
    assert np.abs(explanation.values).max() > 1e-3  # a non-trivial comparison
    assert_matches_reference(fn, left, right, explanation)


@pytest.mark.parametrize("contraction", ["gather", "table"])
def test_both_contractions_match_reference(contraction, monkeypatch):
    monkeypatch.setattr(ItemGame, "contraction", contraction)
    fn = random_preference_function("gpm", n_items=10, groups=GROUPS, seed=4)
    left, right = duels(fn, 6, seed=2)
    assert_matches_reference(fn, left, right, explain(fn, left, right))


def test_gathered_dot_products_in_blocks_of_two_duels_give_the_same_values(monkeypatch):
    monkeypatch.setattr(ItemGame, "contraction", "gather")
    fn = random_preference_function("gpm", n_items=10, groups=GROUPS, seed=4)
    left, right = duels(fn, 7, seed=2)
    whole = explain(fn, left, right)
    monkeypatch.setattr(items_game, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(items_game, "_MIN_CHUNK_ROWS", 2)  # 7 duels: 4 blocks
    blocked = explain(fn, left, right)
    np.testing.assert_array_equal(blocked.values, whole.values)
    assert_matches_reference(fn, left, right, blocked)


def test_cme_lambda_override_and_float32():
    fn = random_preference_function("gpm", n_items=10, groups=GROUPS, seed=5)
    left, right = duels(fn, 5, seed=3)
    options = ExplainOptions(cme_lambda=0.2)
    e64 = explain(fn, left, right, options=options)
    assert_matches_reference(fn, left, right, e64, lam=0.2)
    e32 = explain(fn, left, right, options=options, compute=Compute(dtype="float32"))
    np.testing.assert_allclose(e32.values, e64.values, atol=1e-4)
    assert e32.meta["dtype"] == "float32"


def test_cgpm_items_explain_the_context_averaged_model():
    fn = random_preference_function("cgpm", n_items=10, groups=GROUPS, seed=6)
    left, right = duels(fn, 5, seed=4)
    explanation = explain(fn, left, right)
    np.testing.assert_allclose(
        explanation.outputs, fn.decision(fn.items[left], fn.items[right]), atol=1e-12
    )


def test_ids_metadata_data_and_labels():
    fn = random_preference_function("gpm", n_items=10, groups=GROUPS, seed=7)
    left, right = np.array([0, 3, 5]), np.array([1, 2, 5])
    e = explain(
        fn,
        fn.item_ids[left],
        fn.item_ids[right],
        winners=np.array([1, -1, 0]),
        duel_ids=np.array(["m1", "m2", "m3"]),
    )
    assert e.player_names == ("a", "type", "b", "colour")
    assert e.left_ids.tolist() == fn.item_ids[left].tolist()
    assert e.duel_ids.tolist() == ["m1", "m2", "m3"] and e.winners.tolist() == [1, -1, 0]
    space = fn.item_space
    raw_l, raw_r = space.to_raw(fn.items[left]), space.to_raw(fn.items[right])
    np.testing.assert_allclose(e.data[:, 0], raw_l[:, 0] - raw_r[:, 0], atol=1e-12)
    assert np.isnan(e.data[:, 1]).all()  # one-hot group: no single difference
    type_l = [space.feature_names[j][5:] for j in 1 + raw_l[:, 1:4].argmax(1)]
    type_r = [space.feature_names[j][5:] for j in 1 + raw_r[:, 1:4].argmax(1)]
    assert e.data_labels[:, 1].tolist() == [
        f"{a} vs {b}" for a, b in zip(type_l, type_r, strict=True)
    ]
    # An item against itself: nothing to explain.
    assert e.outputs[2] == 0.0 and (e.values[2] == 0.0).all()
    assert e.meta["shapley"] == "exact" and e.meta["n_coalitions"] == 16
    np.testing.assert_array_equal(e.standard_errors, 0.0)


def test_bad_items_are_located():
    fn = random_preference_function("gpm", n_items=6, seed=8)
    with pytest.raises(DataValidationError, match="row 2") as err:
        explain(fn, np.array(["i0", "nope"]), np.array(["i1", "i2"]))
    assert err.value.column == "left"
    with pytest.raises(DataValidationError, match="outside"):
        explain(fn, np.array([0]), np.array([6]))


def test_aggregate_of_one_item_is_the_mean_of_its_duels():
    """Table 1, row 2: the Shapley values of the averaged value function
    (1/m) sum_i v(x, x_i, S) over x's duels equal the mean of per-duel values."""
    fn = random_preference_function("gpm", n_items=8, groups=GROUPS, seed=9)
    others = np.array([1, 2, 4, 6, 7])
    left = np.array([0, 2, 0, 6, 0])  # item 0 on both sides
    right = np.where(left == 0, others, 0)
    e = explain(fn, fn.item_ids[left], fn.item_ids[right])
    view = e.from_point_of_view("i0")
    p = fn.item_space.n_groups
    per_duel = [item_value_of_players(fn, fn.items[0], fn.items[o], fn.cme_lambda) for o in others]
    direct = shapley_by_subsets(lambda s: np.mean([v(s) for v in per_duel]), p)
    np.testing.assert_allclose(view.mean(), direct, atol=1e-8)
    assert view.efficiency_gap() < 1e-12


def test_duel_groups_give_the_same_values(monkeypatch):
    fn = random_preference_function("gpm", n_items=10, groups=GROUPS, seed=10)
    left, right = duels(fn, 12, seed=5)
    whole = explain(fn, left, right)
    monkeypatch.setattr(duel_groups_module, "_MAX_VALUES_IN_MEMORY", 40)  # 16 coalitions x 2
    split = explain(fn, left, right)
    np.testing.assert_allclose(split.values, whole.values, atol=1e-12)


def test_progress_is_reported_and_cancel_propagates():
    fn = random_preference_function("gpm", n_items=8, seed=11)
    left, right = duels(fn, 4, seed=6)
    seen = []
    explain(fn, left, right, progress=Progress(callback=lambda u: seen.append(u.fraction)))
    assert seen and seen[-1] == pytest.approx(1.0) and seen == sorted(seen)
    with pytest.raises(CancelledError):
        explain(fn, left, right, progress=Progress(should_cancel=lambda: True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    fn = random_preference_function("gpm", n_items=12, groups=GROUPS, seed=12)
    left, right = duels(fn, 8, seed=7)
    cpu = explain(fn, left, right)
    gpu = explain(fn, left, right, compute=Compute(device="cuda"))
    np.testing.assert_allclose(gpu.values, cpu.values, atol=1e-10)
    assert gpu.efficiency_gap() < 1e-10


@pytest.mark.parametrize("kind", ["gpm", "cgpm"])
@pytest.mark.parametrize("utility_weight", [0.7, 40.0])
def test_sum_kernel_models_match_reference_and_are_efficient(kind, utility_weight):
    """w > 0: v(S) = GPM value + w * utility value, exact against the slow reference."""
    fn = random_preference_function(kind, n_items=14, n_centres=12, groups=GROUPS, seed=8, levels=2)
    fn = replace(fn, utility_weight=utility_weight)
    left, right = duels(fn, 7, seed=5)
    for a, b in zip(left, right, strict=True):  # the reference's g is the model's
        assert g_direct(fn, fn.items[a], fn.items[b]) == pytest.approx(
            fn.decision(fn.items[a], fn.items[b])[0], abs=1e-10
        )
    explanation = explain(fn, left, right)
    assert_matches_reference(fn, left, right, explanation)
    assert explanation.efficiency_gap() < 1e-10
    swapped = explain(fn, right, left)
    np.testing.assert_allclose(swapped.values, -explanation.values, atol=1e-12)
    # the utility part is really in there
    plain = explain(replace(fn, utility_weight=0.0), left, right)
    assert np.abs(plain.values - explanation.values).max() > 1e-3
