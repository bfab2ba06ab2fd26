"""FALKON for the squared loss: Nyström kernel ridge regression by preconditioned CG.

Minimises ``(1/n) ||K_nM a - y||^2 + penalty * a^T (K_MM + jitter I) a`` (falkon's
convention), whose normal equations are
``(K_nM^T K_nM / n + penalty (K_MM + jitter I)) a = K_nM^T y / n``. CG runs on
``A^-T T^-T (normal matrix) T^-1 A^-1 beta = A^-T T^-T K_nM^T y / n`` with
``a = T^-1 A^-1 beta`` (see :mod:`preconditioner`). The jitter (reported in the result;
about 1e-13 * M of K_MM's diagonal in float64) keeps the system well posed when K_MM is
numerically singular, as it is for most RBF centre sets of a few thousand.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from prefshap_core.kernels.operator import KernelOperator
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.cg import conjugate_gradient
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.preconditioner import FalkonPreconditioner
from prefshap_core.solvers.result import SolverError, SolveResult, check_finite


def as_targets(op: KernelOperator, y: np.ndarray | torch.Tensor) -> torch.Tensor:
    """``y`` as an (n,) tensor in the operator's dtype and device; finite or an error."""
    y_t = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
    y_t = y_t.to(device=op.device, dtype=op.dtype)
    if y_t.shape != (op.n_rows,):
        raise ValueError(f"y must have shape ({op.n_rows},), got {tuple(y_t.shape)}")
    if not bool(torch.isfinite(y_t).all()):
        raise SolverError("the targets contain NaN or infinity")
    return y_t


def as_alpha(op: KernelOperator, alpha: np.ndarray | torch.Tensor) -> torch.Tensor:
    a = torch.as_tensor(np.asarray(alpha) if not isinstance(alpha, torch.Tensor) else alpha)
    a = a.to(device=op.device, dtype=op.dtype)
    if a.shape != (op.n_centres,):
        raise ValueError(f"a warm start must have shape ({op.n_centres},)")
    check_finite(a, "the warm start")
    return a


def fit_squared(
    op: KernelOperator,
    y: np.ndarray | torch.Tensor,
    penalty: float,
    options: SolverOptions | None = None,
    progress: Progress | None = None,
    warm_start: np.ndarray | torch.Tensor | None = None,
) -> SolveResult:
    """Nyström KRR coefficients ``a`` (M,) by FALKON; see the module docstring."""
    start = time.perf_counter()
    options = options or SolverOptions()
    progress = ensure_progress(progress)
    if not penalty > 0:
        raise ValueError("penalty must be positive")
    y_t = as_targets(op, y)
    n = op.n_rows
    progress.update("Preconditioner", 0.0)
    pre = FalkonPreconditioner(op.centre_gram(), options.jitter_for(op.dtype))
    pre.set_penalty(penalty)
    normal_matvec = pre.normal_operator(lambda a: op.gram_mv(a) / n, penalty)
    rhs = pre.apply_t(op.tmm(y_t) / n)
    x0 = None if warm_start is None else pre.inverse(as_alpha(op, warm_start))
    max_it = options.max_cg_iterations
    cg = conjugate_gradient(
        normal_matvec,
        rhs,
        x0=x0,
        max_iterations=max_it,
        tolerance=options.cg_tolerance,
        on_iteration=lambda k: progress.update("Conjugate gradient", k / max_it),
    )
    alpha = pre.apply(cg.x)
    check_finite(alpha, "the solution")
    progress.update("Conjugate gradient", 1.0)
    return SolveResult(
        alpha=alpha,
        iterations=cg.iterations,
        residuals=cg.residuals,
        seconds=time.perf_counter() - start,
        converged=cg.converged,
        jitter=pre.jitter,
    )
