"""Scalable CME solvers: batched preconditioned CG, Nyström, automatic choice.

Every method is checked against the exact Cholesky engine (itself tested against the
dense formula in test_cme.py): CG to its tolerance, Nyström exactly when every pool
class is a landmark and with a measured, shrinking error otherwise.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prefshap_core.cli import main
from prefshap_core.compute import Compute
from prefshap_core.explain import (
    AutoOptions,
    CGOptions,
    CholeskyOptions,
    Explainer,
    ExplainOptions,
    NystromOptions,
    cme_options,
)
from prefshap_core.explain.cme.backends import make_backend
from prefshap_core.explain.cme.base import CMEProblem, CMESystem
from prefshap_core.explain.cme.cg import CGSolver, CMEConvergenceError
from prefshap_core.explain.cme.embedding import CholeskySolver, CoalitionEmbedding
from prefshap_core.explain.cme.nystrom import NystromEmbedding, nystrom_factor
from prefshap_core.explain.cme.select import ProblemSizes, choose_method
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.explain.shapley.coalitions import all_coalitions
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.models.model_file import save_model
from prefshap_core.solvers.cg import batched_pcg
from prefshap_core.solvers.result import SolverError

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]


def pool_problem(seed: int = 0, n: int = 60, levels: int = 5):
    """Weighted pool with repeated rows, a one-hot group, centres and queries off the pool."""
    rng = np.random.default_rng(seed)
    numeric = rng.integers(0, levels, (n, 3)).astype(float)
    onehot = np.eye(3)[rng.integers(0, 3, n)]
    pool = np.hstack([numeric, onehot]) / 2.0 - 0.4
    players = np.array([0, 1, 2, 3, 3, 3])
    weights = rng.integers(1, 4, n).astype(float)
    centres = np.vstack([pool[rng.integers(0, n, 12)], pool[0] + rng.normal(0, 0.3, 6)])
    queries = np.vstack([pool[rng.integers(0, n, 9)], pool[1] + 0.25])
    lengthscales = rng.uniform(0.8, 1.6, 6)
    return pool, weights, centres, queries, lengthscales, players


def cme_problem(pool, weights, centres, queries, lengthscales, players, lam):
    """The CME problem of :func:`pool_problem`'s arrays, and its queries."""
    problem = CMEProblem(
        pool=pool,
        pool_weights=weights,
        centres=centres,
        lengthscales=lengthscales,
        column_player=players,
        cme_lambda=lam,
    )
    return problem, queries


def gammas(embedding, queries, masks):
    return [g.numpy()[:, col] for g, col in embedding.gammas(masks, embedding.bind(queries))]


def explain(fn, left, right, cme=None, compute=None, contexts=None):
    what = "items" if contexts is None else "context"
    options = ExplainOptions(what=what, cme=cme or AutoOptions())
    return Explainer(fn, options, compute=compute)(left, right, contexts=contexts)


def max_rel(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(a, b, strict=True))


MASKS = all_coalitions(4).masks[1:-1]


# -- CG ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["centres", "queries"])
@pytest.mark.parametrize("rank", [0, 5, 256])
def test_cg_gamma_agrees_with_cholesky_to_its_tolerance(path, rank, monkeypatch):
    monkeypatch.setattr(CoalitionEmbedding, "path", path)
    problem, queries = cme_problem(*pool_problem(seed=1), 0.02)
    exact = gammas(CoalitionEmbedding(problem, Compute()), queries, MASKS)
    solver = CGSolver(tol=1e-11, preconditioner_rank=rank)
    got = gammas(CoalitionEmbedding(problem, Compute(), solver=solver), queries, MASKS)
    assert max_rel(got, exact) < 1e-8
    report = solver.report.as_dict()
    assert report["converged"] and report["worst_relative_residual"] <= 1e-10
    assert report["systems"] == len(MASKS) and report["max_iterations"] >= 1


def _random_systems(rng, sizes, columns, dtype=torch.float64):
    systems = []
    for r in sizes:
        pts = torch.tensor(rng.normal(size=(r, 2)), dtype=dtype)
        systems.append(
            CMESystem(
                points=pts,
                gram=None,
                weights=torch.tensor(rng.integers(1, 5, r).astype(float), dtype=dtype),
                ridge=0.05 * r,
                rhs=torch.tensor(rng.normal(size=(r, columns)), dtype=dtype),
            )
        )
    return systems


