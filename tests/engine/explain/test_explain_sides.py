"""Side-aware explanations (2p players) against the slow direct formula and Shapley's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from prefshap_core.explain import Explainer, ExplainOptions, Shapley
from prefshap_core.explain.games import sides as sides_module
from prefshap_core.explain.reference import (
    random_preference_function,
    side_shapley,
    side_value,
)
from prefshap_core.explain.shapley.coalitions import bits_from_masks
from prefshap_core.models.preference_function import PreferenceFunction

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]
# Duels with a swapped pair, a repeat and an item against itself.
LEFT = np.array([0, 3, 5, 3, 7, 2])
RIGHT = np.array([3, 0, 9, 0, 7, 11])


def model(kind: str, seed: int = 3) -> PreferenceFunction:
    return random_preference_function(
        kind, n_items=12, n_centres=10, groups=GROUPS, seed=seed, levels=2
    )


def with_utility_weight(fn: PreferenceFunction, c: float) -> PreferenceFunction:
    return dataclasses.replace(fn, utility_weight=c)


def explain(fn, left=LEFT, right=RIGHT, **options):
    return Explainer(fn, ExplainOptions(what="sides", **options))(left, right)


@pytest.mark.parametrize(
    "kind, c", [("gpm", 0.0), ("upm", 1.0), ("cgpm", 0.0), ("gpm", 0.7), ("cgpm", 0.4)]
)
def test_matches_shapley_of_the_direct_formula(kind, c):
    fn = model(kind)
    if c and kind != "upm":
        fn = with_utility_weight(fn, c)
    expl = explain(fn)
    p = fn.item_space.n_groups
    assert expl.player_names == tuple(
        [f"left:{g}" for g, _ in GROUPS] + [f"right:{g}" for g, _ in GROUPS]
    )
    assert expl.what == "sides" and expl.meta["n_players"] == 2 * p
    assert np.abs(expl.values).max() > 1e-3
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        phi, base, output = side_shapley(fn, fn.items[a], fn.items[b], fn.cme_lambda, c)
        np.testing.assert_allclose(expl.values[i], phi, atol=1e-8, rtol=0)
        assert expl.base_values[i] == base
        assert expl.outputs[i] == pytest.approx(output, abs=1e-10)
    assert expl.efficiency_gap() < 1e-10


@pytest.mark.parametrize("kind, c", [("gpm", 0.0), ("upm", 1.0), ("cgpm", 0.5)])
def test_coalition_table_is_the_direct_formula(kind, c):
    fn = model(kind, seed=5)
    if c and kind != "upm":
        fn = with_utility_weight(fn, c)
    table = Explainer(fn, ExplainOptions(what="sides")).coalition_values(LEFT[:3], RIGHT[:3])
    p = fn.item_space.n_groups
    group = fn.item_space.feature_group
    for k, mask in enumerate(table.masks):
        if not mask.any() or mask.all():
            continue  # fixed: 0 and g (test_boundaries_of_the_formula)
        cols_l, cols_r = mask[:p][group], mask[p:][group]
        for d, (a, b) in enumerate(zip(LEFT[:3], RIGHT[:3], strict=True)):
            want = side_value(fn, fn.items[a], fn.items[b], cols_l, cols_r, fn.cme_lambda, c)
            assert table.values[k, d] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_boundaries_of_the_formula(kind):
    """The formula itself gives v(empty, empty) = 0 and v(all, all) = g (c = 0 / UPM)."""
    fn = model(kind)
    table = Explainer(fn, ExplainOptions(what="sides")).coalition_values(LEFT, RIGHT)
    none = np.zeros(fn.items.shape[1], dtype=bool)
    for d, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        c = 1.0 if kind == "upm" else 0.0
        x_l, x_r = fn.items[a], fn.items[b]
        assert side_value(fn, x_l, x_r, none, none, fn.cme_lambda, c) == pytest.approx(0, abs=1e-12)
        full = side_value(fn, x_l, x_r, ~none, ~none, fn.cme_lambda, c)
        assert full == pytest.approx(table.values[-1, d], abs=1e-10)
        assert table.values[0, d] == 0.0


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_diagonal_coalitions_are_the_item_game(kind):
    """S_l = S_r is Prop. 3.2. (The item game fixes its boundary rows to 0 and g rather
    than embedding them; the side game's diagonal boundaries are the same 0 and g.)"""
    fn = model(kind)
    items = Explainer(fn, ExplainOptions(what="items")).coalition_values(LEFT, RIGHT)
    sides = Explainer(fn, ExplainOptions(what="sides")).coalition_values(LEFT, RIGHT)
    diagonal = bits_from_masks(np.hstack([items.masks, items.masks]))
    np.testing.assert_allclose(sides.values[diagonal], items.values, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", ["gpm", "cgpm"])
def test_diagonal_coalitions_are_the_item_game_with_a_utility_weight(kind):
    fn = with_utility_weight(model(kind), 0.6)
    items = Explainer(fn, ExplainOptions(what="items")).coalition_values(LEFT, RIGHT)
    sides = Explainer(fn, ExplainOptions(what="sides")).coalition_values(LEFT, RIGHT)
    diagonal = bits_from_masks(np.hstack([items.masks, items.masks]))
    np.testing.assert_allclose(sides.values[diagonal], items.values, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_swapping_the_sides(kind):
    fn = with_utility_weight(model(kind), 0.3) if kind != "upm" else model(kind)
    forward = explain(fn)
    backward = explain(fn, RIGHT, LEFT)
    p = fn.item_space.n_groups
    swapped = np.hstack([backward.values[:, p:], backward.values[:, :p]])
    np.testing.assert_allclose(forward.values, -swapped, atol=1e-12, rtol=0)
    # rows 0 and 1 are the same duel swapped within one call
    np.testing.assert_allclose(
        forward.values[0], -np.concatenate([forward.values[1, p:], forward.values[1, :p]]),
        atol=1e-12, rtol=0,
    )  # fmt: skip
    # an item against itself: its left value of a group is minus its right value
    np.testing.assert_allclose(forward.values[4, :p], -forward.values[4, p:], atol=1e-12)
    table = Explainer(fn, ExplainOptions(what="sides")).coalition_values(LEFT, RIGHT)
    codes = bits_from_masks(table.masks[:, sides_module.side_swap(p)])
    np.testing.assert_allclose(table.values[:, 0], -table.values[codes, 1], atol=1e-12, rtol=0)


def test_views_exchange_the_sides():
    """A view that swaps a duel's sides exchanges left:<g> and right:<g> and negates."""
    fn = model("gpm")
    expl = Explainer(fn, ExplainOptions(what="sides"))(LEFT, RIGHT, winners=-np.ones(len(LEFT)))
    view = expl.oriented_to_winner()
    p = fn.item_space.n_groups
    np.testing.assert_allclose(view.values[:, :p], -expl.values[:, p:], atol=0)
    np.testing.assert_allclose(view.values[:, p:], -expl.values[:, :p], atol=0)
    assert view.efficiency_gap() < 1e-10
    np.testing.assert_array_equal(view.left_ids, expl.right_ids)


@pytest.mark.parametrize("grid_factor", [0, 10**9])
def test_grid_and_pair_contractions_agree(grid_factor, monkeypatch):
    fn = model("gpm")
    want = explain(fn).values
    monkeypatch.setattr(sides_module, "_GRID_FACTOR", grid_factor)
    np.testing.assert_allclose(explain(fn).values, want, atol=1e-12, rtol=0)


def test_sampled_runs_embed_each_side_coalition_once(monkeypatch):
    fn = model("cgpm")
    exact = explain(fn)
    seen: list[bytes] = []
    original = sides_module._BoundSidesGame._embeddings

    def spy(self, side_masks, coalition_batch):
        seen.extend(np.packbits(m).tobytes() for m in side_masks)
        return original(self, side_masks, coalition_batch)

    monkeypatch.setattr(sides_module._BoundSidesGame, "_embeddings", spy)
    sampled = explain(fn, shapley=Shapley("sampled", 60), seed=2)
    assert sampled.meta["shapley"] == "sampled"
    assert len(seen) == len(set(seen))  # one embedding per distinct S_l or S_r
    assert sampled.efficiency_gap() < 1e-10
    assert np.all(sampled.standard_errors >= 0)
    err = np.abs(sampled.values - exact.values).max()
    assert err < 0.5 * np.abs(exact.values).max()
    # every proper coalition sampled: the exact values
    full = explain(fn, shapley=Shapley("sampled", 2**8))
    np.testing.assert_allclose(full.values, exact.values, atol=1e-9, rtol=0)


def test_default_exact_limit_is_16():
    assert ExplainOptions(what="sides").exact_limit() == 16
    with pytest.raises(ValueError, match="what must be one of"):
        ExplainOptions(what="pairs")  # type: ignore[arg-type]
