"""g = utility part + intransitive part for the sum kernel k_E + w k_UPM.

Checked against a direct NumPy formula written from docs/model-format.md ("The
model"), and for the properties that make the split meaningful: the parts sum to
``decision``, the utility part is a utility difference (transitive, antisymmetric).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prefshap_core.analysis.utility_split import duel_parts, has_utility_split
from prefshap_core.data.build import load_directory
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.models.decision_parts import DecisionParts
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.paths import repo_root

TOL = dict(rtol=1e-12, atol=1e-12)


def _function(kind: str, utility_weight: float, seed: int = 3) -> PreferenceFunction:
    fn = random_preference_function(kind, n_items=14, n_centres=12, seed=seed)
    return replace(fn, utility_weight=utility_weight)


def _k(centres: np.ndarray, x: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    """(M, q) k(c_j, x_q) = exp(-1/2 sum ((c - x) / l)^2), written out."""
    diff = (centres[:, None, :] - x[None, :, :]) / lengthscales
    return np.exp(-0.5 * (diff**2).sum(-1))


def _direct_parts(
    fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, u: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(utility, intransitive) by the model file's formula, duel by duel."""
    kll = _k(fn.centres_left, x_l, fn.lengthscales)  # k(cl_j, x_l)
    krr = _k(fn.centres_right, x_r, fn.lengthscales)  # k(cr_j, x_r)
    klr = _k(fn.centres_left, x_r, fn.lengthscales)  # k(cl_j, x_r)
    krl = _k(fn.centres_right, x_l, fn.lengthscales)  # k(cr_j, x_l)
    weight = np.repeat(fn.alpha[:, None], len(x_l), 1)  # (M, q)
    if fn.kind == "cgpm":
        if u is None:  # the context-averaged model: alpha_j * E_U k_U(cu_j, U)
            ku = _k(fn.centres_context, fn.contexts, fn.context_lengthscales)
            mean = ku @ fn.context_weights / fn.context_weights.sum()
            weight = weight * mean[:, None]
        else:
            weight = weight * _k(fn.centres_context, u, fn.context_lengthscales)
    utility_bracket = kll + krr - klr - krl
    if fn.kind == "upm":
        return (weight * utility_bracket).sum(0), np.zeros(len(x_l))
    gpm_bracket = kll * krr - klr * krl
    return fn.utility_weight * (weight * utility_bracket).sum(0), (weight * gpm_bracket).sum(0)


