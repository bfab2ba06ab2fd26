"""Interactions over a chosen subset of item groups: the others stay at the duel's values."""

import itertools
import math

import numpy as np
import pytest

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.interaction_explanation import explain_interactions
from prefshap_core.models.preference_function import PreferenceFunction

NAMES = ("a", "b", "c", "d")


def _gpm(n_groups: int = 4) -> PreferenceFunction:
    rng = np.random.default_rng(7)
    n, m = 25, 16
    names = tuple(f"g{k}" for k in range(n_groups)) if n_groups != 4 else NAMES
    space = FeatureSpace(names, names, np.arange(n_groups), np.zeros(n_groups), np.ones(n_groups))
    items = rng.normal(size=(n, n_groups))
    return PreferenceFunction(
        kind="gpm", item_space=space, item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items, lengthscales=np.full(n_groups, 1.3),
        centres_left=items[rng.integers(0, n, m)], centres_right=items[rng.integers(0, n, m)],
        alpha=rng.normal(size=m), cme_lambda=0.01,
    )  # fmt: skip


def test_a_subset_is_the_game_with_the_others_always_present():
    fn = _gpm()
    left, right = np.array(["i0", "i3", "i7"]), np.array(["i5", "i1", "i2"])
    full = Explainer(fn, ExplainOptions(what="items", shapley="exact")).coalition_values(
        left, right
    )
    code = {tuple(mask.tolist()): k for k, mask in enumerate(full.masks)}

    def v(players: set[str]) -> np.ndarray:  # the full game's table, by player names
        return full.values[code[tuple(name in players for name in NAMES)]]

    chosen = ("a", "c", "d")  # "b" is left out: it stays present in every coalition
    inter = explain_interactions(fn, left, right, groups=["d", "a", "c"])
    assert inter.player_names == chosen  # the model's order, whatever the order asked
    assert inter.pair_names == ["a*c", "a*d", "c*d"]
    p = len(chosen)
    for column, (i, j) in enumerate(itertools.combinations(chosen, 2)):
        others = [x for x in chosen if x not in (i, j)]
        want = np.zeros(len(left))
        for size in range(len(others) + 1):
            weight = math.factorial(size) * math.factorial(p - size - 2) / math.factorial(p - 1)
            for s in itertools.combinations(others, size):
                base = {"b", *s}
                want += weight * (v(base | {i, j}) - v(base | {i}) - v(base | {j}) + v(base))
        np.testing.assert_allclose(inter.values[:, column], want, atol=1e-10)
    np.testing.assert_allclose(inter.outputs, v(set(NAMES)), atol=1e-12)  # g itself


def test_all_groups_chosen_is_the_plain_interaction_and_bad_choices_are_refused():
    fn = _gpm()
    left, right = np.array(["i0", "i3"]), np.array(["i5", "i1"])
    plain = explain_interactions(fn, left, right)
    same = explain_interactions(fn, left, right, groups=list(NAMES))
    np.testing.assert_array_equal(plain.values, same.values)
    with pytest.raises(ValueError, match="not item groups of this model: zz"):
        explain_interactions(fn, left, right, groups=["a", "zz"])
    with pytest.raises(ValueError, match="2 to 16 chosen item groups, got 1"):
        explain_interactions(fn, left, right, groups=["a"])


def test_more_than_16_groups_are_refused_at_once_and_a_subset_runs():
    fn = _gpm(18)
    left, right = np.array(["i0"]), np.array(["i5"])
    with pytest.raises(ValueError, match="the model has 18: choose at most 16 of them"):
        explain_interactions(fn, left, right)
    inter = explain_interactions(fn, left, right, groups=["g0", "g5", "g17"])
    assert inter.player_names == ("g0", "g5", "g17") and inter.values.shape == (1, 3)
