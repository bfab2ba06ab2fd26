"""Plots of side-aware explanations and interaction values: they show the right numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.interaction_explanation import explain_interactions
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.plots import (
    interaction_heatmap,
    interaction_scatter,
    own_vs_opponents,
    waterfall,
)
from prefshap_core.plots.own_vs_opponents import ALL_FEATURES, side_totals

GROUPS = [("a", 1), ("type", 3), ("b", 1)]
LEFT = np.array([0, 1, 2, 3, 4, 0])
RIGHT = np.array([5, 6, 0, 0, 9, 2])
WINNERS = np.array([1, -1, -1, 1, -1, 1])


@pytest.fixture(scope="module")
def fn():
    return random_preference_function("gpm", n_items=10, groups=GROUPS, seed=2)


@pytest.fixture(scope="module")
def sides(fn):
    explainer = Explainer(fn, ExplainOptions(what="sides"))
    return explainer(fn.item_ids[LEFT], fn.item_ids[RIGHT], winners=WINNERS)


def test_own_vs_opponents_totals_and_bars(fn, sides):
    view = sides.from_point_of_view(str(fn.item_ids[0]))
    own, theirs = side_totals(view)
    np.testing.assert_allclose(own + theirs, view.outputs, atol=1e-10)
    fig = own_vs_opponents(view)
    own_bars, opp_bars = fig.data
    assert own_bars.customdata[0, 0] == ALL_FEATURES
    assert own_bars.x[0] == pytest.approx(own.mean())
    assert opp_bars.x[0] == pytest.approx(theirs.mean())
    for row, name in enumerate(own_bars.customdata[1:, 0], start=1):
        g = [n.split(":", 1)[1] for n in view.player_names[:3]].index(name)
        assert own_bars.x[row] == pytest.approx(view.values[:, g].mean())
        assert opp_bars.x[row] == pytest.approx(view.values[:, 3 + g].mean())
    items = Explainer(fn, ExplainOptions(what="items"))(fn.item_ids[LEFT], fn.item_ids[RIGHT])
    with pytest.raises(ValueError, match="side-aware"):
        own_vs_opponents(items)


def test_waterfall_split_by_side(sides):
    fig = waterfall(sides, index=1)
    left_bars, right_bars = fig.data
    np.testing.assert_allclose(sorted(left_bars.x), sorted(sides.values[1, :3]), atol=0)
    np.testing.assert_allclose(sorted(right_bars.x), sorted(sides.values[1, 3:]), atol=0)
    end = right_bars.base[-1] + right_bars.x[-1]
    assert end == pytest.approx(sides.outputs[1], abs=1e-12)
    notes = [a.text for a in fig.layout.annotations]
    assert (
        f"{sides.left_ids[1]}'s features" in notes and f"{sides.right_ids[1]}'s features" in notes
    )


def test_interactions_winner_view_is_the_swapped_duels(fn):
    inter = explain_interactions(fn, fn.item_ids[LEFT], fn.item_ids[RIGHT], winners=WINNERS)
    swapped = explain_interactions(fn, fn.item_ids[RIGHT], fn.item_ids[LEFT])
    view = inter.oriented_to_winner()
    lost = WINNERS < 0
    np.testing.assert_allclose(view.values[lost], swapped.values[lost], atol=1e-12, rtol=0)
    np.testing.assert_allclose(view.values[~lost], inter.values[~lost], atol=0)
    np.testing.assert_array_equal(view.left_ids[lost], fn.item_ids[RIGHT][lost])
    np.testing.assert_allclose(view.mean_abs(), np.abs(inter.values).mean(0), atol=1e-15)


def test_heatmap_cells_carry_their_pair(fn):
    inter = explain_interactions(fn, fn.item_ids[LEFT], fn.item_ids[RIGHT], winners=WINNERS)
    fig = interaction_heatmap(inter.oriented_to_winner())
    (cells,) = fig.data
    assert cells.marker.symbol == "square"
    square = inter.square(inter.mean_abs())
    for (i, j, strength, _), x, y in zip(cells.customdata, cells.x, cells.y, strict=True):
        i, j = int(i), int(j)
        assert i != j and (y, x) == (inter.player_names[i], inter.player_names[j])
        assert strength == pytest.approx(square[i, j])
    assert len(cells.x) == 3 * 2  # every ordered pair, no diagonal


def test_pair_scatter_aligns_duels_and_refuses_other_orientations(fn):
    inter = explain_interactions(
        fn, fn.item_ids[LEFT], fn.item_ids[RIGHT], winners=WINNERS, duel_ids=np.arange(6)
    ).oriented_to_winner()
    items = Explainer(fn, ExplainOptions(what="items"))(
        fn.item_ids[LEFT], fn.item_ids[RIGHT], winners=WINNERS, duel_ids=np.arange(6)
    ).oriented_to_winner()
    reversed_rows = items.subset(np.arange(6)[::-1])
    fig = interaction_scatter(inter, reversed_rows, 0, 2)
    (points,) = fig.data
    np.testing.assert_allclose(points.y, inter.values[:, 1], atol=0)  # pair (0, 2)
    np.testing.assert_allclose(points.x, items.data[:, 0], atol=0)
    assert json.loads(fig.to_json())["layout"]["title"]["text"].startswith("a × b")
    with pytest.raises(ValueError, match="oriented differently"):
        interaction_scatter(inter, items.reoriented(np.ones(6), "left"), 0, 2)