def _duels(fn: PreferenceFunction, n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    left, right = rng.integers(0, len(fn.items), n), rng.integers(0, len(fn.items), n)
    u = None
    if fn.kind == "cgpm":
        u = fn.contexts[rng.integers(0, len(fn.contexts), n)]
    return fn.items[left], fn.items[right], u


CASES = [
    ("gpm", 2.5, False),
    ("cgpm", 2.5, True),
    ("cgpm", 2.5, False),
    ("upm", 0.0, False),
    ("gpm", 0.0, False),
    ("cgpm", 0.0, True),
]


@pytest.mark.parametrize(("kind", "w", "with_context"), CASES)
def test_parts_sum_to_g_and_match_the_model_file_formula(kind, w, with_context):
    fn = _function(kind, w)
    x_l, x_r, u = _duels(fn)
    u = u if with_context else None
    parts = fn.decision_parts(x_l, x_r, u)
    assert isinstance(parts, DecisionParts) and len(parts) == len(x_l)
    g = fn.decision(x_l, x_r, u)
    np.testing.assert_allclose(parts.total, g, **TOL)
    utility, intransitive = _direct_parts(fn, x_l, x_r, u)
    np.testing.assert_allclose(parts.utility, utility, **TOL)
    np.testing.assert_allclose(parts.intransitive, intransitive, **TOL)
    if kind == "upm":  # all utility: the intransitive part is exactly 0
        assert np.all(parts.intransitive == 0) and np.array_equal(parts.utility, g)
    elif w == 0:  # a plain GPM: no utility part at all
        assert np.all(parts.utility == 0) and np.array_equal(parts.intransitive, g)
    else:  # both parts really are there
        assert np.abs(parts.utility).max() > 1e-3 and np.abs(parts.intransitive).max() > 1e-3
    assert has_utility_split(fn) == (kind != "upm" and w > 0)


@pytest.mark.parametrize(
    ("kind", "with_context"), [("gpm", False), ("cgpm", True), ("cgpm", False)]
)
def test_the_utility_part_is_a_utility_difference(kind, with_context):
    fn = _function(kind, 4.0, seed=7)
    n = len(fn.items)
    a, b, c = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    a, b, c = a.ravel(), b.ravel(), c.ravel()
    ctx_pool = ctx_index = None
    if with_context:  # every triangle under one context, triangles under several
        ctx_pool, ctx_index = fn.contexts, np.arange(len(a)) % len(fn.contexts)

    def parts(x, y):
        return fn.decision_parts_on_pool(fn.items, x, y, ctx_pool, ctx_index)

    ab, bc, ac, ba = parts(a, b), parts(b, c), parts(a, c), parts(b, a)
    np.testing.assert_allclose(ab.utility + bc.utility, ac.utility, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ab.utility, -ba.utility)  # antisymmetric, exactly
    np.testing.assert_array_equal(ab.intransitive, -ba.intransitive)
    # The intransitive part is not transitive (else the split would say nothing).
    assert np.abs(ab.intransitive + bc.intransitive - ac.intransitive).max() > 1e-3
    np.testing.assert_array_equal(ab.swapped().utility, ba.utility)


def test_pool_and_row_forms_agree():
    fn = _function("cgpm", 1.5)
    rng = np.random.default_rng(2)
    left, right = rng.integers(0, len(fn.items), 30), rng.integers(0, len(fn.items), 30)
    index = rng.integers(0, len(fn.contexts), 30)
    pooled = fn.decision_parts_on_pool(fn.items, left, right, fn.contexts, index)
    rows = fn.decision_parts(fn.items[left], fn.items[right], fn.contexts[index])
    np.testing.assert_allclose(pooled.utility, rows.utility, **TOL)
    np.testing.assert_allclose(pooled.intransitive, rows.intransitive, **TOL)
    assert np.all(pooled.total[left == right] == 0)


@pytest.mark.parametrize(("kind", "w"), [("gpm", 2.5), ("cgpm", 2.5), ("upm", 0.0)])
def test_pool_rows_no_duel_uses_change_nothing(kind, w):
    """g reads only the pool rows its duels use: a pool with many rows no duel meets
    (a data set's whole item table under a few test duels) gives the same numbers."""
    fn = _function(kind, w)
    rng = np.random.default_rng(4)
    left, right = rng.integers(0, 5, 12), rng.integers(0, 5, 12)  # rows 0-4 only
    u = (fn.contexts, rng.integers(0, len(fn.contexts), 12)) if kind == "cgpm" else (None, None)
    pool = np.vstack([fn.items[:5], rng.normal(size=(40, fn.items.shape[1]))])
    np.testing.assert_array_equal(
        fn.decision_on_pool(pool, left, right, *u), fn.decision_on_pool(pool[:5], left, right, *u)
    )
    np.testing.assert_allclose(
        fn.decision_on_pool(pool, left, right, *u),
        fn.decision(fn.items[left], fn.items[right], None if u[0] is None else u[0][u[1]]),
        **TOL,
    )


def test_utility_share():
    parts = DecisionParts(np.array([3.0, -1.0]), np.array([-1.0, 1.0]))
    assert parts.mean_sizes() == (2.0, 1.0)
    assert parts.utility_share() == pytest.approx(2.0 / 3.0)
    assert np.isnan(DecisionParts(np.zeros(2), np.zeros(2)).utility_share())
    assert DecisionParts(np.ones(2), np.zeros(2)).utility_share() == 1.0
    with pytest.raises(ValueError, match="disagree"):
        DecisionParts(np.ones(2), np.ones(3))


def _on_dataset(data, kind: str, utility_weight: float) -> PreferenceFunction:
    """A random function on ``data``'s pool (and observed contexts): centres from it."""
    rng = np.random.default_rng(0)
    n, m = len(data.items), 10
    fields = {}
    if kind == "cgpm":
        fields = dict(
            context_space=data.context_space,
            contexts=data.contexts,
            context_weights=np.bincount(data.context_index, minlength=len(data.contexts)) + 0.0,
            context_lengthscales=np.full(data.contexts.shape[1], 1.1),
            centres_context=data.contexts[rng.integers(0, len(data.contexts), m)],
        )
    return replace(
        random_preference_function(kind, seed=1),
        item_space=data.item_space,
        item_ids=data.item_ids,
        items=data.items,
        lengthscales=np.full(data.items.shape[1], 1.3),
        centres_left=data.items[rng.integers(0, n, m)],
        centres_right=data.items[rng.integers(0, n, m)],
        alpha=rng.normal(0, 1, m),
        utility_weight=utility_weight,
        **fields,
    )


@pytest.mark.parametrize("averaged", [False, True])
def test_duel_parts_on_a_dataset_follow_each_duels_context(averaged):
    data = load_directory(repo_root() / "sample_data")
    fn = _on_dataset(data, "cgpm", 2.0)
    duels = np.arange(0, data.n_duels, 7)
    parts = duel_parts(fn, data, duels, averaged=averaged)
    x_l, x_r = data.items[data.left[duels]], data.items[data.right[duels]]
    u = None if averaged else data.contexts[data.context_index[duels]]
    utility, intransitive = _direct_parts(fn, x_l, x_r, u)
    np.testing.assert_allclose(parts.utility, utility, **TOL)
    np.testing.assert_allclose(parts.intransitive, intransitive, **TOL)


def test_duel_parts_without_context():
    data = synthetic_clusters(n_items=30, n_duels=200, seed=0)
    fn = _on_dataset(data, "gpm", 2.0)
    duels = np.arange(0, 200, 7)
    parts = duel_parts(fn, data, duels)
    x_l, x_r = data.items[data.left[duels]], data.items[data.right[duels]]
    np.testing.assert_allclose(parts.total, fn.decision(x_l, x_r), **TOL)
    utility, intransitive = _direct_parts(fn, x_l, x_r, None)
    np.testing.assert_allclose(parts.utility, utility, **TOL)
    np.testing.assert_allclose(parts.intransitive, intransitive, **TOL)
