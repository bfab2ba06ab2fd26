"""Pairwise Shapley interaction index: against the direct formula and against shapiq."""

import itertools
import math
import os

import numpy as np
import pytest

from prefshap_core.explain.interactions import (
    MAX_INTERACTION_PLAYERS,
    exact_interaction_matrix,
    interaction_square,
    pair_names,
    player_pairs,
    shapley_interactions,
)


def _code(players) -> int:
    return sum(1 << i for i in players)


def _direct_sii(v: np.ndarray, p: int) -> dict[tuple[int, int], float]:
    """Grabisch-Roubens by its definition: a loop over S subset of N - {i, j}."""
    out = {}
    for i, j in itertools.combinations(range(p), 2):
        rest = [k for k in range(p) if k not in (i, j)]
        total = 0.0
        for size in range(len(rest) + 1):
            weight = math.factorial(size) * math.factorial(p - size - 2) / math.factorial(p - 1)
            for s in itertools.combinations(rest, size):
                total += weight * (
                    v[_code((*s, i, j))] - v[_code((*s, i))] - v[_code((*s, j))] + v[_code(s)]
                )
        out[(i, j)] = total
    return out


@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_equals_the_direct_formula_for_every_game_of_a_batch(p):
    rng = np.random.default_rng(p)
    tables = rng.normal(size=(2**p, 3))
    got = shapley_interactions(tables)
    assert got.shape == (3, p * (p - 1) // 2)
    for d in range(3):
        slow = _direct_sii(tables[:, d], p)
        expected = [slow[(i, j)] for i, j in player_pairs(p).tolist()]
        np.testing.assert_allclose(got[d], expected, rtol=0, atol=1e-12)


def test_pure_pair_game_and_additive_game():
    p = 5
    codes = np.arange(2**p)
    member = (codes[:, None] >> np.arange(p)) & 1
    both_1_3 = (member[:, 1] & member[:, 3]).astype(float)  # v(S) = [1 and 3 in S]
    additive = member @ np.array([0.5, -2.0, 1.0, 3.0, 0.25])
    got = shapley_interactions(np.stack([both_1_3, additive], axis=1))
    names = pair_names([f"x{k}" for k in range(p)])
    expected = np.array([1.0 if name == "x1*x3" else 0.0 for name in names])
    np.testing.assert_allclose(got[0], expected, atol=1e-12)
    np.testing.assert_allclose(got[1], 0.0, atol=1e-12)


def test_square_form_is_symmetric_with_zero_diagonal():
    p = 4
    values = np.random.default_rng(1).normal(size=(2**p, 2))
    pairs = shapley_interactions(values)
    square = interaction_square(pairs, p)
    assert square.shape == (2, p, p)
    np.testing.assert_array_equal(square, np.swapaxes(square, 1, 2))
    np.testing.assert_array_equal(np.diagonal(square, axis1=1, axis2=2), 0.0)
    for k, (i, j) in enumerate(player_pairs(p).tolist()):
        assert square[1, i, j] == pairs[1, k]


def test_pair_order_and_names_follow_the_groups():
    assert player_pairs(3).tolist() == [[0, 1], [0, 2], [1, 2]]
    assert pair_names(["Speed", "Type", "HP"]) == ["Speed*Type", "Speed*HP", "Type*HP"]


def test_refuses_more_than_16_players_and_bad_tables():
    with pytest.raises(ValueError, match="16 players"):
        exact_interaction_matrix(MAX_INTERACTION_PLAYERS + 1)
    with pytest.raises(ValueError, match="2\\^p rows"):
        shapley_interactions(np.zeros((6, 1)))
    with pytest.raises(ValueError, match="at least 2 players"):
        shapley_interactions(np.zeros((2, 1)))


def _shapiq():
    try:
        import shapiq
    except ImportError:
        message = "shapiq (requirements-test.txt) is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    return shapiq


def _pref_shap_like_table(p: int, seed: int) -> np.ndarray:
    """A GPM-shaped coalition game: v(S) = sum_j a_j [k_S(l_j) k_S(r_j') - k_S(l_j') k_S(r_j)],
    with k_S a product over the players in S (v(empty) = 0, antisymmetric in the sides)."""
    rng = np.random.default_rng(seed)
    m = 6
    a = rng.normal(size=m)
    kl, kr = rng.uniform(0.2, 1.0, (m, p)), rng.uniform(0.2, 1.0, (m, p))
    kl2, kr2 = rng.uniform(0.2, 1.0, (m, p)), rng.uniform(0.2, 1.0, (m, p))
    member = ((np.arange(2**p)[:, None] >> np.arange(p)) & 1).astype(bool)

    def prod(k):  # (2^p, m): product over the coalition's players
        return np.stack([np.prod(np.where(member, k[j], 1.0), axis=1) for j in range(m)], 1)

    return (prod(kl) * prod(kr) - prod(kl2) * prod(kr2)) @ a


@pytest.mark.parametrize("p", [3, 5, 7])
def test_equals_shapiqs_exact_computer_on_the_same_value_function(p):
    shapiq = _shapiq()
    table = _pref_shap_like_table(p, seed=p)
    weights = 1 << np.arange(p)

    def game(coalitions: np.ndarray) -> np.ndarray:
        return table[np.asarray(coalitions, dtype=bool).astype(np.int64) @ weights]

    theirs = shapiq.ExactComputer(game, n_players=p)(index="SII", order=2)
    ours = shapley_interactions(table)[0]
    expected = np.array([theirs[(i, j)] for i, j in player_pairs(p).tolist()])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-10)
    assert np.abs(expected).max() > 1e-3  # the game has interactions to compare
