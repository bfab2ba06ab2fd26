"""Conjugate gradient for a symmetric positive (semi-)definite system ``H x = b``.

The FALKON preconditioner is folded into ``matvec`` by the caller (CG runs on the
preconditioned normal equations), so this is plain CG. The residual is updated
recursively, as in falkon's ``ConjugateGradient``; ``residuals`` are relative to
``||b||``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from prefshap_core.solvers.result import SolverError


@dataclass(frozen=True)
class CGResult:
    x: torch.Tensor
    iterations: int
    residuals: list[float]  # ||r_k|| / ||b|| after each iteration
    converged: bool


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    b: torch.Tensor,
    *,
    x0: torch.Tensor | None = None,
    max_iterations: int,
    tolerance: float,
    on_iteration: Callable[[int], None] | None = None,
) -> CGResult:
    """Solve ``matvec(x) = b`` (b: (M,)); ``on_iteration(k)`` after iteration k (may raise).

    A ``tolerance`` below ``10 * eps`` of the dtype is raised to it: past that point the
    recursive residual keeps falling while the iterate stops improving (in float32 it
    then loses conjugacy and can stop being a descent direction).
    """
    tolerance = max(tolerance, 10.0 * torch.finfo(b.dtype).eps)
    b_norm = float(torch.linalg.vector_norm(b))
    if b_norm != b_norm or b_norm == float("inf"):
        raise SolverError("the right-hand side of the CG system is not finite")
    if b_norm == 0.0:
        return CGResult(torch.zeros_like(b), 0, [0.0], True)
    if x0 is None:
        x = torch.zeros_like(b)
        r = b.clone()
    else:
        x = x0.clone()
        r = b - matvec(x)
    p = r.clone()
    rs_old = torch.dot(r, r)
    residuals: list[float] = []
    relative = float(rs_old.sqrt()) / b_norm
    if relative <= tolerance:
        return CGResult(x, 0, [relative], True)
    for k in range(1, max_iterations + 1):
        hp = matvec(p)
        curvature = torch.dot(p, hp)
        if not float(curvature) > 0.0:
            if float(curvature) != float(curvature):
                raise SolverError(f"CG iteration {k}: the system product became NaN")
            # Exactly zero curvature: p lies in the null space, nothing left to solve.
            break
        step = rs_old / curvature
        x.add_(p, alpha=float(step))
        r.sub_(hp, alpha=float(step))
        rs_new = torch.dot(r, r)
        relative = float(rs_new.sqrt()) / b_norm
        if relative != relative:
            raise SolverError(f"CG iteration {k}: the residual became NaN")
        residuals.append(relative)
        if on_iteration is not None:
            on_iteration(k)
        if relative <= tolerance:
            return CGResult(x, k, residuals, True)
        p.mul_(rs_new / rs_old).add_(r)
        rs_old = rs_new
    return CGResult(x, len(residuals), residuals or [relative], relative <= tolerance)
