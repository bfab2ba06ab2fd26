"""FALKON solvers against dense exact solves of the same objectives, on small data."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.errors import CancelledError
from prefshap_core.kernels.operator import dense_operator
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.progress import Progress
from prefshap_core.solvers import logistic
from prefshap_core.solvers.cg import batched_pcg, conjugate_gradient
from prefshap_core.solvers.falkon import fit_squared
from prefshap_core.solvers.logistic import fit_logistic, logistic_objective
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.preconditioner import FalkonPreconditioner, triangular_gram
from prefshap_core.solvers.result import SolverError

N_ITEMS, N_DUELS = 40, 240
EXACT = SolverOptions(cg_tolerance=1e-14, max_cg_iterations=400)
EXACT_NEWTON = SolverOptions(
    cg_tolerance=1e-14, max_cg_iterations=400, refine_steps=30, newton_tolerance=1e-22
)
PENALTIES = [1e-1, 1e-2, 1e-3]


def duel_problem(kind: str, dtype: str = "float64", seed: int = 0):
    """Distinct unordered pairs (so K_MM is well conditioned) and a planted preference."""
    rng = np.random.default_rng(seed)
    items = rng.normal(size=(N_ITEMS, 3))
    pairs = np.array(np.triu_indices(N_ITEMS, 1)).T[
        rng.choice(N_ITEMS * (N_ITEMS - 1) // 2, N_DUELS, replace=False)
    ]
    flip = rng.random(N_DUELS) < 0.5
    left, right = np.where(flip, pairs[:, 1], pairs[:, 0]), np.where(flip, pairs[:, 0], pairs[:, 1])
    contexts = rng.normal(size=(4, 2))
    context = rng.integers(0, 4, N_DUELS)
    margin = items[left, 0] - items[right, 0] + 0.5 * contexts[context, 0] * items[left, 1]
    y = np.where(margin + 0.5 * rng.normal(size=N_DUELS) > 0, 1.0, -1.0)
    kernel = PairKernel(
        kind, items, np.full(3, 1.5), contexts, np.ones(2), compute=Compute("cpu", dtype)
    )
    return kernel, DuelIndex.from_arrays(left, right, context), y


def dense_parts(op):
    k_nm = op.mm(torch.eye(op.n_centres, dtype=op.dtype))
    return k_nm, op.centre_gram()


def with_jitter(k_mm: torch.Tensor, jitter: float) -> torch.Tensor:
    """K_MM + jitter I: what the solvers' penalty uses (jitter ~1e-13 M in float64)."""
    return k_mm + jitter * torch.eye(k_mm.shape[0], dtype=k_mm.dtype)


def nystrom_krr(k_nm, k_mm, y, penalty):
    """a = (K_nM^T K_nM + lam n K_MM)^-1 K_nM^T y, the closed form."""
    n = k_nm.shape[0]
    return torch.linalg.solve(k_nm.T @ k_nm + penalty * n * k_mm, k_nm.T @ y)


def dense_logistic_newton(k_nm, k_mm, y, penalty, steps: int = 100):
    """argmin (1/n) sum log(1 + exp(-y K a)) + (lam/2) a^T K_MM a by damped dense Newton."""
    n = k_nm.shape[0]
    a = torch.zeros(k_nm.shape[1], dtype=k_nm.dtype)

    def objective(a):
        return float(
            torch.logaddexp(torch.zeros(n, dtype=a.dtype), -y * (k_nm @ a)).mean()
            + 0.5 * penalty * a @ k_mm @ a
        )

    for _ in range(steps):
        s = torch.sigmoid(-y * (k_nm @ a))
        grad = k_nm.T @ (-y * s) / n + penalty * k_mm @ a
        hess = k_nm.T @ ((s * (1 - s))[:, None] * k_nm) / n + penalty * k_mm
        step = torch.linalg.solve(hess, grad)
        t = 1.0
        while objective(a - t * step) > objective(a) + 1e-15 and t > 1e-8:
            t /= 2
        a = a - t * step
        if float(step.norm()) < 1e-15 * (1 + float(a.norm())):
            break
    return a, objective


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


