"""The games' set-up on the preference function: distinct centre rows, utility, CME problem."""

from __future__ import annotations

import numpy as np
import pytest

from prefshap_core.compute import Compute
from prefshap_core.explain.cme.base import CMEProblem
from prefshap_core.explain.games.context import ContextGame
from prefshap_core.explain.games.items import ItemGame
from prefshap_core.explain.games.sides import SidesGame
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.kernels.rows import unique_rows

COMPUTE = Compute()


def test_unique_rows_counts_minus_zero_as_zero():
    rows = np.array([[0.0, 1.0], [-0.0, 1.0], [2.0, 0.0], [0.0, 1.0]])
    uniq, index = unique_rows(rows)
    assert uniq.tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert index.tolist() == [0, 0, 1, 0]
    assert unique_rows(np.zeros((0, 3)))[1].shape == (0,)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_item_centres_index_the_distinct_centre_items(kind):
    fn = random_preference_function(kind, n_items=9, n_centres=14, seed=2, levels=2)
    centres = fn.item_centres()
    assert len(np.unique(centres.rows, axis=0)) == len(centres.rows)
    assert len(centres.rows) < 2 * fn.n_centres  # centres drawn from the pool repeat
    np.testing.assert_array_equal(centres.rows[centres.index[0]], fn.centres_left)
    np.testing.assert_array_equal(centres.rows[centres.index[1]], fn.centres_right)
    assert centres.pool is fn.items and centres.pool_weights is None
    assert centres.column_player is fn.item_space.feature_group


def test_utility_coefficients_give_the_utility_of_the_direct_formula():
    fn = random_preference_function("upm", n_items=9, n_centres=14, seed=4)
    centres = fn.item_centres()
    alpha = COMPUTE.tensor(fn.alpha)
    utility = centres.utility(alpha, 0.5, COMPUTE)
    ls = COMPUTE.tensor(fn.lengthscales)
    rows = COMPUTE.tensor(fn.items)
    direct = alpha @ (
        rbf_gram(COMPUTE.tensor(fn.centres_left), rows, ls)
        - rbf_gram(COMPUTE.tensor(fn.centres_right), rows, ls)
    )
    via_rows = utility @ rbf_gram(COMPUTE.tensor(centres.rows), rows, ls)
    np.testing.assert_allclose(via_rows.numpy(), 0.5 * direct.numpy(), rtol=0, atol=1e-12)


def test_context_centres_are_the_distinct_centre_contexts_over_the_observed_ones():
    fn = random_preference_function("cgpm", n_items=9, n_centres=14, seed=2)
    centres = fn.context_centres()
    assert centres.index.shape == (1, fn.n_centres)
    np.testing.assert_array_equal(centres.rows[centres.index[0]], fn.centres_context)
    assert centres.pool is fn.contexts and centres.pool_weights is fn.context_weights
    problem = CMEProblem.of(centres, 0.05)
    assert problem.centres is centres.rows and problem.cme_lambda == 0.05
    game = ContextGame(fn, COMPUTE, 0.05)
    np.testing.assert_array_equal(game.problem.centres, centres.rows)
    np.testing.assert_array_equal(game.problem.pool_weights, fn.context_weights)


@pytest.mark.parametrize("kind", ["gpm", "cgpm"])
def test_the_side_game_starts_from_the_item_games_set_up(kind):
    fn = random_preference_function(kind, n_items=9, n_centres=14, seed=3)
    game = SidesGame(fn, COMPUTE, fn.cme_lambda)
    assert game.centres is game.items.centres  # deduplicated once
    assert game.problem is game.items.problem
    np.testing.assert_array_equal(
        ItemGame(fn, COMPUTE, fn.cme_lambda).problem.centres, fn.item_centres().rows
    )
