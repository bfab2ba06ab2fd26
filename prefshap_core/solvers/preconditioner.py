"""The FALKON Cholesky preconditioner (Rudi, Carratino, Rosasco 2017).

    T = chol(K_MM + jitter I)                 upper, T^T T = K_MM + jitter I
    A = chol(T diag(w) T^T / M + lambda I)    upper, A^T A = ...
    alpha = T^-1 A^-1 beta

With uniformly drawn centres ``K_nM^T W K_nM / n ~ K_MM W_M K_MM / M``, so in ``beta``
the normal matrix ``T^-T (K_nM^T W K_nM / n) T^-1 + lambda I`` (the penalty is on
``T^T T = K_MM + jitter I``, as in falkon) is close to ``A^T A`` and the preconditioned
system ``A^-T (...) A^-1`` is close to the identity. ``w = 1`` is plain FALKON;
LogisticFalkon sets ``w`` to the loss curvature at the centres (our default uses its
mean: see ``SolverOptions.preconditioner``), recomputes ``A`` at every Newton step and
scales that weighted term by ``1/n`` instead of ``1/M``. The 1/n looks like a slip but
is not: the subsampled ``K_MM W K_MM / M`` counts each centre's own (largest) entry
``n/M`` times too often, and on GPM duel data the 1/n version needed about half the CG
iterations at small penalties (45 instead of 120 per Newton step at penalty 1e-6,
n = 40k, M = 1000).
So ``data_scale`` is a parameter: 1/M by default, 1/n for the logistic fit.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from prefshap_core.progress import checkpoint
from prefshap_core.solvers.cholesky import cholesky_ex
from prefshap_core.solvers.result import SolverError

_MAX_JITTER_TRIES = 12


def jittered_cholesky(matrix: torch.Tensor, jitter: float) -> tuple[torch.Tensor, float]:
    """Lower ``L`` with ``L L^T = matrix + j I``; ``j`` starts at ``jitter`` times the mean
    diagonal and grows tenfold until the factorisation succeeds.

    Returns ``L`` and the ``j`` that worked. Deterministic: no randomness, same tries.
    """
    if not bool(torch.isfinite(matrix).all()):
        raise SolverError("K_MM contains NaN or infinity")
    scale = float(matrix.diagonal().abs().mean()) or 1.0
    j = jitter * scale
    eye = torch.eye(matrix.shape[0], dtype=matrix.dtype, device=matrix.device)
    for _ in range(_MAX_JITTER_TRIES):
        factor, info = cholesky_ex(matrix + j * eye)  # cancellable when large
        if info == 0 and bool(torch.isfinite(factor).all()):
            return factor, j
        j = max(10.0 * j, 1e-12 * scale)
    raise SolverError(f"Cholesky failed even with diagonal jitter {j:.3g}")


class FalkonPreconditioner:
    """Holds ``T`` (fixed per centre set) and ``A`` (per penalty and weights)."""

    def __init__(self, centre_gram: torch.Tensor, jitter: float) -> None:
        m = centre_gram.shape[0]
        # L = T^T: torch's Cholesky is lower-triangular.
        self._t_lower, self.jitter = jittered_cholesky(centre_gram, jitter * m)
        self._a_lower: torch.Tensor | None = None
        self._t_gram: torch.Tensor | None = None  # T T^T, formed when first needed
        self.n_centres = m

    @property
    def t_lower(self) -> torch.Tensor:
        """``L = T^T``, lower triangular: ``L L^T = K_MM + jitter I``."""
        return self._t_lower

    def set_penalty(
        self,
        penalty: float,
        weights: torch.Tensor | float | None = None,
        data_scale: float | None = None,
    ) -> None:
        """Form ``A`` for this penalty and centre weights.

        ``weights``: (M,) >= 0 per centre (an M^3 product per call), or one number
        (a multiple of ``T T^T``, formed once), or None for 1. ``data_scale``
        multiplies ``T diag(w) T^T`` (default ``1/M``).
        """
        if not penalty > 0:
            raise ValueError("the penalty must be positive")
        scale = 1.0 / self.n_centres if data_scale is None else data_scale
        if isinstance(weights, torch.Tensor):
            inner = triangular_gram(self._t_lower, weights) * scale
        else:
            if self._t_gram is None:
                self._t_gram = triangular_gram(self._t_lower)
            inner = self._t_gram * (scale * (1.0 if weights is None else float(weights)))
        inner.diagonal().add_(penalty)
        factor, info = cholesky_ex(inner)  # cancellable when large
        if info != 0:
            raise SolverError("the preconditioner's second Cholesky failed")
        self._a_lower = factor

    def _a(self) -> torch.Tensor:
        if self._a_lower is None:
            raise RuntimeError("call set_penalty before using the preconditioner")
        return self._a_lower

    def apply(self, beta: torch.Tensor) -> torch.Tensor:
        """``T^-1 A^-1 beta``: from the preconditioned variable to ``alpha``."""
        return _solve(self._t_lower, _solve(self._a(), beta, transpose=True), transpose=True)

    def apply_t(self, v: torch.Tensor) -> torch.Tensor:
        """``A^-T T^-T v``: the transpose of :meth:`apply`."""
        return _solve(self._a(), _solve(self._t_lower, v, transpose=False), transpose=False)

    def regularised_gram(self, centre_gram: torch.Tensor) -> torch.Tensor:
        """``K_MM + jitter I``: the matrix the penalty uses (it equals ``T^T T``)."""
        out = centre_gram.clone()
        out.diagonal().add_(self.jitter)
        return out

    def normal_operator(
        self, data_product: Callable[[torch.Tensor], torch.Tensor], penalty: float
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``beta -> A^-T (T^-T D T^-1 + penalty I) A^-1 beta`` for a data term ``D``.

        This is ``B^T (D + penalty T^T T) B``: the penalty is on ``T^T T = K_MM +
        jitter I`` and costs nothing extra, and the preconditioned matrix stays close
        to the identity even along directions where K_MM is numerically singular.
        """

        def matvec(beta: torch.Tensor) -> torch.Tensor:
            v = _solve(self._a(), beta, transpose=True)
            a = _solve(self._t_lower, v, transpose=True)
            h = _solve(self._t_lower, data_product(a), transpose=False) + penalty * v
            return _solve(self._a(), h, transpose=False)

        return matvec

    def inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """``A T alpha``: a warm start's ``alpha`` in the preconditioned variable."""
        t_alpha = _mv(self._t_lower.T, alpha)
        return _mv(self._a().T, t_alpha)