# -- squared loss -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "n_centres"),
    [("gpm", N_DUELS), ("gpm", 60), ("cgpm", 60), ("upm", 20)],
)
def test_squared_matches_dense_nystrom_krr(kind, n_centres):
    kernel, rows, y = duel_problem(kind)
    centres = np.linspace(0, N_DUELS - 1, n_centres).astype(np.int64)
    op = kernel.operator(rows, centres)
    k_nm, k_mm = dense_parts(op)
    for penalty in (1e-2, 1e-4):
        result = fit_squared(op, y, penalty, EXACT)
        assert 0 < result.jitter < 1e-10
        # The bare closed form (no jitter) too: the jitter is negligible in float64.
        bare = nystrom_krr(k_nm, k_mm, torch.as_tensor(y), penalty)
        assert rel(result.alpha, bare) < 1e-7
        expected = nystrom_krr(k_nm, with_jitter(k_mm, result.jitter), torch.as_tensor(y), penalty)
        assert result.converged
        assert result.final_residual <= EXACT.cg_tolerance * 10
        assert rel(result.alpha, expected) < 1e-8


def test_warm_start_from_the_answer_needs_no_iterations():
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    cold = fit_squared(op, y, 1e-3, EXACT)
    warm = fit_squared(op, y, 1e-3, SolverOptions(cg_tolerance=1e-6), warm_start=cold.alpha)
    assert cold.iterations > 5
    assert warm.iterations <= 1
    assert rel(warm.alpha, cold.alpha) < 1e-6


def test_singular_centre_gram_gets_more_jitter_and_the_same_predictions():
    kernel, rows, y = duel_problem("gpm")
    centres = np.r_[np.arange(0, 60, 3), [0, 3]]  # duplicated centres: K_MM singular
    op = kernel.operator(rows, centres)
    k_nm, k_mm = dense_parts(op)
    result = fit_squared(op, y, 1e-3, SolverOptions(cg_tolerance=1e-12, jitter=0.0))
    assert result.converged
    assert result.jitter > 0.0
    expected = nystrom_krr(k_nm, with_jitter(k_mm, result.jitter), torch.as_tensor(y), 1e-3)
    assert rel(k_nm @ result.alpha, k_nm @ expected) < 1e-6


# -- logistic loss ----------------------------------------------------------------
@pytest.fixture(params=["dense", "dense-duels", "cg"])
def newton_directions(request, monkeypatch) -> str:
    """Every way a Newton direction is found: exactly on small cached problems, from the
    M x M Hessian (the default here: n = 4 M) or the n x n duels' form (forced), or by
    preconditioned CG (everything else; forced by the limit 0)."""
    if request.param == "cg":
        monkeypatch.setattr(logistic, "DENSE_NEWTON_MAX_CENTRES", 0)
    if request.param == "dense-duels":
        monkeypatch.setattr(logistic, "DENSE_NEWTON_FORM", "duels")
    return request.param


@pytest.mark.parametrize("kind", ["gpm", "cgpm", "upm"])
def test_logistic_matches_dense_newton_at_the_last_penalty(kind, newton_directions):
    kernel, rows, y = duel_problem(kind)
    centres = np.arange(0, N_DUELS, 12 if kind == "upm" else 4)
    op = kernel.operator(rows, centres)
    k_nm, k_mm = dense_parts(op)
    y_t = torch.as_tensor(y)
    result = fit_logistic(op, y, PENALTIES, EXACT_NEWTON, cg_iterations=[3, 5, 50])
    k_reg = with_jitter(k_mm, result.jitter)
    expected, objective = dense_logistic_newton(k_nm, k_reg, y_t, PENALTIES[-1])
    # The reference is a minimiser: nudging it in any direction costs.
    rng = np.random.default_rng(1)
    for _ in range(5):
        nudge = torch.as_tensor(rng.normal(size=len(centres))) * 1e-3 * float(expected.norm())
        assert objective(expected + nudge) > objective(expected)

    assert result.converged
    assert rel(result.alpha, expected) < 1e-6
    final = logistic_objective(y_t, k_nm @ result.alpha, result.alpha, k_reg, PENALTIES[-1])
    assert final == pytest.approx(objective(expected), rel=1e-12)


