"""Kernel logistic regression by LogisticFalkon's scheme (Marteau-Ferey, Bach, Rudi 2019;
Meanti et al. 2020): Newton steps along a decreasing penalty path, each solved
approximately by FALKON-preconditioned CG; on small cached problems exactly, from the
M x M Hessian (``DENSE_NEWTON_MAX_ELEMENTS``; docs/method.md, "Models").

At penalty ``lam`` the objective is

    J_lam(a) = (1/n) sum_i log(1 + exp(-y_i f_i)) + (lam / 2) a^T (K_MM + jitter I) a,

with ``f = K_nM a`` (falkon's convention: half the penalty of the squared loss's; the
jitter, about 1e-13 * M of K_MM's diagonal in float64, is reported in the result).

One Newton step per penalty, as LogisticFalkon: the first penalties are large, so each
step starts close to the next minimiser and a few CG iterations suffice. Then,
optionally, more Newton steps at the last penalty until the decrement is tiny. Beyond
falkon: a backtracking line search guards each step (its K_nM product is reused for
every trial length, and the predictions ``f`` are updated with it rather than
recomputed), and a CG direction that is not a descent direction (float32 asked for a
tolerance it cannot reach) is not taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import transposed
from prefshap_core.kernels.operator import KernelOperator
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.cg import conjugate_gradient
from prefshap_core.solvers.falkon import as_alpha, as_targets
from prefshap_core.solvers.gram import add_lower_gram
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.preconditioner import FalkonPreconditioner
from prefshap_core.solvers.result import NewtonStep, SolverError, SolveResult, check_finite

# Called after every Newton step; returning True ends the fit there (early stopping).
StepCallback = Callable[[int, float, torch.Tensor], bool | None]
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


def logistic_loss(y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Mean ``log(1 + exp(-y f))``, without overflow; a tie (``y = 0``) is two half duels.

    With ``p = (1 + y) / 2`` each row costs ``p log(1 + e^-f) + (1 - p) log(1 + e^f)``:
    for ``y = +-1`` that is ``log(1 + exp(-y f))``, for a tie half a win each way.
    """
    zero = torch.zeros_like(f)
    p = 0.5 * (1.0 + y)
    return (p * torch.logaddexp(zero, -f) + (1.0 - p) * torch.logaddexp(zero, f)).mean()


def logistic_objective(
    y: torch.Tensor, f: torch.Tensor, alpha: torch.Tensor, k_mm: torch.Tensor, penalty: float
) -> float:
    """``J_lam(alpha)`` given the predictions ``f = K_nM alpha`` (k_mm: K_MM + jitter I)."""
    return float(logistic_loss(y, f) + 0.5 * penalty * torch.dot(alpha, k_mm @ alpha))


def penalty_schedule(
    penalties: Sequence[float], cg_iterations: int | Sequence[int] | None, options: SolverOptions
) -> list[tuple[float, int]]:
    """The Newton steps ``(penalty, CG iterations)`` of a fit, checked, then
    ``options.refine_steps`` more at the last penalty (both solver backends run these)."""
    penalties = [float(p) for p in penalties]
    if not penalties or not all(p > 0 for p in penalties):
        raise ValueError("penalties must be a non-empty list of positive numbers")
    if cg_iterations is None:
        iterations = [options.max_cg_iterations] * len(penalties)
    elif isinstance(cg_iterations, int):
        iterations = [cg_iterations] * len(penalties)
    else:
        iterations = [int(i) for i in cg_iterations]
        if len(iterations) != len(penalties):
            raise ValueError("cg_iterations must have one entry per penalty")
    if min(iterations) < 1:
        raise ValueError("every Newton step needs at least one CG iteration")
    steps = list(zip(penalties, iterations, strict=True))
    return steps + [steps[-1]] * options.refine_steps


