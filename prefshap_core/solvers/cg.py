"""The engine's conjugate gradients: batched and preconditioned, or one plain vector.

``batched_pcg`` solves ``A X = B`` for ``(batch, rows, columns)`` right-hand sides
with a preconditioner ``P^-1``: every step is one batched product, each column has
its own step sizes and a *relative* stopping rule ``|b_j - A x_j| <= tol |b_j|``,
converged columns stop moving (and leave the working set once half are done), and
zero right-hand sides give zero solutions exactly. The CME solves of the explainer
(:mod:`prefshap_core.explain.cme.cg`) call it with a Nyström preconditioner;
the FALKON solvers call :func:`conjugate_gradient`, the same rules for one vector
in a lean loop, with the preconditioner folded into ``matvec`` (CG on the
preconditioned normal equations). Both update the residual recursively, as in
falkon's ``ConjugateGradient``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from prefshap_core.solvers.result import SolverError

Operator = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class PCGResult:
    x: torch.Tensor  # (b, r, c)
    iterations: torch.Tensor  # (b, c) iterations each column took
    worst_residuals: list[float]  # after each iteration: the largest relative residual


def _identity(v: torch.Tensor) -> torch.Tensor:
    return v


def batched_pcg(
    apply_a: Operator,
    b: torch.Tensor,
    *,
    tol: float,
    max_iter: int,
    apply_p: Operator = _identity,
    x0: torch.Tensor | None = None,
    on_iteration: Callable[[int], None] | None = None,
) -> PCGResult:
    """Preconditioned CG on ``(batch, rows, columns)`` right-hand sides, per column.

    ``apply_a`` / ``apply_p`` map ``(batch, rows, k)`` to the same shape (``A`` and
    ``P^-1``) for any ``k``, so the working set can shrink. A column stops when its
    recursive residual is below ``tol`` times its right-hand side's norm, or when its
    search direction has zero curvature (it lies in the null space: nothing is left
    to solve). ``on_iteration(k)`` runs after iteration ``k`` (it may raise to stop).
    Non-finite numbers raise :class:`SolverError`; they are never zeroed.
    """
    if not bool(torch.isfinite(b).all()):
        raise SolverError("the right-hand side of the CG system is not finite")
    b_norm = torch.linalg.vector_norm(b, dim=1)  # (batch, c)
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    iterations = torch.zeros(b_norm.shape, dtype=torch.long, device=b.device)
    cols = torch.arange(b.shape[2], device=b.device)  # the working set's columns
    r = b - apply_a(x) if x0 is not None else b.clone()
    bn = b_norm
    z = apply_p(r)
    p = z.clone()
    rz = (r * z).sum(1)
    r_norm = torch.linalg.vector_norm(r, dim=1)
    active = r_norm > tol * bn
    xw = x
    worst: list[float] = []
    for k in range(1, max_iter + 1):
        if not bool(active.any()):
            break
        if int(active.any(0).sum()) * 2 <= len(cols):
            # Drop columns no system still needs: later products are narrower.
            x[:, :, cols] = xw
            keep = active.any(0)
            cols, xw, r, p, rz, bn, active = (
                cols[keep],
                xw[:, :, keep],
                r[:, :, keep],
                p[:, :, keep],
                rz[:, keep],
                bn[:, keep],
                active[:, keep],
            )
        ap = apply_a(p)
        pap = (p * ap).sum(1)
        if not bool(torch.isfinite(pap).all()):
            raise SolverError(f"CG iteration {k}: the system product became non-finite")
        active = active & (pap > 0)
        alpha = torch.where(active, rz / torch.where(active, pap, 1.0), 0.0)
        xw = xw + alpha[:, None, :] * p
        r = r - alpha[:, None, :] * ap
        r_norm = torch.linalg.vector_norm(r, dim=1)
        if not bool(torch.isfinite(r_norm).all()):
            raise SolverError(
                f"CG iteration {k}: non-finite residuals (the system or its "
                "preconditioner is broken: non-finite kernel values, or a ridge of 0)"
            )
        iterations[:, cols] += active.long()
        rel = torch.where(bn > 0, r_norm / torch.where(bn > 0, bn, 1.0), 0.0)
        worst.append(float(rel.max()) if rel.numel() else 0.0)
        active = active & (r_norm > tol * bn)
        if on_iteration is not None:
            on_iteration(k)
        z = apply_p(r)
        rz_new = (r * z).sum(1)
        beta = torch.where(active, rz_new / torch.where(active, rz, 1.0), 0.0)
        p = z + beta[:, None, :] * p
        rz = rz_new
    x[:, :, cols] = xw
    return PCGResult(x, iterations, worst)


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
    """Solve ``matvec(x) = b`` for one vector ``b`` (M,): plain CG, the rules of
    :func:`batched_pcg` for one column (relative stop, zero curvature ends it,
    non-finite numbers raise).

    Its own loop, not ``batched_pcg`` on a (1, M, 1) batch: the FALKON fits run
    thousands of iterations on products of a millisecond or less, where the batched
    bookkeeping (masks, per-column steps, ~20 small tensor ops) cost ~0.3 ms per
    iteration; here it is five vector operations and one reduction each.

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
    x = b.new_zeros(b.shape) if x0 is None else x0.clone()
    r = b.clone() if x0 is None else b - matvec(x0)
    rr = float(torch.dot(r, r))
    if not math.isfinite(rr):
        raise SolverError("CG: the starting residual is not finite")
    initial = math.sqrt(rr) / b_norm
    if initial <= tolerance:
        return CGResult(x, 0, [initial], True)
    residuals: list[float] = []  # after each iteration, as batched_pcg's worst_residuals
    p = r.clone()
    iterations = 0
    for k in range(1, max_iterations + 1):
        ap = matvec(p)
        pap = float(torch.dot(p, ap))
        if not math.isfinite(pap):
            raise SolverError(f"CG iteration {k}: the system product became non-finite")
        if pap <= 0.0:  # p lies in the null space: nothing is left to solve
            break
        step = rr / pap
        x.add_(p, alpha=step)
        r.sub_(ap, alpha=step)
        rr_new = float(torch.dot(r, r))
        if not math.isfinite(rr_new):
            raise SolverError(
                f"CG iteration {k}: non-finite residuals (the system or its "
                "preconditioner is broken: non-finite kernel values, or a ridge of 0)"
            )
        iterations = k
        residuals.append(math.sqrt(rr_new) / b_norm)
        if on_iteration is not None:
            on_iteration(k)
        if residuals[-1] <= tolerance:
            break
        p.mul_(rr_new / rr).add_(r)
        rr = rr_new
    residuals = residuals or [initial]
    return CGResult(x, iterations, residuals, residuals[-1] <= tolerance)