def test_small_cached_problems_take_hessian_directions_and_large_ones_cg(monkeypatch):
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    assert op.cached
    dense = fit_logistic(op, y, PENALTIES, EXACT_NEWTON)
    assert dense.iterations == 0 and all(s.cg_iterations == 0 for s in dense.steps)
    monkeypatch.setattr(logistic, "DENSE_NEWTON_MAX_ELEMENTS", op.n_rows * op.n_centres**2 - 1)
    cg = fit_logistic(op, y, PENALTIES, EXACT_NEWTON)
    assert cg.iterations > 0
    # The same minimiser: the two agree to the CG tolerance, not bitwise.
    assert dense.converged and cg.converged
    assert rel(dense.alpha, cg.alpha) < 1e-6
    assert rel(op.mm(dense.alpha), op.mm(cg.alpha)) < 1e-9


def test_the_duels_form_gives_the_hessians_direction(monkeypatch):
    """The n x n form (push-through identity) against the M x M Hessian's direction,
    at curvatures from 0 to 1/4 and penalties down to the search's smallest; and the
    cost rule takes it at 1.6 duels per centre and 7 Newton steps."""
    kernel, rows, _ = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(150))  # n = 240 duels, M = 150 centres
    pre = FalkonPreconditioner(op.centre_gram(), SolverOptions().jitter_for(op.dtype))
    by_centres = logistic._dense_system(op, pre.t_lower, n_steps=7)
    assert by_centres is not None and by_centres.row_gram is not None  # auto: n = 1.6 M
    monkeypatch.setattr(logistic, "DENSE_NEWTON_FORM", "centres")
    by_hessian = logistic._dense_system(op, pre.t_lower, n_steps=7)
    assert by_hessian is not None and by_hessian.row_gram is None
    k_nm, k_mm = dense_parts(op)
    rng = np.random.default_rng(3)
    for penalty in (1e-1, 1e-4, 1e-7):
        curvature = torch.as_tensor(rng.uniform(0.0, 0.25, op.n_rows)) / op.n_rows
        curvature[:10] = 0.0  # p = 0 or 1 exactly
        gradient = torch.as_tensor(rng.normal(size=op.n_centres))
        args = (curvature, pre.t_lower, penalty, gradient)
        assert logistic._push_through_is_accurate(by_centres, curvature, penalty)
        duels = logistic._dense_newton_direction(by_centres, *args)
        centres = logistic._dense_newton_direction(by_hessian, *args)
        assert duels is not None and centres is not None
        assert rel(duels, centres) < 1e-8
        # and both solve H delta = gradient, H = K^T C K + penalty (K_MM + jitter I)
        hessian = k_nm.T @ (curvature[:, None] * k_nm) + penalty * with_jitter(k_mm, pre.jitter)
        assert rel(hessian @ duels, gradient) < 1e-6
    # Where the subtraction could cost more than PUSH_THROUGH_MAX_ROUNDING, the step is
    # the Hessian's, the same floats.
    tiny = 1e-13
    assert not logistic._push_through_is_accurate(by_centres, curvature, tiny)
    args = (curvature, pre.t_lower, tiny, gradient)
    fallback = logistic._dense_newton_direction(by_centres, *args)
    assert torch.equal(fallback, logistic._dense_newton_direction(by_hessian, *args))


def test_float32_and_uncached_operators_solve_by_cg():
    kernel, rows, y = duel_problem("gpm", dtype="float32")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    assert fit_logistic(op, y, PENALTIES).iterations > 0
    kernel, rows, y = duel_problem("gpm")
    chunked = kernel.operator(rows, np.arange(0, N_DUELS, 4), cache_budget_bytes=0)
    assert getattr(chunked, "cache", None) is None  # (here: products through item matrices)
    assert fit_logistic(chunked, y, PENALTIES).iterations > 0


