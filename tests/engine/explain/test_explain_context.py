"""Context explanations of a C-GPM (Prop. 3.3) against the slow direct reference.

The reference expands the unique contexts by their counts and solves the dense
``m x m`` system; the engine solves over unique (and merged) contexts with weights.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prefshap_core.compute import Compute
from prefshap_core.errors import DataValidationError
from prefshap_core.explain import Explainer, ExplainOptions, Shapley
from prefshap_core.explain.cme.embedding import CoalitionEmbedding
from prefshap_core.explain.reference import (
    context_shapley,
    g_direct,
    random_preference_function,
)

ITEM_GROUPS = [("a", 1), ("type", 3), ("b", 1)]
CONTEXT_GROUPS = [("indoor", 1), ("surface", 3), ("altitude", 1)]


def explain(fn, left, right, contexts, *, compute=None, call=None, **options):
    explainer = Explainer(fn, ExplainOptions(what="context", **options), compute=compute)
    return explainer(left, right, contexts=contexts, **(call or {}))


def make(seed: int):
    fn = random_preference_function(
        "cgpm",
        n_items=10,
        n_centres=12,
        groups=ITEM_GROUPS,
        context_groups=CONTEXT_GROUPS,
        n_contexts=9,
        seed=seed,
    )
    rng = np.random.default_rng(seed)
    n = 8
    left, right = rng.integers(0, 10, n), rng.integers(0, 10, n)
    contexts = fn.contexts[rng.integers(0, len(fn.contexts), n)].copy()
    contexts[0] += 0.3  # a context never observed in training
    return fn, left, right, contexts


@pytest.mark.parametrize("path", ["centres", "queries"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_reference(path, seed, monkeypatch):
    monkeypatch.setattr(CoalitionEmbedding, "path", path)
    fn, left, right, contexts = make(seed)
    e = explain(fn, left, right, contexts)
    assert e.what == "context" and e.player_names == ("indoor", "surface", "altitude")
    assert np.abs(e.values).max() > 1e-4
    for i in range(len(left)):
        phi, base, output = context_shapley(
            fn, fn.items[left[i]], fn.items[right[i]], contexts[i], fn.context_cme_lambda
        )
        np.testing.assert_allclose(e.values[i], phi, atol=1e-8, rtol=0)
        assert e.base_values[i] == pytest.approx(base, abs=1e-12)
        assert e.outputs[i] == pytest.approx(output, abs=1e-12)


def test_base_value_is_the_item_explanations_output():
    fn, left, right, contexts = make(2)
    ctx = explain(fn, left, right, contexts)
    items = Explainer(fn)(left, right)
    np.testing.assert_array_equal(ctx.base_values, items.outputs)
    np.testing.assert_allclose(
        ctx.outputs, fn.decision(fn.items[left], fn.items[right], contexts), atol=1e-12
    )
    assert ctx.efficiency_gap() < 1e-12


def test_lambda_override_and_float32():
    fn, left, right, contexts = make(3)
    e64 = explain(fn, left, right, contexts, cme_lambda=0.3)
    for i in range(3):
        phi, _, _ = context_shapley(fn, fn.items[left[i]], fn.items[right[i]], contexts[i], 0.3)
        np.testing.assert_allclose(e64.values[i], phi, atol=1e-8)
    e32 = explain(fn, left, right, contexts, cme_lambda=0.3, compute=Compute(dtype="float32"))
    np.testing.assert_allclose(e32.values, e64.values, atol=1e-5)


def test_context_values_and_labels_do_not_flip():
    fn, left, right, contexts = make(4)
    winners = np.where(left < right, 1, -1)
    e = explain(fn, left, right, contexts, call={"winners": winners})
    space = fn.context_space
    raw = space.to_raw(contexts)
    np.testing.assert_allclose(e.context_values[:, 0], raw[:, 0])
    assert np.isnan(e.context_values[:, 1]).all() and np.isnan(e.data).all()
    surface = [space.feature_names[1 + j].split("=")[1] for j in raw[:, 1:4].argmax(1)]
    assert e.data_labels[1:, 1].tolist() == surface[1:]
    view = e.oriented_to_winner()
    np.testing.assert_array_equal(view.context_values, e.context_values)
    assert view.data_labels[:, 1].tolist() == e.data_labels[:, 1].tolist()


def test_bad_inputs():
    fn, left, right, contexts = make(5)
    with pytest.raises(DataValidationError, match="contexts must be"):
        explain(fn, left, right, contexts[:, :2])
    gpm = random_preference_function("gpm", n_items=6)
    with pytest.raises(ValueError, match="C-GPM"):
        explain(gpm, [0], [1], np.zeros((1, 2)))


def test_sampled_context():
    fn, left, right, contexts = make(6)
    exact = explain(fn, left, right, contexts)
    # Three players have 6 proper coalitions: asking for all of them is exact ...
    full = explain(fn, left, right, contexts, shapley=Shapley("sampled", 6))
    np.testing.assert_allclose(full.values, exact.values, atol=1e-12)
    # ... and a sampled pair keeps efficiency exact, with standard errors reported.
    some = explain(fn, left, right, contexts, shapley=Shapley("sampled", 2))
    # (a sampled stratum takes at least two pairs, so that its variance exists)
    assert some.meta["shapley"] == "sampled" and some.meta["n_coalitions"] < 6
    assert some.efficiency_gap() < 1e-12
    assert some.standard_errors.shape == some.values.shape


@pytest.mark.parametrize("utility_weight", [0.7, 40.0])
def test_sum_kernel_context_values_match_reference_and_are_efficient(utility_weight):
    """Xi_j = k_E(...) + w k_UPM(...): exact against the slow reference, efficient."""
    fn, left, right, contexts = make(4)
    fn = replace(fn, utility_weight=utility_weight)
    e = explain(fn, left, right, contexts)
    for i in range(len(left)):
        x_l, x_r = fn.items[left[i]], fn.items[right[i]]
        assert g_direct(fn, x_l, x_r, contexts[i][None, :]) == pytest.approx(
            fn.decision(x_l, x_r, contexts[i])[0], abs=1e-10
        )
        phi, base, output = context_shapley(fn, x_l, x_r, contexts[i], fn.context_cme_lambda)
        np.testing.assert_allclose(e.values[i], phi, atol=1e-8, rtol=0)
        assert e.base_values[i] == pytest.approx(base, abs=1e-10)
        assert e.outputs[i] == pytest.approx(output, abs=1e-10)
    assert e.efficiency_gap() < 1e-10
    swapped = explain(fn, right, left, contexts)
    np.testing.assert_allclose(swapped.values, -e.values, atol=1e-12)