def fit_logistic(
    op: KernelOperator,
    y: np.ndarray | torch.Tensor,
    penalties: Sequence[float],
    options: SolverOptions | None = None,
    progress: Progress | None = None,
    callback: StepCallback | None = None,
    *,
    cg_iterations: int | Sequence[int] | None = None,
    warm_start: np.ndarray | torch.Tensor | None = None,
) -> SolveResult:
    """Minimise ``J_lam`` (module docstring) along ``penalties``; the answer is for the last.

    ``cg_iterations``: CG iterations per Newton step (one per penalty, or one for all;
    default ``options.max_cg_iterations``), stopping early at ``options.cg_tolerance``.
    ``callback(step, penalty, alpha)`` runs after every Newton step (0-based, refinement
    steps included) with a copy of ``alpha``, e.g. to score a validation set along the
    path; when it returns True the fit ends at that step (the result is that step's).
    ``warm_start``: an initial ``alpha``. ``y`` in {-1, 0, +1} (0: a tie).
    """
    start = time.perf_counter()
    options = options or SolverOptions()
    progress = ensure_progress(progress)
    schedule = penalty_schedule(penalties, cg_iterations, options)
    n_regular = len(penalties)
    y_t = as_targets(op, y)
    n = op.n_rows
    eps = torch.finfo(op.dtype).eps

    progress.update("Preconditioner", 0.0)
    pre = FalkonPreconditioner(op.centre_gram(), options.jitter_for(op.dtype))
    k_reg = pre.regularised_gram(op.centre_gram())
    if warm_start is None:
        alpha = torch.zeros(op.n_centres, dtype=op.dtype, device=op.device)
        f = torch.zeros(n, dtype=op.dtype, device=op.device)
    else:
        alpha = as_alpha(op, warm_start)
        f = op.mm(alpha)

    dense = _dense_system(op, pre.t_lower, len(schedule))
    steps: list[NewtonStep] = []
    residuals: list[float] = []
    total_iterations = 0
    converged = False
    previous_decrement = None
    for index, (penalty, max_it) in enumerate(schedule):
        stage = f"Newton step {index + 1}/{len(schedule)} (penalty {penalty:.2g})"
        progress.update(stage, index / len(schedule))
        # d loss / d f = sigma(f) - p with p = (1 + y) / 2 (= -y sigma(-y f) for y = +-1);
        # the curvature sigma(f) sigma(-f) does not depend on y, so ties (y = 0) fit too.
        left_probability = torch.sigmoid(f)
        curvature = left_probability * (1.0 - left_probability)
        k_alpha = k_reg @ alpha
        gradient = op.tmm(left_probability - 0.5 * (1.0 + y_t)) / n + penalty * k_alpha
        check_finite(gradient, f"the gradient at Newton step {index + 1}")

        delta = None
        if dense is not None:
            delta = _dense_newton_direction(dense, curvature / n, pre.t_lower, penalty, gradient)
            cg_steps, cg_residual = 0, 0.0
        if delta is None:
            weights = _centre_weights(op, curvature, options)
            pre.set_penalty(penalty, weights, None if weights is None else 1.0 / n)
            cg = conjugate_gradient(
                pre.normal_operator(lambda a, w=curvature / n: op.gram_mv(a, w), penalty),
                pre.apply_t(gradient),
                max_iterations=max_it,
                tolerance=_forcing(options, previous_decrement),
                on_iteration=lambda k, i=index, m=max_it, s=stage: progress.update(
                    s, (i + k / m) / len(schedule)
                ),
            )
            total_iterations += cg.iterations
            residuals.extend(cg.residuals)
            delta = pre.apply(cg.x)
            cg_steps, cg_residual = cg.iterations, cg.residuals[-1]
        decrement = float(torch.dot(gradient, delta)) / 2.0
        if decrement != decrement:
            raise SolverError(f"Newton step {index + 1}: the decrement is NaN")
        previous_decrement = decrement

        if decrement > 0.0:
            k_delta = op.mm(delta)
            length, objective = _step_length(
                y_t, f, k_delta, alpha, k_alpha, delta, k_reg, penalty, decrement, options, eps
            )
            if length > 0.0:
                alpha = alpha - length * delta
                f = f - length * k_delta
        else:  # not a descent direction: stay
            length, objective = 0.0, logistic_objective(y_t, f, alpha, k_reg, penalty)
        check_finite(alpha, f"the coefficients after Newton step {index + 1}")
        steps.append(NewtonStep(penalty, cg_steps, cg_residual, objective, length, decrement))
        if callback is not None and callback(index, penalty, alpha.clone()):
            break
        at_last_penalty = index >= n_regular - 1
        converged = at_last_penalty and decrement <= options.newton_tolerance
        if at_last_penalty and (converged or length == 0.0):
            break

    progress.update("Newton steps", 1.0)
    return SolveResult(
        alpha=alpha,
        iterations=total_iterations,
        residuals=residuals,
        seconds=time.perf_counter() - start,
        converged=converged,
        jitter=pre.jitter,
        steps=steps,
        centre_factor=pre.t_lower,
    )