def test_logistic_steps_never_increase_their_objective(newton_directions):
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    k_nm, k_mm = dense_parts(op)
    y_t = torch.as_tensor(y)
    seen = []
    result = fit_logistic(
        op,
        y,
        [1.0, 1e-2, 1e-4],
        SolverOptions(refine_steps=3),
        cg_iterations=4,
        callback=lambda step, penalty, alpha: seen.append((step, penalty, alpha)),
    )
    assert [s for s, _, _ in seen] == list(range(len(result.steps)))
    k_mm = with_jitter(k_mm, result.jitter)
    assert torch.equal(seen[-1][2], result.alpha)
    before = torch.zeros(op.n_centres, dtype=torch.float64)
    for (_, penalty, alpha), step in zip(seen, result.steps, strict=True):
        j_before = logistic_objective(y_t, k_nm @ before, before, k_mm, penalty)
        j_after = logistic_objective(y_t, k_nm @ alpha, alpha, k_mm, penalty)
        assert j_after < j_before
        assert j_after == pytest.approx(step.objective, rel=1e-10)
        before = alpha
    assert result.steps[-1].objective < np.log(2.0)


def test_logistic_float32_is_close_to_float64():
    """The same objective (the same jitter set for both), so only precision differs."""
    options = SolverOptions(cg_tolerance=1e-14, max_cg_iterations=400, refine_steps=30, jitter=1e-5)
    answers = {}
    for dtype in ("float64", "float32"):
        kernel, rows, y = duel_problem("gpm", dtype)
        op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
        result = fit_logistic(op, y, PENALTIES, options, cg_iterations=[3, 5, 50])
        assert result.alpha.dtype == getattr(torch, dtype)
        assert result.steps[-1].decrement < 1e-9
        answers[dtype] = op.mm(result.alpha).double()
    assert rel(answers["float32"], answers["float64"]) < 1e-4


@pytest.mark.parametrize("preconditioner", ["curvature", "plain"])
def test_every_preconditioner_reaches_the_same_answer(preconditioner):
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    reference = fit_logistic(op, y, PENALTIES, EXACT_NEWTON)
    options = SolverOptions(
        cg_tolerance=1e-14,
        max_cg_iterations=400,
        refine_steps=30,
        newton_tolerance=1e-22,
        preconditioner=preconditioner,
    )
    other = fit_logistic(op, y, PENALTIES, options)
    assert other.converged
    assert rel(other.alpha, reference.alpha) < 1e-8


def test_centres_given_as_duels_use_mean_weights_and_reach_the_same_answer():
    """Curvature weights need the centres' rows; centres given as duels fall back to mean."""
    kernel, rows, y = duel_problem("gpm")
    positions = np.arange(0, N_DUELS, 4)
    curvature = dataclasses.replace(EXACT_NEWTON, preconditioner="curvature")
    by_position = fit_logistic(kernel.operator(rows, positions), y, PENALTIES, curvature)
    op = kernel.operator(rows, rows.subset(positions))
    assert op.centre_positions is None
    by_index = fit_logistic(op, y, PENALTIES, curvature)
    assert rel(by_index.alpha, by_position.alpha) < 1e-6


# -- determinism, progress, errors -------------------------------------------------
def test_two_runs_give_identical_alpha():
    kernel, rows, y = duel_problem("cgpm")
    centres = np.arange(0, N_DUELS, 5)
    runs = [
        (
            fit_squared(kernel.operator(rows, centres), y, 1e-3).alpha,
            fit_logistic(kernel.operator(rows, centres), y, PENALTIES, cg_iterations=5).alpha,
        )
        for _ in range(2)
    ]
    assert torch.equal(runs[0][0], runs[1][0])
    assert torch.equal(runs[0][1], runs[1][1])


def test_progress_is_reported_in_order_and_cancel_propagates():
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    fractions = []
    fit_logistic(op, y, PENALTIES, progress=Progress(lambda u: fractions.append(u.fraction)))
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    with pytest.raises(CancelledError):
        fit_squared(op, y, 1e-3, progress=Progress(should_cancel=lambda: True))


def test_non_finite_inputs_raise_instead_of_being_patched():
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    y_nan = y.copy()
    y_nan[3] = np.nan
    with pytest.raises(SolverError, match="NaN"):
        fit_squared(op, y_nan, 1e-3)
    with pytest.raises(SolverError, match="NaN"):
        fit_logistic(op, y_nan, PENALTIES)
    items = kernel.items.clone()
    items[0, 0] = float("nan")
    nan_kernel = PairKernel("gpm", items, kernel.lengthscales)
    centres_with_item_0 = np.flatnonzero((rows.left == 0) | (rows.right == 0)).tolist()
    op_nan = nan_kernel.operator(rows, [*centres_with_item_0, 1, 2])
    with pytest.raises(SolverError, match="NaN"):
        fit_squared(op_nan, y, 1e-3)
    with pytest.raises(ValueError, match="penalt"):
        fit_logistic(op, y, [1e-2, -1.0])


