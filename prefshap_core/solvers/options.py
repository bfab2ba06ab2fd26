"""Solver settings (the FALKON knobs), in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from prefshap_core.kernels.operator import DEFAULT_CACHE_BUDGET_BYTES


@dataclass(frozen=True)
class SolverOptions:
    """Settings of :func:`fit_squared` and :func:`fit_logistic`.

    cg_tolerance
        Stop CG when ``||r|| / ||b||`` of the preconditioned system falls below it.
    max_cg_iterations
        CG iterations of a squared-loss fit; also the default per Newton step of a
        logistic fit when no ``cg_iterations`` are given there.
    jitter
        Added to the diagonal of K_MM, relative to its mean diagonal and times M, before
        the preconditioner's Cholesky (grown tenfold until it succeeds). As in falkon,
        the penalty then uses ``K_MM + jitter I``; the result reports the absolute
        jitter. None: 1e-13 for float64 (falkon's default); 1e-7 for float32 (falkon
        uses 1e-5, which moved converged predictions by ~3e-3 relative to float64 on
        our benchmarks; 1e-7 moves them by ~3e-5 and converged as fast).
    newton_tolerance, refine_steps
        A logistic fit takes one Newton step per penalty (as LogisticFalkon), then up to
        ``refine_steps`` more at the last penalty, stopping once half the Newton
        decrement ``g^T H^-1 g / 2`` (the predicted objective decrease) is below
        ``newton_tolerance``.
    inexact_newton
        Logistic: solve each Newton system only to relative residual
        ``sqrt(previous decrement)`` (within [cg_tolerance, 0.1]) instead of
        ``cg_tolerance``: same answer, far fewer CG iterations.
    line_search
        Halve a Newton step until the objective decreases (Armijo). Free: the step's
        K_nM product is computed once and reused for every trial length.
    preconditioner
        Logistic fits. "curvature": each centre weighted by the loss curvature at the
        current iterate, as LogisticFalkon (an extra 2 M^3 / 3 product per Newton
        step; the fewest CG iterations at small penalties). "mean" (default): the mean
        curvature for every centre, so a Newton step costs one M^3 / 3 Cholesky; on
        this 2-core CPU it was 20-60% faster along a penalty path at M = 2000 and
        within 15% either way when converged. "plain": the squared-loss preconditioner.
    cache_budget_bytes, cache_dtype, block_rows
        Passed to ``PairKernel.operator`` through :meth:`operator_kwargs`: cache K_nM
        when it fits the budget, in ``cache_dtype`` (None: the compute dtype).
    """

    cg_tolerance: float = 1e-7
    max_cg_iterations: int = 100
    jitter: float | None = None
    newton_tolerance: float = 1e-10
    refine_steps: int = 0
    inexact_newton: bool = True
    line_search: bool = True
    preconditioner: str = "mean"
    cache_budget_bytes: int = DEFAULT_CACHE_BUDGET_BYTES
    cache_dtype: str | None = None
    block_rows: int | None = None

    def __post_init__(self) -> None:
        if not self.cg_tolerance >= 0:
            raise ValueError("cg_tolerance must be >= 0")
        if self.max_cg_iterations < 1:
            raise ValueError("max_cg_iterations must be >= 1")
        if self.jitter is not None and not self.jitter >= 0:
            raise ValueError("jitter must be >= 0")
        if self.refine_steps < 0:
            raise ValueError("refine_steps must be >= 0")
        if self.preconditioner not in ("curvature", "mean", "plain"):
            raise ValueError("preconditioner must be 'curvature', 'mean' or 'plain'")
        if self.cache_dtype not in (None, "float32", "float64"):
            raise ValueError("cache_dtype must be None, 'float32' or 'float64'")

    def jitter_for(self, dtype: torch.dtype) -> float:
        if self.jitter is not None:
            return self.jitter
        return 1e-7 if dtype == torch.float32 else 1e-13

    def operator_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``PairKernel.operator``."""
        return {
            "cache_budget_bytes": self.cache_budget_bytes,
            "cache_dtype": self.cache_dtype,
            "block_rows": self.block_rows,
        }