def _forcing(options: SolverOptions, previous_decrement: float | None) -> float:
    """CG tolerance of a Newton step: loose while far from the minimiser (inexact Newton).

    ``sqrt`` of the previous step's decrement (its predicted objective gap), clipped to
    [cg_tolerance, 0.1], keeps Newton's fast local convergence (Eisenstat and Walker
    1996) without solving early systems to full precision.
    """
    if not options.inexact_newton:
        return options.cg_tolerance
    if previous_decrement is None:
        return max(options.cg_tolerance, 0.1)
    return max(options.cg_tolerance, min(0.1, max(previous_decrement, 0.0) ** 0.5))


# Small problems take exact Newton directions from the M x M Hessian: forming it
# costs 2 n M^2 flops in GEMMs at the machine's peak (0.3 GFLOP at 640 duels x 500
# centres, ~2 ms), while a preconditioned CG solve of the same system spends ~12 ms
# in memory-bound products and triangular solves (5-fold CV on 1,000 duels: 886
# Newton steps, 11.8 s -> 7.2 s of training). The limit keeps the holdout search's
# fits (2,400+ duels x 300-500 centres) on CG: up to 10,000 x 500 the Hessian was
# faster too, but its exact directions moved the search's choices (a noisy utility
# game chose a 1.7x worse g on one seed), and the inexact-Newton path is what those
# choices were tuned and measured on.
DENSE_NEWTON_MAX_CENTRES = 1024
DENSE_NEWTON_MAX_ELEMENTS = 200_000_000  # n * M^2: 0.4 GFLOP, ~2 ms here
_DENSE_BLOCK_ELEMENTS = 1 << 22  # rows of K_nM per Hessian update (32 MB in float64)
# Which of the two exact forms of the Newton system a dense fit solves (both give the
# same direction): "auto" (the cheaper), "centres" (M x M) or "duels" (n x n); tests
# force each.
DENSE_NEWTON_FORM = "auto"
# The largest relative rounding the n x n form may add to a direction (see
# _push_through_is_accurate); the M x M Hessian is solved where it would add more.
PUSH_THROUGH_MAX_ROUNDING = 1e-8


@dataclass(frozen=True)
class DenseNewtonSystem:
    """What a small cached fit's exact Newton directions are solved from.

    ``b = K_nM L^-T`` (``L L^T = K_MM + jitter I``): K_nM in the preconditioner's
    variable ``beta = L^T alpha``. ``row_gram``: the lower triangle of ``b b^T`` when
    the duels' form of the system is the cheaper (see :func:`_dense_newton_direction`);
    it does not depend on the curvatures, so it is formed once per fit. It stays small:
    that form needs n < ~1.7 M, and n M^2 <= ``DENSE_NEWTON_MAX_ELEMENTS``, so n < ~830
    (5.5 MB), within the training memory estimate's slack (``budget``).
    """

    b: torch.Tensor
    row_gram: torch.Tensor | None