# -- building blocks ----------------------------------------------------------------
def test_conjugate_gradient_solves_an_spd_system():
    rng = np.random.default_rng(2)
    q = torch.as_tensor(rng.normal(size=(30, 30)))
    h = q @ q.T + 0.1 * torch.eye(30, dtype=torch.float64)
    b = torch.as_tensor(rng.normal(size=30))
    result = conjugate_gradient(lambda v: h @ v, b, max_iterations=200, tolerance=1e-13)
    assert result.converged
    assert result.iterations <= 2 * 30  # n in exact arithmetic; a little slack for rounding
    assert result.residuals[-1] <= 1e-13
    assert rel(result.x, torch.linalg.solve(h, b)) < 1e-10


def test_conjugate_gradient_follows_the_batched_rules_for_one_vector():
    """The lean one-vector loop against batched_pcg on one column: the same solution,
    iteration count within rounding, and the same answers at the edges."""
    rng = np.random.default_rng(5)
    q = torch.as_tensor(rng.normal(size=(40, 40)))
    h = q @ q.T / 40 + 0.05 * torch.eye(40, dtype=torch.float64)
    b = torch.as_tensor(rng.normal(size=40))
    lean = conjugate_gradient(lambda v: h @ v, b, max_iterations=500, tolerance=1e-10)
    batched = batched_pcg(lambda v: h @ v, b[None, :, None], tol=1e-10, max_iter=500)
    assert lean.converged and lean.residuals[-1] <= 1e-10
    assert len(lean.residuals) == lean.iterations
    assert abs(lean.iterations - int(batched.iterations.max())) <= 2
    assert rel(lean.x, batched.x[0, :, 0]) < 1e-9
    # The recursive residual is the true one up to rounding.
    true_residual = float(torch.linalg.vector_norm(b - h @ lean.x) / torch.linalg.vector_norm(b))
    assert true_residual < 1e-9
    # A warm start at the solution: nothing to do, the start returned as it is.
    warm = conjugate_gradient(lambda v: h @ v, b, x0=lean.x, max_iterations=5, tolerance=1e-6)
    assert warm.iterations == 0 and warm.converged and torch.equal(warm.x, lean.x)
    # A cap on the iterations: not converged, the residual after each one recorded.
    capped = conjugate_gradient(lambda v: h @ v, b, max_iterations=3, tolerance=1e-12)
    assert capped.iterations == 3 and len(capped.residuals) == 3 and not capped.converged
    # A zero right-hand side: zero, at once.
    zero = conjugate_gradient(lambda v: h @ v, torch.zeros(40, dtype=torch.float64),
                              max_iterations=5, tolerance=1e-8)  # fmt: skip
    assert zero.iterations == 0 and not bool(zero.x.any())


def test_conjugate_gradient_stops_on_a_null_direction_and_raises_on_non_finite():
    # A right-hand side in the null space of a PSD system: the first direction has
    # zero curvature, so nothing moves and the loop ends (unconverged), as batched_pcg.
    h = torch.diag(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64))
    b = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    result = conjugate_gradient(lambda v: h @ v, b, max_iterations=50, tolerance=1e-12)
    batched = batched_pcg(lambda v: h @ v, b[None, :, None], tol=1e-12, max_iter=50)
    assert result.iterations == 0 and not result.converged and not bool(result.x.any())
    assert int(batched.iterations.max()) == 0 and not bool(batched.x.any())
    with pytest.raises(SolverError, match="non-finite"):
        conjugate_gradient(lambda v: v * float("nan"), b, max_iterations=5, tolerance=1e-8)
    with pytest.raises(SolverError, match="not finite"):
        conjugate_gradient(lambda v: h @ v, b * float("inf"), max_iterations=5, tolerance=1e-8)


