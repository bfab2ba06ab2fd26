"""Gamma matrices of the coalition CMEs against the dense formula, and choosing lambda.

The reference (reference.gamma_direct) solves the full ``n x n`` system over the
expanded pool for every query: no classes, no weights, no gathers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.errors import CancelledError
from prefshap_core.explain.cme.base import CMEProblem, CMESystem
from prefshap_core.explain.cme.embedding import CholeskySolver, CoalitionEmbedding
from prefshap_core.explain.cme.regulariser import (
    LambdaSearch,
    choose_cme_lambda,
    cme_lambda_scores,
)
from prefshap_core.explain.reference import gamma_direct
from prefshap_core.explain.shapley.coalitions import all_coalitions
from prefshap_core.models.hyperparameters import DEFAULT_CME_LAMBDA
from prefshap_core.progress import cancel_scope


def problem(seed: int = 0, n: int = 15, levels: int = 2):
    """Pool with repeated rows and repeated per-group values, plus a multi-column group."""
    rng = np.random.default_rng(seed)
    numeric = rng.integers(0, levels, (n, 3)).astype(float)
    onehot = np.eye(3)[rng.integers(0, 3, n)]
    pool = np.hstack([numeric, onehot]) - 0.4
    column_player = np.array([0, 1, 2, 3, 3, 3])
    weights = rng.integers(1, 4, n).astype(float)
    centres = np.vstack([pool[rng.integers(0, n, 6)], pool[0] + rng.normal(0, 0.3, 6)])
    queries = np.vstack([pool[rng.integers(0, n, 5)], pool[1] + 0.25])
    lengthscales = rng.uniform(0.6, 1.5, 6)
    return pool, weights, centres, queries, lengthscales, column_player


def embedding(pool, weights, centres, ls, players, lam, compute):
    cme = CMEProblem(
        pool=pool,
        pool_weights=weights,
        centres=centres,
        lengthscales=ls,
        column_player=players,
        cme_lambda=lam,
    )
    return CoalitionEmbedding(cme, compute)


def dense_gamma(pool, weights, centres, queries, ls, column_player, mask, lam):
    expanded = np.repeat(pool, weights.astype(int), axis=0)
    cols = mask[column_player]
    return np.stack([gamma_direct(centres, q, expanded, cols, ls, lam) for q in queries], axis=1)


@pytest.mark.parametrize("path", ["centres", "queries"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gamma_matches_dense_formula(path, weighted, monkeypatch):
    monkeypatch.setattr(CoalitionEmbedding, "path", path)
    pool, weights, centres, queries, ls, players = problem(seed=1)
    weights = weights if weighted else np.ones(len(pool))
    lam = 0.03
    emb = embedding(pool, weights, centres, ls, players, lam, Compute())
    masks = all_coalitions(4).masks
    gammas = emb.gammas(masks, emb.bind(queries))
    for mask, (gamma, column) in zip(masks, gammas, strict=True):
        got = gamma.numpy()[:, column]
        want = dense_gamma(pool, weights, centres, queries, ls, players, mask, lam)
        np.testing.assert_allclose(got, want, atol=1e-12, rtol=1e-10)


def test_query_classes_match_a_row_by_row_labelling():
    """Queries that are fixed rows (pool or centre rows) take those rows' classes without
    any key; the others (what-if rows, one repeated) match on their S columns alone or
    open new classes in order of first appearance."""
    pool, weights, centres, queries, ls, players = problem(seed=3, n=30)
    queries = np.vstack([queries, centres[-2:], queries[-1], pool[4] - 0.5, queries[:2]])
    emb = embedding(pool, weights, centres, ls, players, 0.1, Compute())
    universe = emb.bind(queries)
    fixed_rows = universe.pool.rows
    assert (universe.fixed_row >= 0).sum() == 5 + 2 + 2  # pool and centre queries
    for mask in all_coalitions(4).masks:
        co = universe.classes(mask)
        cols = mask[players]
        n_fixed_classes = int(co.labels[: len(fixed_rows)].max()) + 1
        labels = co.labels[len(fixed_rows) :]
        opened: list[bytes] = []
        for k, q in enumerate(queries):
            equal = np.flatnonzero((fixed_rows[:, cols] == q[cols]).all(axis=1))
            if len(equal):
                assert labels[k] == co.labels[equal[0]]
                continue
            key = q[cols].tobytes()
            if key not in opened:
                opened.append(key)
                assert co.first[labels[k]] == len(fixed_rows) + k
            assert labels[k] == n_fixed_classes + opened.index(key)
        np.testing.assert_array_equal(co.q_cls[co.q_col], labels)


def test_classes_really_merge_rows():
    pool, weights, centres, queries, ls, players = problem(seed=2, n=40, levels=2)
    emb = embedding(pool, weights, centres, ls, players, 0.1, Compute())
    universe = emb.bind(queries)
    co = universe.classes(np.array([True, False, False, False]))
    assert co.r == 2  # one binary column: two classes out of 40 rows
    assert co.sc_first.shape[0] < len(universe.pool.rows)  # distinct pool and centre rows


def test_float32_agrees():
    pool, weights, centres, queries, ls, players = problem(seed=3)
    masks = all_coalitions(4).masks[1:-1]
    lam = 0.05
    g64 = embedding(pool, weights, centres, ls, players, lam, Compute())
    g32 = embedding(pool, weights, centres, ls, players, lam, Compute(dtype="float32"))
    pairs = zip(
        g64.gammas(masks, g64.bind(queries)), g32.gammas(masks, g32.bind(queries)), strict=True
    )
    for (a, ca), (b, cb) in pairs:
        assert b.dtype == torch.float32
        np.testing.assert_allclose(b.numpy()[:, cb], a.numpy()[:, ca], atol=2e-5)


def test_batched_cholesky_equals_one_by_one():
    rng = np.random.default_rng(4)
    systems = []
    for _ in range(3):
        pts = torch.tensor(rng.normal(size=(6, 2)))
        gram = torch.exp(-0.5 * torch.cdist(pts, pts) ** 2)
        systems.append(
            CMESystem(
                points=pts,
                gram=gram,
                weights=torch.tensor(rng.integers(1, 4, 6).astype(float)),
                ridge=0.2,
                rhs=torch.tensor(rng.normal(size=(6, 3))),
            )
        )
    one = CholeskySolver(batch_equal_sizes=False).solve(systems)
    many = CholeskySolver(batch_equal_sizes=True).solve(systems)
    for s, a, b in zip(systems, one, many, strict=True):
        w = s.weights.sqrt()
        matrix = w[:, None] * s.gram * w[None, :] + s.ridge * torch.eye(6, dtype=torch.float64)
        torch.testing.assert_close(matrix @ a, s.rhs)
        torch.testing.assert_close(a, b)


def test_solver_recovers_from_float32_indefiniteness():
    # A rank-one Gram with a ridge below float32 resolution is not numerically PD.
    pts = torch.zeros((5, 1), dtype=torch.float32)
    system = CMESystem(
        points=pts,
        gram=torch.ones((5, 5), dtype=torch.float32),
        weights=torch.full((5,), 1e4, dtype=torch.float32),
        ridge=1e-12,
        rhs=torch.ones((5, 1), dtype=torch.float32),
    )
    (x,) = CholeskySolver().solve([system])
    assert torch.isfinite(x).all()


def test_lambda_scores_are_errors_and_choice_is_their_argmin():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(150, 4))
    search = LambdaSearch(seed=1)
    scores = cme_lambda_scores(x, np.ones(4), np.arange(4), search=search)
    assert all(0.0 <= s <= 1.0 + 1e-9 for s in scores.values())
    chosen = choose_cme_lambda(x, np.ones(4), np.arange(4), search=search)
    assert chosen == min(scores, key=scores.get)


def test_a_job_cancel_stops_the_lambda_search_between_factorizations(monkeypatch):
    # The regulariser search ends every training; a dashboard cancel must reach it.
    factorizations: list[int] = []
    original = torch.linalg.cholesky

    def counted(a, *args, **kwargs):
        factorizations.append(1)
        return original(a, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "cholesky", counted)
    x = np.random.default_rng(5).normal(size=(150, 4))
    search = LambdaSearch(seed=1)
    with cancel_scope(lambda: len(factorizations) >= 3), pytest.raises(CancelledError):
        cme_lambda_scores(x, np.ones(4), np.arange(4), search=search)
    assert len(factorizations) == 3  # of 8 coalitions x 7 candidates


def test_lambda_follows_dependence():
    # Copies: the other half is a function of S, so a nearly unregularised CME is
    # right; independent noise: the CME must average, so a larger lambda wins.
    rng = np.random.default_rng(6)
    base = rng.normal(size=(200, 2))
    copies = np.hstack([base, base])
    noise = rng.normal(size=(200, 4))
    groups = np.array([0, 1, 2, 3])
    search = LambdaSearch(seed=0)
    dependent = choose_cme_lambda(copies, np.ones(4), groups, search=search)
    independent = choose_cme_lambda(noise, np.ones(4), groups, search=search)
    assert dependent < independent


def test_lambda_with_counts_and_degenerate_inputs():
    contexts = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    counts = np.array([40.0, 25.0, 10.0])
    lam = choose_cme_lambda(contexts, np.ones(2), np.array([0, 1]), weights=counts)
    assert lam > 0
    # One player has no proper coalition: nothing to score, the default comes back.
    assert choose_cme_lambda(contexts, np.ones(2), np.array([0, 0])) == DEFAULT_CME_LAMBDA