def _dense_system(
    op: KernelOperator, t_lower: torch.Tensor, n_steps: int
) -> DenseNewtonSystem | None:
    """The fit's :class:`DenseNewtonSystem` (for up to ``n_steps`` Newton steps) when
    K_nM is cached in float64 and the Hessian is cheap to form; else None (CG)."""
    cache = getattr(op, "cache", None)
    if (
        cache is None
        or cache.dtype != torch.float64
        or op.dtype != torch.float64
        or op.n_centres > DENSE_NEWTON_MAX_CENTRES
        or op.n_rows * op.n_centres**2 > DENSE_NEWTON_MAX_ELEMENTS
        or op.n_rows * op.n_centres > _DENSE_BLOCK_ELEMENTS  # B's own memory: <= 32 MB
    ):
        return None
    b = transposed(torch.linalg.solve_triangular(t_lower, cache.T, upper=False))
    if not _duel_form_pays(op.n_rows, op.n_centres, n_steps):
        return DenseNewtonSystem(b, None)
    row_gram = torch.zeros((op.n_rows, op.n_rows), dtype=b.dtype, device=b.device)
    add_lower_gram(row_gram, b.T)
    return DenseNewtonSystem(b, row_gram)


def _duel_form_pays(n: int, m: int, n_steps: int) -> bool:
    """Whether the n x n systems cost fewer flops over a fit than the M x M ones: per
    step a Cholesky and two products against the Hessian's lower Gram and Cholesky,
    plus the lower ``B B^T`` once (5-fold CV on 1,000 duels, n = 720 duels, M = 500
    centres, 7 steps: 1.1 against 1.6 GFLOP; fewer than ~1.7 duels per centre)."""
    if DENSE_NEWTON_FORM != "auto":
        return DENSE_NEWTON_FORM == "duels"
    duels = n_steps * (n**3 / 3 + 4 * n * m) + n * n * m
    return duels < n_steps * (n * m * m + m**3 / 3)


def _push_through_is_accurate(
    dense: DenseNewtonSystem, weights: torch.Tensor, penalty: float
) -> bool:
    """Whether the push-through subtraction's rounding, at most eps trace(Y Y^T) / p
    relative (``trace = sum_i w_i (B B^T)_ii``, an O(n) bound on |Y|^2), is below
    ``PUSH_THROUGH_MAX_ROUNDING``. On the 800-duel sample's 5-fold CV it held for 824 of
    880 steps: at the smallest penalties (1e-6, 1e-7) the larger utility weights (a
    larger kernel diagonal) took the M x M form."""
    assert dense.row_gram is not None
    spread = float(weights @ dense.row_gram.diagonal()) / penalty
    return spread * torch.finfo(dense.b.dtype).eps <= PUSH_THROUGH_MAX_ROUNDING


