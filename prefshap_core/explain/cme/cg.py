"""Batched, Nyström-preconditioned conjugate gradients for the coalition CME systems.

Solves ``(W^1/2 K W^1/2 + c I) X = B`` (:class:`cme.CMESystem`, over a coalition's
pool classes) for a batch of coalitions at once: the paper's Algorithm 3 done right.

* **Preconditioner**: ``P = Phi Phi' + c I`` with ``Phi = W^1/2 F`` and ``F F'`` the
  rank-``m`` Nyström factor of the coalition's own kernel (:func:`nystrom_factor`,
  randomly pivoted Cholesky, landmark rule shared by the batch). Since
  ``K >= F F'``, the eigenvalues of ``P^-1 A`` lie in ``[1, 1 + ||E|| / c]``: a
  handful of iterations. ``P^-1`` by Woodbury, ``4 r m`` flops per column. Measured
  against the paper's shared preconditioner (Cholesky of the full-feature system)
  in ``benchmarks/bench_scale.py``: the full-feature Gram is a poor model of
  ``K_S`` for small coalitions, and under class merging it does not even act on
  the same rows.
* **Per column**: step sizes, and a *relative* residual tolerance
  ``|b_j - A x_j| <= tol |b_j|``; converged columns stop moving (and are dropped
  from the working set once half of them are done). Zero right-hand sides give
  zero solutions, exactly.
* **Batched**: systems of a batch are padded to a common size (padding rows have
  ``W = 0`` and right-hand side 0, so they stay exactly 0) and every step is one
  batched GEMM: no Python loop over coalitions in the iteration.
* **Bounded memory**: the ``r x r`` Grams are cached only while the batch's fit in
  ``max_gram_bytes`` (default: a quarter of the device's available memory);
  otherwise each product recomputes ``K`` in row blocks of bounded size.
* **Honest report**: after iterating, the true residual ``B - A X`` is recomputed;
  its worst relative value, the iteration counts and whether the tolerance was met
  go to :class:`CGReport` (``Explanation.meta["cme"]``). Non-finite numbers raise
  :class:`CMEConvergenceError`; they are never zeroed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from prefshap_core.explain.cme.base import CMESystem, EngineStats, maybe_timed
from prefshap_core.explain.cme.nystrom import nystrom_factor
from prefshap_core.explain.options import CGOptions
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.progress import checkpoint
from prefshap_core.solvers.cg import batched_pcg
from prefshap_core.solvers.result import SolverError

DEFAULT_CG_LANDMARKS = CGOptions().preconditioner_rank
DEFAULT_MAX_ITER = CGOptions().max_iter
# Share of the device's available memory the cached Grams of a batch may take.
GRAM_MEMORY_SHARE = 0.25
# Rows of K formed at once by the blocked (uncached) operator.
_BLOCK_ELEMENTS = 1 << 23


class CMEConvergenceError(SolverError, ArithmeticError):
    """A CME solve produced non-finite numbers (bad inputs, or a broken preconditioner)."""


def default_tolerance(dtype: torch.dtype) -> float:
    """Relative residual asked for: near what each precision can certify.

    float32 residuals stagnate around ``1e-6`` (rounding in ``A x``), float64 ones
    go far below the ``1e-8`` agreement the tests ask of the explanations.
    """
    return 1e-10 if dtype == torch.float64 else 1e-5


@dataclass
class CGReport:
    """Convergence of every CG solve of one explanation (for ``Explanation.meta``)."""

    tolerance: float | None = None
    systems: int = 0
    columns: int = 0
    max_iterations: int = 0
    total_iterations: int = 0  # summed over systems (the slowest column of each)
    worst_relative_residual: float = 0.0  # true residual |b - A x| / |b|, recomputed
    converged: bool = True
    preconditioner_rank: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "tolerance": self.tolerance,
            "systems": self.systems,
            "columns": self.columns,
            "max_iterations": self.max_iterations,
            "mean_iterations": self.total_iterations / max(1, self.systems),
            "worst_relative_residual": self.worst_relative_residual,
            "converged": self.converged,
            "preconditioner_rank": self.preconditioner_rank,
        }


class _Batch:
    """A batch of systems padded to common rows ``R`` and columns ``C``."""

    def __init__(self, systems: Sequence[CMESystem], max_gram_bytes: int) -> None:
        s0 = systems[0]
        self.dtype, self.device = s0.rhs.dtype, s0.rhs.device
        self.sizes = [s.rhs.shape for s in systems]
        n_rows = max(r for r, _ in self.sizes)
        n_cols = max(c for _, c in self.sizes)
        b = len(systems)
        self.rhs = torch.zeros((b, n_rows, n_cols), dtype=self.dtype, device=self.device)
        self.root_w = torch.zeros((b, n_rows, 1), dtype=self.dtype, device=self.device)
        for i, s in enumerate(systems):
            r, c = s.rhs.shape
            self.rhs[i, :r, :c] = s.rhs
            self.root_w[i, :r, 0] = s.weights.sqrt()
        self.ridge = torch.tensor(
            [s.ridge for s in systems], dtype=self.dtype, device=self.device
        ).view(b, 1, 1)
        self.points = [s.points for s in systems]
        itemsize = torch.finfo(self.dtype).bits // 8
        self.grams: torch.Tensor | None = None
        if b * n_rows * n_rows * itemsize <= max_gram_bytes:
            self.grams = torch.zeros((b, n_rows, n_rows), dtype=self.dtype, device=self.device)
            for i, s in enumerate(systems):
                r = len(s.points)
                self.grams[i, :r, :r] = s.gram if s.gram is not None else kernel(s.points, s.points)

    def apply_a(self, v: torch.Tensor) -> torch.Tensor:
        """``(W^1/2 K W^1/2 + c I) v``; padding rows give ``c v`` (= 0 there)."""
        wv = self.root_w * v
        if self.grams is not None:
            kv = torch.bmm(self.grams, wv)
        else:
            kv = torch.zeros_like(v)
            for i, pts in enumerate(self.points):
                r = len(pts)
                step = max(1, _BLOCK_ELEMENTS // max(1, r))
                for s in range(0, r, step):
                    e = min(s + step, r)
                    kv[i, s:e] = kernel(pts[s:e], pts) @ wv[i, :r]
        return self.root_w * kv + self.ridge * v


class _NystromPreconditioner:
    """``P = Phi Phi' + Lambda`` with ``Phi = W^1/2 F`` and ``Lambda = W D + c I``, by Woodbury.

    ``D`` is what the factor misses of each class's own ``k(x, x) = 1`` (the
    "Nyström + diagonal" approximation): for kernels close to the identity, where a
    low-rank factor captures little, it keeps ``P`` close to ``A`` all the same.
    ``P^-1 v = L^-1 v - L^-1 Phi (I + Phi' L^-1 Phi)^-1 Phi' L^-1 v``; batched, padded.
    """

    def __init__(
        self, batch: _Batch, systems: Sequence[CMESystem], rank: int, landmarks: str, seed: int
    ) -> None:
        factors = [
            nystrom_factor(s.points, s.weights, rank, method=landmarks, seed=seed).factor
            for s in systems
        ]
        width = max(1, max(f.shape[1] for f in factors))
        n_rows = batch.rhs.shape[1]
        phi = torch.zeros((len(systems), n_rows, width), dtype=batch.dtype, device=batch.device)
        for i, f in enumerate(factors):
            phi[i, : f.shape[0], : f.shape[1]] = f
        missed = (1.0 - (phi * phi).sum(2, keepdim=True)).clamp_min_(0.0)  # (b, R, 1)
        w = batch.root_w * batch.root_w
        self.lam_inv = 1.0 / (w * missed + batch.ridge)  # padding rows: 1 / c
        self.phi = batch.root_w * phi
        self.rank = max(f.shape[1] for f in factors)
        core = self.phi.transpose(1, 2) @ (self.lam_inv * self.phi)
        core.diagonal(dim1=-2, dim2=-1).add_(1.0)
        self.chol = torch.linalg.cholesky(core)

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        lv = self.lam_inv * v
        inner = torch.cholesky_solve(self.phi.transpose(1, 2) @ lv, self.chol)
        return lv - self.lam_inv * (self.phi @ inner)


class CGSolver:
    """Batched Nyström-preconditioned CG (see the module docstring); a :class:`CMESolver`.

    ``tol``: relative residual per column (default by precision,
    :func:`default_tolerance`); ``preconditioner_rank``: rank of the Nyström preconditioner;
    ``max_gram_bytes``: cache the batch's Grams up to this size, else recompute
    blocks in every product. ``report`` accumulates over every call.
    """

    name = "cg"
    wants_gram = False

    def __init__(
        self,
        tol: float | None = None,
        max_iter: int = DEFAULT_MAX_ITER,
        preconditioner_rank: int = DEFAULT_CG_LANDMARKS,
        landmarks: str = "rpcholesky",
        seed: int = 0,
        max_gram_bytes: int | None = None,
    ) -> None:
        if tol is not None and not 0 < tol < 1:
            raise ValueError(f"tol must be in (0, 1), got {tol}")
        if max_iter < 1 or preconditioner_rank < 0:
            raise ValueError("max_iter must be >= 1 and preconditioner_rank >= 0")
        self.tol = tol
        self.max_iter = int(max_iter)
        self.preconditioner_rank = int(preconditioner_rank)
        self.landmarks = landmarks
        self.seed = int(seed)
        self.max_gram_bytes = max_gram_bytes
        self.report = CGReport(tolerance=tol)

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]:
        if not systems:
            return []
        for s in systems:
            if not (bool(torch.isfinite(s.points).all()) and bool(torch.isfinite(s.rhs).all())):
                raise CMEConvergenceError("a CME system has non-finite points or right-hand side")
        tol = self.tol if self.tol is not None else default_tolerance(systems[0].rhs.dtype)
        budget = self.max_gram_bytes
        if budget is None:
            budget = int(GRAM_MEMORY_SHARE * available_memory(systems[0].rhs.device))
        batch = _Batch(systems, budget)
        n_rows, n_cols = batch.rhs.shape[1:]
        rank = min(self.preconditioner_rank, n_rows)
        with maybe_timed(stats, "cg_preconditioner", 3.0 * len(systems) * n_rows * rank**2):
            if rank > 0:
                pre = _NystromPreconditioner(batch, systems, rank, self.landmarks, self.seed)
                apply_p, rank = pre, pre.rank
            else:
                apply_p = _no_preconditioner
        with maybe_timed(stats, "cg"):
            try:
                result = batched_pcg(
                    batch.apply_a,
                    batch.rhs,
                    tol=tol,
                    max_iter=self.max_iter,
                    apply_p=apply_p,
                    on_iteration=lambda _: checkpoint(),  # a cancel stops between iterations
                )
            except SolverError as err:
                raise CMEConvergenceError(f"CME solve: {err}") from None
            true_res = batch.rhs - batch.apply_a(result.x)  # certify, do not trust recursion
        b_norm = torch.linalg.vector_norm(batch.rhs, dim=1)
        res_norm = torch.linalg.vector_norm(true_res, dim=1)
        rel = torch.where(b_norm > 0, res_norm / torch.where(b_norm > 0, b_norm, 1.0), 0.0)
        if not bool(torch.isfinite(rel).all()):
            raise CMEConvergenceError("CG solution has non-finite entries")
        iters = result.iterations.max(1).values  # per system: its slowest column
        if stats is not None:
            # Flops of the products: per iteration one A (2 r^2 c) and one P^-1 (4 r m c).
            per_iter = 2.0 * n_rows * (n_rows + 2 * rank) * n_cols
            stats.flops["cg"] = stats.flops.get("cg", 0.0) + float(iters.sum() + 1) * per_iter
        worst = float(rel.max())
        self._record(len(systems), n_cols, iters, worst, tol, rank)
        return [batch_x[:r, :c] for batch_x, (r, c) in zip(result.x, batch.sizes, strict=True)]

    def _record(
        self, n: int, n_cols: int, iters: torch.Tensor, worst: float, tol: float, rank: int
    ) -> None:
        rep = self.report
        rep.tolerance = tol
        rep.systems += n
        rep.columns += n * n_cols
        rep.max_iterations = max(rep.max_iterations, int(iters.max()))
        rep.total_iterations += int(iters.sum())
        rep.worst_relative_residual = max(rep.worst_relative_residual, worst)
        rep.preconditioner_rank = max(rep.preconditioner_rank, rank)
        # Rounding in the recomputed residual can sit a little above the recursive one.
        if worst > 10 * tol:
            if rep.converged:
                warnings.warn(
                    f"CG stopped after {int(iters.max())} iterations with relative residual "
                    f"{worst:.2e} > tolerance {tol:.0e}; the explanation is less accurate "
                    "(raise max_iter or preconditioner_rank, or use CholeskyOptions)",
                    RuntimeWarning,
                    stacklevel=3,
                )
            rep.converged = False


def _no_preconditioner(v: torch.Tensor) -> torch.Tensor:
    return v


def available_memory(device: torch.device) -> float:
    """Bytes free on ``device`` now (CUDA: the allocator's view; CPU: MemAvailable)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 4e9  # unknown: assume a small machine
