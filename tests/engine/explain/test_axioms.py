"""The Shapley axioms on the engine's explanations (docs/method.md), exact and sampled.

Null player, precisely: if a group's columns are constant over the pool, the
centres and the queries, its kernel factor is identically 1, so for every
coalition S without it, v(S + j) = v(S) exactly *unless S + j is the full set*:
v(full) is fixed to the model output g by definition, while the estimated
v(full - j) is g up to the CME's shrinkage, O(lambda). Hence
phi_j = (g - v(full - j)) / p exactly, and phi_j -> 0 as lambda -> 0. A group
with an enormous lengthscale is the same up to O(1 / l^2).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from prefshap_core.compute import Compute
from prefshap_core.explain import Explainer, ExplainOptions, Shapley
from prefshap_core.explain.games.items import ItemGame, item_coalition_values
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.explain.shapley.coalitions import all_coalitions, bits_from_masks
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import sample_stratified_coalitions

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("c", 1)]


def item_explanation(fn, left, right, *, compute=None, **options):
    return Explainer(fn, ExplainOptions(**options), compute=compute)(left, right)


def context_explanation(fn, left, right, contexts, **options):
    return Explainer(fn, ExplainOptions(what="context", **options))(left, right, contexts=contexts)


def item_values(fn, masks, left, right):
    """(K, D) ``v(S)`` of every mask for duels of pool rows, from the item game itself."""
    return item_coalition_values(fn, masks, left, right)


def duels(n_items, n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_items, n), rng.integers(0, n_items, n)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_efficiency(kind, dtype):
    fn = random_preference_function(kind, n_items=12, groups=GROUPS, seed=1)
    left, right = duels(12, 10, seed=2)
    e = item_explanation(fn, left, right, compute=Compute(dtype=dtype))
    assert np.abs(e.outputs).max() > 1e-3
    # v(empty), v(full) are fixed and the weights are applied in float64.
    assert e.efficiency_gap() < 1e-10


def test_efficiency_context_and_sampled():
    fn = random_preference_function("cgpm", n_items=12, groups=GROUPS, seed=3)
    left, right = duels(12, 10, seed=4)
    contexts = fn.contexts[np.arange(10) % len(fn.contexts)]
    assert context_explanation(fn, left, right, contexts).efficiency_gap() < 1e-10
    sampled = item_explanation(fn, left, right, shapley=Shapley("sampled", 6), seed=1)
    assert sampled.meta["shapley"] == "sampled"
    assert sampled.efficiency_gap() < 1e-10


@pytest.mark.parametrize("contraction", ["gather", "table"])
@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_antisymmetry_is_exact(kind, contraction, monkeypatch):
    monkeypatch.setattr(ItemGame, "contraction", contraction)
    fn = random_preference_function(kind, n_items=12, groups=GROUPS, seed=5)
    left, right = duels(12, 9, seed=6)
    both = item_explanation(fn, np.r_[left, right], np.r_[right, left])
    n = len(left)
    # Bitwise: a duel and its swap are the same floats negated, in one call ...
    assert np.array_equal(both.values[:n], -both.values[n:])
    assert np.array_equal(both.outputs[:n], -both.outputs[n:])
    # ... and across calls on the same duels.
    forward, backward = item_explanation(fn, left, right), item_explanation(fn, right, left)
    assert np.array_equal(forward.values, -backward.values)
    assert np.array_equal(forward.values, both.values[:n])


def test_antisymmetry_context_and_sampled():
    fn = random_preference_function("cgpm", n_items=12, groups=GROUPS, seed=7)
    left, right = duels(12, 8, seed=8)
    ctx = fn.contexts[np.arange(8) % len(fn.contexts)]
    e = context_explanation(fn, np.r_[left, right], np.r_[right, left], np.r_[ctx, ctx])
    assert np.array_equal(e.values[:8], -e.values[8:])
    assert np.array_equal(e.base_values[:8], -e.base_values[8:])
    s = item_explanation(fn, np.r_[left, right], np.r_[right, left], shapley=Shapley("sampled", 8))
    assert np.array_equal(s.values[:8], -s.values[8:])
    assert np.array_equal(s.standard_errors[:8], s.standard_errors[8:])


def with_constant_group(fn, group, lengthscale=None):
    items = fn.items.copy()
    cols = fn.item_space.group_columns(group)
    items[:, cols] = 0.7
    cl, cr = fn.centres_left.copy(), fn.centres_right.copy()
    cl[:, cols] = cr[:, cols] = 0.7
    ls = fn.lengthscales.copy()
    if lengthscale is not None:  # flat kernel instead of a constant column
        items, cl, cr = fn.items, fn.centres_left, fn.centres_right
        ls[cols] = lengthscale
    return dataclasses.replace(fn, items=items, centres_left=cl, centres_right=cr, lengthscales=ls)


@pytest.mark.parametrize("kind", ["gpm", "upm"])
def test_null_player_constant_group(kind):
    null = 2  # "b"
    fn = with_constant_group(random_preference_function(kind, 12, groups=GROUPS, seed=9), null)
    left, right = duels(12, 6, seed=10)
    p = fn.item_space.n_groups
    # 1) v(S + j) == v(S) for every S without j whose union is not the full set.
    masks = all_coalitions(p).masks
    values = item_values(fn, masks, left, right)
    values[0] = 0.0  # v(empty) by definition
    bits = bits_from_masks(masks)
    full = 2**p - 1
    for s in bits[(bits & (1 << null)) == 0]:
        if s | (1 << null) != full:
            np.testing.assert_allclose(values[s | (1 << null)], values[s], atol=1e-12)
    # 2) so phi_j is exactly the boundary term (g - v(full - j)) / p ...
    e = item_explanation(fn, left, right)
    boundary = (e.outputs - values[full & ~(1 << null)]) / p
    np.testing.assert_allclose(e.values[:, null], boundary, atol=1e-12)
    # 3) ... which vanishes with the CME's regulariser, while the others do not.
    tiny = item_explanation(fn, left, right, cme_lambda=1e-9)
    assert np.abs(tiny.values[:, null]).max() < 1e-6 * np.abs(tiny.values).max()


def test_null_player_flat_kernel():
    # 1 / l^2 = 1e-16 must stay far below n lambda (1.2e-6), or the nearly flat
    # kernel still tells rows apart at the regulariser's scale.
    fn = random_preference_function("gpm", 12, groups=GROUPS, seed=11)
    flat = with_constant_group(fn, 3, lengthscale=1e8)
    e = item_explanation(flat, *duels(12, 6, seed=12), cme_lambda=1e-7)
    assert np.abs(e.values[:, 3]).max() < 1e-4 * np.abs(e.values).max()


def test_symmetry_of_identical_groups():
    fn = random_preference_function("gpm", 12, groups=[("a", 1), ("b", 1), ("c", 1)], seed=13)
    # Make "c" an exact copy of "a" (values and lengthscale) everywhere.
    items, cl, cr, ls = (
        x.copy() for x in (fn.items, fn.centres_left, fn.centres_right, fn.lengthscales)
    )
    for arr in (items, cl, cr):
        arr[:, 2] = arr[:, 0]
    ls[2] = ls[0]
    twin = dataclasses.replace(fn, items=items, centres_left=cl, centres_right=cr, lengthscales=ls)
    e = item_explanation(twin, *duels(12, 8, seed=14))
    assert np.abs(e.values[:, 0]).max() > 1e-3
    np.testing.assert_allclose(e.values[:, 0], e.values[:, 2], atol=1e-12)


def test_sampled_values_converge_to_exact():
    groups = [(f"g{k}", 1) for k in range(7)]
    fn = random_preference_function("gpm", 14, n_centres=20, groups=groups, seed=15, levels=3)
    left, right = duels(14, 6, seed=16)
    p = fn.item_space.n_groups
    exact = item_explanation(fn, left, right)
    # The game's values once (duels oriented by pool row; a swap only negates every
    # value, exactly), then the estimator on many samples of it.
    a, b = np.minimum(left, right), np.maximum(left, right)
    sign = np.where(left > right, -1.0, 1.0)[:, None]
    values = item_values(fn, all_coalitions(p).masks, a, b)
    v_empty, v_full = np.zeros(len(a)), exact.outputs * sign[:, 0]

    def sampled(n, seed):
        coalitions = sample_stratified_coalitions(p, n, seed)
        phi, se = SampledShapley(coalitions)(
            values[bits_from_masks(coalitions.masks)], v_empty, v_full
        )
        return phi * sign, se

    # The explainer's sampled path is this estimator on the same coalitions.
    via_explainer = item_explanation(fn, left, right, shapley=Shapley("sampled", 40), seed=3)
    np.testing.assert_allclose(via_explainer.values, sampled(40, 3)[0], atol=1e-12)
    errors, ses = [], []
    for n in (20, 40, 80):  # above p - 1 = 6 unknowns, or nothing is identified
        runs = [sampled(n, seed) for seed in range(8)]
        errors.append(np.mean([np.abs(phi - exact.values).mean() for phi, _ in runs]))
        ses.append(np.mean([se.mean() for _, se in runs]))
    assert errors[0] > errors[1] > errors[2]
    assert ses[0] > ses[1] > ses[2]
    # Asking for at least every proper coalition gives the exact answer.
    full = item_explanation(fn, left, right, shapley=Shapley("sampled", 2**7 - 2))
    np.testing.assert_allclose(full.values, exact.values, atol=1e-12)
    np.testing.assert_array_equal(full.standard_errors, 0.0)