def test_triangular_gram_equals_the_full_product():
    rng = np.random.default_rng(4)
    lower = torch.tril(torch.as_tensor(rng.normal(size=(300, 300))))
    w = torch.as_tensor(rng.uniform(0, 1, 300))
    expected = lower.T @ torch.diag(w) @ lower
    torch.testing.assert_close(triangular_gram(lower, w, block=64), expected, rtol=0, atol=1e-11)
    torch.testing.assert_close(triangular_gram(lower), lower.T @ lower, rtol=0, atol=1e-11)


@pytest.mark.parametrize("weighted", [False, True])
def test_preconditioner_whitens_its_own_approximation(weighted):
    """With K_MM = T^T T: B^T (s K_MM W K_MM + lam K_MM) B = I, B = T^-1 A^-1."""
    kernel, rows, _ = duel_problem("gpm")
    k_mm = kernel.centre_gram(rows.subset(np.arange(0, 60, 3)))
    m = k_mm.shape[0]
    rng = np.random.default_rng(3)
    w = torch.as_tensor(rng.uniform(0.05, 0.25, m)) if weighted else torch.ones(m, dtype=k_mm.dtype)
    pre = FalkonPreconditioner(k_mm, jitter=0.0)
    assert pre.jitter == 0.0
    scale, penalty = 0.37, 1e-3
    pre.set_penalty(penalty, w if weighted else None, scale)
    eye = torch.eye(m, dtype=k_mm.dtype)
    b = pre.apply(eye)
    torch.testing.assert_close(pre.apply_t(eye), b.T, rtol=0, atol=1e-9)
    whitened = b.T @ (scale * k_mm @ torch.diag(w) @ k_mm + penalty * k_mm) @ b
    torch.testing.assert_close(whitened, eye, rtol=0, atol=1e-6)
    beta = torch.as_tensor(rng.normal(size=m))
    torch.testing.assert_close(pre.inverse(pre.apply(beta)), beta, rtol=0, atol=1e-8)


def test_dense_operator_matches_pair_operator_fit():
    kernel, rows, y = duel_problem("gpm")
    centres = np.arange(0, N_DUELS, 4)
    op = kernel.operator(rows, centres)
    k_nm, _ = dense_parts(op)
    dense = dense_operator(k_nm, torch.as_tensor(centres))
    a = fit_squared(op, y, 1e-3, EXACT).alpha
    b = fit_squared(dense, y, 1e-3, EXACT).alpha
    assert rel(a, b) < 1e-10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_fit_matches_cpu():
    answers = []
    for device in ("cpu", "cuda"):
        kernel, rows, y = duel_problem("cgpm")
        kernel = PairKernel(
            "cgpm",
            kernel.items.cpu(),
            kernel.lengthscales.cpu(),
            kernel.contexts.cpu(),
            kernel.context_lengthscales.cpu(),
            compute=Compute(device, "float64"),
        )
        op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
        answers.append(fit_logistic(op, y, PENALTIES, EXACT_NEWTON).alpha.cpu())
    assert rel(answers[1], answers[0]) < 1e-8


# -- optional falkon backend -------------------------------------------------------
def test_falkon_backend_without_falkon_says_so(monkeypatch):
    from prefshap_core.solvers import falkon_backend

    monkeypatch.setitem(sys.modules, "falkon", None)  # import falkon -> ImportError
    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    with pytest.raises(falkon_backend.BackendUnavailableError, match="not installed"):
        falkon_backend.fit_squared(op, y, 1e-3)


def test_falkon_backend_duel_encoding_round_trips():
    from prefshap_core.solvers.falkon_backend import decode_duels, encode_duels

    _, rows, _ = duel_problem("cgpm")
    back = decode_duels(encode_duels(rows.left, rows.right, rows.context, torch.float32), True)
    assert torch.equal(back.left, rows.left) and torch.equal(back.right, rows.right)
    assert torch.equal(back.context, rows.context)


def test_falkon_backend_matches_our_solver():
    pytest.importorskip("falkon")
    from prefshap_core.solvers import falkon_backend

    kernel, rows, y = duel_problem("gpm")
    op = kernel.operator(rows, np.arange(0, N_DUELS, 4))
    ours = fit_squared(op, y, 1e-3, EXACT)
    theirs = falkon_backend.fit_squared(op, y, 1e-3, SolverOptions(cg_tolerance=1e-12))
    assert rel(op.mm(theirs.alpha), op.mm(ours.alpha)) < 1e-4
