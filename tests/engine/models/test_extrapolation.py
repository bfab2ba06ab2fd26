"""Evaluating given covariate rows outside the training range warns, naming column and range."""

import warnings

import numpy as np
import pytest

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.models.extrapolation import ExtrapolationWarning
from prefshap_core.models.preference_function import PreferenceFunction


def _function() -> PreferenceFunction:
    rng = np.random.default_rng(0)
    n, m = 20, 8
    space = FeatureSpace(("price", "size"), ("price", "size"), np.array([0, 1]),
                         np.array([100.0, 0.0]), np.array([50.0, 2.0]))  # fmt: skip
    items = rng.normal(size=(n, 2))
    ctx = FeatureSpace(("temp",), ("temp",), np.array([0]), np.array([20.0]), np.array([5.0]))
    contexts = np.array([[-1.0], [0.0], [1.0]])
    return PreferenceFunction(
        kind="cgpm", item_space=space, item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items, lengthscales=np.ones(2), centres_left=items[rng.integers(0, n, m)],
        centres_right=items[rng.integers(0, n, m)], alpha=rng.normal(size=m), cme_lambda=0.01,
        context_space=ctx, contexts=contexts, context_weights=np.ones(3),
        context_lengthscales=np.ones(1), centres_context=contexts[rng.integers(0, 3, m)],
        context_cme_lambda=0.01,
    )  # fmt: skip


def test_rows_inside_the_range_are_silent():
    fn = _function()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn.decision(fn.items[:5], fn.items[5:10], fn.contexts[[0, 1, 2, 0, 1]])
        fn.decision(fn.items[:5], fn.items[5:10])
    assert fn.outside_training_range(fn.items, fn.items, fn.contexts) == []


def test_a_value_beyond_the_pool_warns_with_raw_units():
    fn = _function()
    far = fn.items[:1].copy()
    far[0, 0] = fn.items[:, 0].max() + 3.0  # 3 model units = 150 raw units above the max
    raw_max = fn.items[:, 0].max() * 50.0 + 100.0
    raw_min = fn.items[:, 0].min() * 50.0 + 100.0
    with pytest.warns(ExtrapolationWarning) as caught:
        fn.decision(far, fn.items[1:2])
    message = str(caught[0].message)
    assert f"item column price = {raw_max + 150.0:.6g}" in message
    assert f"training range {raw_min:.6g} to {raw_max:.6g}" in message
    assert "size" not in message
    assert caught[0].filename == __file__  # points at the caller's line
    with pytest.warns(ExtrapolationWarning, match="item column price"):
        fn.decision_parts(far, fn.items[1:2])


def test_a_context_beyond_the_observed_contexts_warns():
    fn = _function()
    with pytest.warns(
        ExtrapolationWarning, match=r"context column temp = 35 \(training range 15 to 25\)"
    ):
        fn.decision(fn.items[:1], fn.items[1:2], np.array([[3.0]]))