def _dense_newton_direction(
    dense: DenseNewtonSystem,
    weights: torch.Tensor,
    t_lower: torch.Tensor,
    penalty: float,
    gradient: torch.Tensor,
) -> torch.Tensor | None:
    """The Newton direction ``H^-1 gradient``, ``H = K^T diag(weights) K + penalty L L^T``,
    or None when the system is not numerically positive definite (CG then takes the step).

    Solved in ``beta = L^T alpha``, where the system is ``Y^T Y + penalty I`` with
    ``Y = diag(weights)^1/2 B``, ``B = K_nM L^-T`` (:class:`DenseNewtonSystem`): the
    system CG solves, well conditioned however near-singular K_MM is (a sum kernel with
    a large utility weight). Where the duels are not many more than the centres
    (:func:`_duel_form_pays`), by the push-through identity
    ``(Y^T Y + p I)^-1 r = (r - Y^T (Y Y^T + p I)^-1 Y r) / p``, an n x n system whose
    ``Y Y^T`` is the fixed ``B B^T`` scaled, so no Hessian is formed. Both systems have
    eigenvalues in [p, p + |Y|^2]; the subtraction's rounding, ~eps |Y|^2 / p relative,
    is kept below ``PUSH_THROUGH_MAX_ROUNDING`` (else the M x M form is solved).
    """
    b = dense.b
    root_weights = weights.sqrt()  # curvatures: >= 0
    rhs = torch.linalg.solve_triangular(t_lower, gradient[:, None], upper=False)
    if dense.row_gram is not None and _push_through_is_accurate(dense, weights, penalty):
        system = dense.row_gram * root_weights[:, None]  # lower triangle is what counts
        system.mul_(root_weights[None, :])
        system.diagonal().add_(penalty)
        chol, info = torch.linalg.cholesky_ex(system)
        if int(info) != 0:
            return None
        v = torch.cholesky_solve(root_weights[:, None] * (b @ rhs), chol)
        beta = (rhs - b.T @ (root_weights[:, None] * v)) / penalty
    else:
        system = torch.zeros((b.shape[1], b.shape[1]), dtype=b.dtype, device=b.device)
        rows = max(1, _DENSE_BLOCK_ELEMENTS // b.shape[1])  # a bounded temporary
        for lo in range(0, b.shape[0], rows):
            # the lower triangle only (the Cholesky reads no more): 2.8 ms against a full
            # GEMM's 4.4 ms at 720 x 500 (solvers.gram)
            add_lower_gram(system, b[lo : lo + rows] * root_weights[lo : lo + rows, None])
        system.diagonal().add_(penalty)
        chol, info = torch.linalg.cholesky_ex(system)
        if int(info) != 0:
            return None
        beta = torch.cholesky_solve(rhs, chol)
    return torch.linalg.solve_triangular(t_lower.T, beta, upper=True)[:, 0]


def _centre_weights(
    op: KernelOperator, curvature: torch.Tensor, options: SolverOptions
) -> torch.Tensor | float | None:
    """The preconditioner's centre weights (see ``SolverOptions.preconditioner``).

    Centres that are not training rows have no label here: they get the mean curvature.
    """
    if options.preconditioner == "plain":
        return None
    if options.preconditioner == "curvature" and op.centre_positions is not None:
        return curvature[op.centre_positions]
    return float(curvature.mean())


def _step_length(
    y: torch.Tensor,
    f: torch.Tensor,
    k_delta: torch.Tensor,
    alpha: torch.Tensor,
    k_alpha: torch.Tensor,
    delta: torch.Tensor,
    k_mm: torch.Tensor,
    penalty: float,
    decrement: float,
    options: SolverOptions,
    eps: float,
) -> tuple[float, float]:
    """Backtracking (Armijo) on ``J(alpha - t delta)``; returns (t, objective there).

    The quadratic term is expanded so a trial costs O(n): no kernel products. A
    rounding slack lets a converged step through instead of halving it to nothing.
    """
    quad0 = float(torch.dot(alpha, k_alpha))
    quad1 = float(torch.dot(delta, k_alpha))
    quad2 = float(torch.dot(delta, k_mm @ delta))

    def objective(t: float) -> float:
        quad = quad0 - 2.0 * t * quad1 + t * t * quad2
        return float(logistic_loss(y, f - t * k_delta)) + 0.5 * penalty * quad

    current = objective(0.0)
    if current != current:
        raise SolverError("the logistic objective became NaN")
    slack = 64.0 * eps * max(1.0, abs(current))
    t = 1.0
    for _ in range(_MAX_HALVINGS):
        trial = objective(t)
        if not options.line_search or trial <= current - _ARMIJO * t * 2 * decrement + slack:
            return t, trial
        t *= 0.5
    return 0.0, current
