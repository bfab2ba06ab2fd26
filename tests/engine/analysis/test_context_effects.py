"""Context effects: mean win probabilities per context value against a direct computation."""

import numpy as np
import pytest

from prefshap_core.analysis.context_effects import context_effects, strongest_shifts
from prefshap_core.analysis.contexts import context_slices
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.plots.context_effects import context_effects_heatmap


def _cgpm(n: int = 9) -> PreferenceFunction:
    rng = np.random.default_rng(4)
    m = 14
    space = FeatureSpace(("x", "y"), ("x", "y"), np.array([0, 1]), np.zeros(2), np.ones(2))
    items = rng.normal(size=(n, 2))
    ctx = FeatureSpace(("venue=in", "venue=out", "temp"), ("venue", "temp"),
                       np.array([0, 0, 1]), np.zeros(3), np.ones(3))  # fmt: skip
    contexts = np.array([[1, 0, 0.0], [0, 1, 0.0], [1, 0, 1.0], [0, 1, 1.0], [0, 1, 2.0]])
    return PreferenceFunction(
        kind="cgpm", item_space=space, item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items, lengthscales=np.ones(2), centres_left=items[rng.integers(0, n, m)],
        centres_right=items[rng.integers(0, n, m)], alpha=rng.normal(size=m) * 3,
        cme_lambda=0.01, context_space=ctx, contexts=contexts,
        context_weights=np.array([3.0, 1.0, 2.0, 5.0, 4.0]),
        context_lengthscales=np.ones(3) * 0.8, centres_context=contexts[rng.integers(0, 5, m)],
        context_cme_lambda=0.01, item_names=np.array([f"name {k}" for k in range(n)]),
    )  # fmt: skip


def _direct(fn: PreferenceFunction, weights: np.ndarray | None) -> np.ndarray:
    """mean_{j != i} sigmoid(sum_c w_c g(u_c, i, j) / sum_c w_c), duel by duel."""
    n = len(fn.items)
    w = np.asarray(fn.context_weights if weights is None else weights, dtype=float)
    out = np.zeros(n)
    for i in range(n):
        probs = []
        for j in range(n):
            if i == j:
                continue
            g = [fn.decision(fn.items[i], fn.items[j], fn.contexts[c])[0] if w[c] else 0.0
                 for c in range(len(w))]  # fmt: skip
            probs.append(1 / (1 + np.exp(-np.dot(w, g) / w.sum())))
        out[i] = np.mean(probs)
    return out


def test_each_value_against_the_direct_average_of_g():
    fn = _cgpm()
    effects = context_effects(fn)
    slices = context_slices(fn.context_space, fn.contexts, fn.context_weights)
    assert effects.levels == tuple(s.label for s in slices)
    assert effects.levels[:2] == ("venue = in", "venue = out")
    assert set(effects.groups) == {"venue", "temp"}
    np.testing.assert_allclose(effects.p_mix, _direct(fn, None), atol=1e-10)
    for k, piece in enumerate(slices):
        np.testing.assert_allclose(effects.p_level[:, k], _direct(fn, piece.weights), atol=1e-10)
    # shares of the observed duels: venue = in is 3 + 2 of 15
    assert effects.shares[0] == pytest.approx(5 / 15)
    assert effects.shares[:2].sum() == pytest.approx(1.0)


def test_ranks_order_and_the_sentence():
    fn = _cgpm()
    effects = context_effects(fn)
    change = effects.p_level - effects.p_mix[:, None]
    np.testing.assert_array_equal(effects.change, change)
    order = effects.item_order()
    strength = np.abs(change).max(axis=1)[order]
    assert np.all(np.diff(strength) <= 0)
    k = 1
    by_hand = np.argsort(-effects.p_level[:, k], kind="stable")
    assert effects.rank_level[by_hand[0], k] == 1
    assert sorted(effects.rank_level[:, k].tolist()) == list(range(1, len(fn.items) + 1))
    row, column = effects.strongest(1)[0]
    assert row == order[0]
    text = strongest_shifts(effects, k=2)
    points = 100 * abs(change[row, column])
    assert text.startswith(f"Strongest shifts: name {row} ")
    assert f"{points:.1f} points of mean win probability under {effects.levels[column]}" in text
    assert f"(rank {effects.rank_mix[row]} → {effects.rank_level[row, column]})" in text
    assert len(effects.strongest(3)) == len({r for r, _ in effects.strongest(3)})


def test_heatmap_rows_are_the_strongest_items_first():
    fn = _cgpm()
    effects = context_effects(fn)
    fig = context_effects_heatmap(effects, max_items=4)
    heat = fig.data[0]
    order = effects.item_order()[:4]
    np.testing.assert_allclose(heat.z, 100 * effects.change[order])
    assert list(fig.layout.yaxis.ticktext) == [f"name {r}" for r in order.tolist()]
    assert list(heat.x) == list(effects.levels)


def test_a_model_without_context_is_refused():
    from dataclasses import replace

    nothing = dict.fromkeys(
        (
            "context_space",
            "contexts",
            "context_weights",
            "context_lengthscales",
            "centres_context",
            "context_cme_lambda",
        )
    )
    fn = replace(_cgpm(), kind="gpm", **nothing)  # fmt: skip
    with pytest.raises(ValueError, match="need a C-GPM"):
        context_effects(fn)