def _dense(s: CMESystem) -> torch.Tensor:
    w = s.weights.sqrt()
    a = w[:, None] * kernel(s.points, s.points) * w[None, :]
    return a + s.ridge * torch.eye(len(w), dtype=a.dtype)


def test_cg_relative_residual_per_column_and_padding_of_unequal_systems():
    rng = np.random.default_rng(2)
    systems = _random_systems(rng, [30, 17, 44], 5)
    systems[1].rhs[:, 2] = 0.0  # a zero right-hand side: exactly zero, never NaN
    systems[2].rhs[:, 0] *= 1e6  # columns of very different scales: relative tolerance
    xs = CGSolver(tol=1e-9, preconditioner_rank=8).solve(systems)
    for s, x in zip(systems, xs, strict=True):
        assert x.shape == s.rhs.shape
        res = torch.linalg.vector_norm(_dense(s) @ x - s.rhs, dim=0)
        norm = torch.linalg.vector_norm(s.rhs, dim=0)
        assert bool((res <= 2e-9 * norm).all())
    assert bool((xs[1][:, 2] == 0).all())
    one_by_one = [CGSolver(tol=1e-9, preconditioner_rank=8).solve([s])[0] for s in systems]
    for a, b in zip(xs, one_by_one, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)


def test_cg_blocked_operator_equals_cached_grams():
    rng = np.random.default_rng(3)
    systems = _random_systems(rng, [40, 25], 3)
    cached = CGSolver(tol=1e-12).solve(systems)
    blocked = CGSolver(tol=1e-12, max_gram_bytes=0).solve(systems)
    for a, b in zip(cached, blocked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_cg_reports_and_warns_when_it_stops_short():
    rng = np.random.default_rng(4)
    systems = _random_systems(rng, [50], 4)
    solver = CGSolver(tol=1e-12, max_iter=1, preconditioner_rank=0)
    with pytest.warns(RuntimeWarning, match="CG stopped after 1 iterations"):
        solver.solve(systems)
    report = solver.report.as_dict()
    assert report["converged"] is False and report["worst_relative_residual"] > 1e-6


def test_cg_raises_on_non_finite_input_instead_of_zeroing():
    rng = np.random.default_rng(5)
    (system,) = _random_systems(rng, [10], 2)
    system.rhs[3, 1] = float("nan")
    with pytest.raises(CMEConvergenceError, match="non-finite"):
        CGSolver().solve([system])
    apply = lambda v: v  # noqa: E731
    b = torch.ones((1, 4, 2), dtype=torch.float64)
    b[0, 0, 0] = float("inf")
    with pytest.raises(SolverError, match="not finite"):
        batched_pcg(apply, b, tol=1e-8, max_iter=5)


def test_batched_pcg_warm_start_reaches_the_same_solution():
    rng = np.random.default_rng(6)
    m = rng.normal(size=(2, 20, 20))
    a = torch.tensor(m @ m.transpose(0, 2, 1) + 20 * np.eye(20))
    b = torch.tensor(rng.normal(size=(2, 20, 3)))
    exact = torch.linalg.solve(a, b)
    cold = batched_pcg(lambda v: a @ v, b, tol=1e-12, max_iter=100)
    warm = batched_pcg(lambda v: a @ v, b, tol=1e-12, max_iter=100, x0=exact + 1e-3)
    torch.testing.assert_close(cold.x, exact, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(warm.x, exact, rtol=1e-9, atol=1e-10)
    assert int(warm.iterations.max()) <= int(cold.iterations.max())


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    columns=st.integers(1, 4),
    rank=st.integers(0, 6),
)
def test_cg_property_any_small_batch_meets_its_tolerance(seed, sizes, columns, rank):
    rng = np.random.default_rng(seed)
    systems = _random_systems(rng, sizes, columns)
    xs = CGSolver(tol=1e-10, preconditioner_rank=rank).solve(systems)
    for s, x in zip(systems, xs, strict=True):
        torch.testing.assert_close(x, torch.linalg.solve(_dense(s), s.rhs), rtol=1e-7,
                                   atol=1e-9)  # fmt: skip


# -- Nyström -------------------------------------------------------------------------
@pytest.mark.parametrize("landmarks", ["rpcholesky", "uniform"])
@pytest.mark.parametrize("correction", ["diagonal", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nystrom_is_exact_when_every_class_is_a_landmark(landmarks, correction, weighted):
    pool, weights, centres, queries, ls, players = pool_problem(seed=7)
    weights = weights if weighted else None
    problem, queries = cme_problem(pool, weights, centres, queries, ls, players, 0.02)
    exact = gammas(CoalitionEmbedding(problem, Compute()), queries, MASKS)
    emb = NystromEmbedding(
        problem, Compute(), n_landmarks=10_000, landmarks=landmarks, correction=correction
    )
    assert max_rel(gammas(emb, queries, MASKS), exact) < 1e-10
    assert emb.report.exact_coalitions == len(MASKS)
    assert emb.report.worst_trace_ratio < 1e-10


def test_nystrom_error_is_measured_and_shrinks_with_landmarks():
    problem, queries = cme_problem(*pool_problem(seed=8, n=80, levels=7), 0.01)
    exact = gammas(CoalitionEmbedding(problem, Compute()), queries, MASKS)
    errors, bounds = [], []
    for m in (3, 12, 40):
        emb = NystromEmbedding(problem, Compute(), n_landmarks=m)
        errors.append(max_rel(gammas(emb, queries, MASKS), exact))
        bounds.append(emb.report.worst_trace_ratio)
    assert errors[0] > 1e-3  # an approximation that really approximates
    assert errors[2] < errors[1] < errors[0]
    assert bounds[2] < bounds[1] < bounds[0]


def test_nystrom_factor_is_a_lower_bound_of_the_kernel_and_seeded():
    rng = np.random.default_rng(9)
    pts = torch.tensor(rng.normal(size=(70, 3)))
    w = torch.tensor(rng.integers(1, 4, 70).astype(float))
    k = kernel(pts, pts)
    for method in ("rpcholesky", "uniform"):
        f = nystrom_factor(pts, w, 20, method=method, seed=3)
        again = nystrom_factor(pts, w, 20, method=method, seed=3)
        torch.testing.assert_close(f.factor, again.factor)
        assert f.factor.shape[1] <= 20
        # K - F F' is positive semi-definite: a Nyström approximation never overshoots.
        assert float(torch.linalg.eigvalsh(k - f.factor @ f.factor.T).min()) > -1e-8
    # Duplicated points: the pivoted factor stops at the number of distinct points.
    dup = torch.cat([pts[:5], pts[:5], pts[:5]])
    f = nystrom_factor(dup, torch.ones(15, dtype=torch.float64), 12)
    assert f.factor.shape[1] <= 5 and f.residual_trace < 1e-8


# -- explanations: all methods agree -------------------------------------------------
@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_explanations_agree_across_methods(kind):
    fn = random_preference_function(kind, n_items=40, n_centres=12, groups=GROUPS, seed=3,
                                    levels=5)  # fmt: skip
    rng = np.random.default_rng(0)
    left, right = rng.integers(0, 40, 15), rng.integers(0, 40, 15)
    exact = explain(fn, left, right, CholeskyOptions())
    assert exact.meta["cme"]["method"] == "cholesky"
    cg = explain(fn, left, right, CGOptions(tol=1e-11))
    np.testing.assert_allclose(cg.values, exact.values, atol=1e-8, rtol=0)
    assert cg.meta["cme"]["cg"]["converged"]
    ny = explain(fn, left, right, NystromOptions(n_landmarks=1000))
    np.testing.assert_allclose(ny.values, exact.values, atol=1e-10, rtol=0)
    rough = explain(fn, left, right, NystromOptions(n_landmarks=6))
    error = np.abs(rough.values - exact.values).max()
    assert 0 < error < np.abs(exact.values).max()  # approximate, but of the right size
    for e in (cg, ny, rough):  # efficiency holds whatever the CME
        np.testing.assert_allclose(e.base_values + e.values.sum(1), e.outputs, atol=1e-10)
    if kind == "cgpm":
        ctx = fn.contexts[rng.integers(0, len(fn.contexts), 15)]
        ce = explain(fn, left, right, CholeskyOptions(), contexts=ctx)
        for cme in (CGOptions(), NystromOptions()):
            other = explain(fn, left, right, cme, contexts=ctx)
            np.testing.assert_allclose(other.values, ce.values, atol=1e-8, rtol=0)


def test_float32_methods_agree_with_float64():
    fn = random_preference_function("gpm", n_items=40, groups=GROUPS, seed=4, levels=5)
    rng = np.random.default_rng(1)
    left, right = rng.integers(0, 40, 10), rng.integers(0, 40, 10)
    ref = explain(fn, left, right, CholeskyOptions()).values
    for cme in (CGOptions(), NystromOptions()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the float32 default tolerance is reachable
            got = explain(fn, left, right, cme, compute=Compute(dtype="float32"))
        np.testing.assert_allclose(got.values, ref, atol=1e-4)


# -- choosing the method -------------------------------------------------------------
def test_auto_choice_follows_sizes_and_device():
    # Pokémon-sized: exact Cholesky; the rows say so in meta.
    sizes = ProblemSizes(795, 25, 774, 1000, 254)
    assert choose_method(sizes, memory_bytes=16e9).method == "cholesky"
    # A large pool explained for a few queries: CG's products beat the factorisation.
    few = choose_method(ProblemSizes(12_000, 93, 3600, 8, 20), memory_bytes=16e9)
    assert few.method == "cg" and "fewer flops" in few.reason
    # Website-sized on a CPU: exact would take hours, Nyström is far cheaper.
    website = ProblemSizes(20_000, 93, 3625, 12_671, 64)
    web = choose_method(website, memory_bytes=16e9)
    assert web.method == "nystrom" and web.seconds["nystrom"] < web.seconds["cholesky"]
    # The same on a big GPU stays exact.
    gpu = choose_method(website, "cuda", "float32", memory_bytes=140e9)
    assert gpu.method == "cholesky"
    # Too big for a dense factor in memory, but cheap enough: CG (blockwise).
    big = choose_method(ProblemSizes(30_000, 9, 100, 4, 2), memory_bytes=4e9)
    assert big.method == "cg" and "memory" in big.reason


def test_backend_forcing_validation_and_explicit_solver():
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(30, 3))
    problem = CMEProblem(pool, None, pool[:10], np.ones(3), np.arange(3), 1e-2)
    compute = Compute()
    assert make_backend(AutoOptions(), problem, 5, 6, compute, 1 << 20).name == "cholesky"
    forced = make_backend(NystromOptions(n_landmarks=7), problem, 5, 6, compute, 1 << 20)
    forced.embedding(problem, compute, None)
    assert forced.report()["nystrom"]["n_landmarks"] == 7
    with pytest.raises(ValueError, match="must be one of"):
        cme_options("lu")
    # Options belong to their method: a Cholesky has no tolerance, Nyström no CG's.
    with pytest.raises(TypeError, match="tol"):
        cme_options("cholesky", tol=1e-3)
    with pytest.raises(TypeError, match="tol"):
        NystromOptions(tol=1e-3)
    with pytest.raises(ValueError, match="tol must be"):
        CGOptions(tol=2.0)
    with pytest.raises(ValueError, match="n_landmarks"):
        NystromOptions(n_landmarks=0)
    with pytest.raises(ValueError, match="cme must be"):
        ExplainOptions(cme="cg")
    solver = CholeskySolver()
    assert CoalitionEmbedding(problem, compute, solver=solver).solver is solver
    # auto ignores the options of the methods it did not pick
    auto = AutoOptions(cg=CGOptions(tol=1e-3))
    assert make_backend(auto, problem, 5, 6, compute, 1 << 20).name == "cholesky"


def test_cli_cme_method_option(tmp_path):
    fn = random_preference_function("gpm", n_items=25, groups=GROUPS, seed=5, levels=4)
    model = save_model(fn, tmp_path / "m.npz")
    rng = np.random.default_rng(2)
    ids = np.asarray(fn.item_ids)
    pd.DataFrame({"left": rng.choice(ids, 12), "right": rng.choice(ids, 12)}).to_csv(
        tmp_path / "d.csv", index=False
    )
    outs = {}
    for method in ("auto", "cholesky", "cg", "nystrom"):
        out = tmp_path / f"{method}.csv"
        assert main(["explain", "--model", str(model), "--duels", str(tmp_path / "d.csv"),
                     "--out", str(out), "--quiet", "--cme-method", method]) == 0  # fmt: skip
        outs[method] = pd.read_csv(out)
    players = list(fn.item_space.group_names)
    for method in ("auto", "cg", "nystrom"):
        np.testing.assert_allclose(
            outs[method][players].to_numpy(), outs["cholesky"][players].to_numpy(), atol=1e-8
        )
    with pytest.raises(SystemExit):
        main(["explain", "--model", str(model), "--duels", str(tmp_path / "d.csv"),
              "--out", str(tmp_path / "x.csv"), "--cme-method", "lu"])  # fmt: skip