# Flops of one block of triangular_gram between two checkpoints: well under a second
# even on a loaded core, so a cancel inside the preconditioner stops within 2 s.
_BLOCK_FLOPS = 1e9


def triangular_gram(
    lower: torch.Tensor,
    weights: torch.Tensor | None = None,
    block: int | None = None,
) -> torch.Tensor:
    """``L^T diag(w) L`` for lower-triangular ``L``, symmetric.

    By row blocks of ``L``, each touching only the columns left of its diagonal end:
    about a third of the flops of a full GEMM. A cancel checkpoint runs between
    blocks (default block: 256 rows, fewer for large ``L`` so each block stays short).
    """
    m = lower.shape[0]
    if block is None:
        block = int(min(256, max(8, _BLOCK_FLOPS / max(1, 2 * m * m))))
    out = torch.zeros_like(lower)
    for lo in range(0, m, block):
        checkpoint()
        hi = min(lo + block, m)
        rows = lower[lo:hi, :hi]
        weighted = rows if weights is None else weights[lo:hi, None] * rows
        out[:hi, :hi] += rows.T @ weighted
    return 0.5 * (out + out.T)


def _mv(matrix: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return matrix @ v


def _solve(lower: torch.Tensor, v: torch.Tensor, *, transpose: bool) -> torch.Tensor:
    """``L^-1 v`` or, with ``transpose``, ``L^-T v`` (L lower; L^T is the upper factor)."""
    v2 = v[:, None] if v.ndim == 1 else v
    matrix = lower.T if transpose else lower
    out = torch.linalg.solve_triangular(matrix, v2, upper=transpose)
    return out[:, 0] if v.ndim == 1 else out
