"""Exact conditional mean embeddings over coalitions: the Gamma matrices of Pref-SHAP.

For a coalition ``S`` (its columns ``S``, the rest ``Sc``), the weighted pool ``X``
(total weight ``n``), centre rows ``P`` and query rows ``Q`` (docs/method.md,
"Coalition embeddings"):

    Gamma_S(P, Q) = K_S(P, Q) * ( K_Sc(P, X) (K_S(X, X) + n lam I)^-1 K_S(X, Q) )

(``*`` elementwise). Two exact reductions make it cheap:

* Pool rows with equal ``S`` columns are merged into ``r`` classes with weights
  ``W`` (:mod:`classes`), using ``(P K P' + c I)^-1 P = P (K W + c I)^-1`` for the
  0/1 class assignment ``P``; the system is solved in its symmetric form
  ``(K W + c I)^-1 = W^-1/2 (W^1/2 K W^1/2 + c I)^-1 W^1/2`` so a Cholesky applies.
* ``Gamma`` depends on a query only through its ``S`` class, and the middle factor on
  a centre only through its ``Sc`` class: both are computed per class and gathered.

The solve sits behind :class:`base.CMESolver` (dense :class:`CholeskySolver`, or
:class:`cg.CGSolver`). With a solver that factorizes (Cholesky), each coalition's
factor and centre side are kept in a :class:`cache.FactorCache`: they depend on the
pool and the centres only, so later calls pay only for their new queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.cme.base import (
    CMEProblem,
    CMESolver,
    CMESystem,
    EngineStats,
    maybe_timed,
    sparse_csr,
)
from prefshap_core.explain.cme.cache import FactorCache
from prefshap_core.explain.cme.classes import CoalitionClasses, Universe
from prefshap_core.kernels.rbf import scaled_gram as kernel


class CholeskySolver:
    """Dense Cholesky; systems of equal size batched if asked.

    Batching pays on GPUs (one kernel launch for many small systems); on CPU LAPACK
    loops over the batch anyway, so the default batches on CUDA only. Factorizing
    and solving are separate steps so that factors can be kept and reused.
    """

    name = "cholesky"
    wants_gram = True

    def __init__(self, batch_equal_sizes: bool | None = None) -> None:
        self.batch_equal_sizes = batch_equal_sizes

    def _groups(self, shapes: Sequence[tuple[int, ...]], on_cuda: bool) -> list[list[int]]:
        batch = on_cuda if self.batch_equal_sizes is None else self.batch_equal_sizes
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, shape in enumerate(shapes):
            groups.setdefault(shape if batch else (k,), []).append(k)
        return list(groups.values())

    def factorize(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]:
        """Lower Cholesky factors of ``W^1/2 K W^1/2 + ridge I``, one per system."""
        if not systems:
            return []
        on_cuda = systems[0].rhs.device.type == "cuda"
        out: dict[int, torch.Tensor] = {}
        for members in self._groups([tuple(s.weights.shape) for s in systems], on_cuda):
            group = [systems[k] for k in members]
            r = len(group[0].weights)
            grams = [s.gram if s.gram is not None else kernel(s.points, s.points) for s in group]
            root_w = torch.stack([s.weights.sqrt() for s in group])  # (b, r)
            a = root_w[:, :, None] * torch.stack(grams) * root_w[:, None, :]
            ridge = torch.tensor([s.ridge for s in group], dtype=a.dtype, device=a.device)
            a.diagonal(dim1=-2, dim2=-1).add_(ridge[:, None])
            with maybe_timed(stats, "cholesky", len(group) * r**3 / 3.0):
                chol, info = torch.linalg.cholesky_ex(a)
                if bool((info != 0).any()):
                    chol = _cholesky_in_float64(a).to(a.dtype)
            out.update(zip(members, chol.unbind(0), strict=True))
        return [out[k] for k in range(len(systems))]

    def solve_factored(
        self,
        factors: Sequence[torch.Tensor],
        rhs: Sequence[torch.Tensor],
        stats: EngineStats | None = None,
    ) -> list[torch.Tensor]:
        if not rhs:
            return []
        on_cuda = rhs[0].device.type == "cuda"
        out: dict[int, torch.Tensor] = {}
        for members in self._groups([tuple(b.shape) for b in rhs], on_cuda):
            r, c = rhs[members[0]].shape
            with maybe_timed(stats, "solve", len(members) * 2.0 * r * r * c):
                x = torch.cholesky_solve(
                    torch.stack([rhs[k] for k in members]),
                    torch.stack([factors[k] for k in members]),
                )
            out.update(zip(members, x.unbind(0), strict=True))
        return [out[k] for k in range(len(rhs))]

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]:
        factors = self.factorize(systems, stats)
        return self.solve_factored(factors, [s.rhs for s in systems], stats)


def _cholesky_in_float64(a: torch.Tensor) -> torch.Tensor:
    """Fallback for float32 systems that lost definiteness to rounding."""
    a64 = a.to(torch.float64)
    chol, info = torch.linalg.cholesky_ex(a64)
    jitter = 1e-10 * a64.diagonal(dim1=-2, dim2=-1).mean()
    while bool((info != 0).any()):
        a64.diagonal(dim1=-2, dim2=-1).add_(jitter)
        chol, info = torch.linalg.cholesky_ex(a64)
        jitter = jitter * 10
    return chol


@dataclass
class _Prepared:
    """One coalition between its preparation and its finish."""

    co: CoalitionClasses
    z: torch.Tensor  # every S class of the universe (scaled S columns), the pool's first
    weights: torch.Tensor  # (r,) pool class weights
    mixed_t: torch.Tensor  # (r, t) weighted K_Sc of the pool classes against the centres
    factor: torch.Tensor | None  # cached Cholesky factor, if any
    by_centres: bool
    system: CMESystem


class CoalitionEmbedding:
    """``Gamma_S(P, Q)`` for a fixed :class:`CMEProblem`; queries come with each call.

    With ``M = K_Sc(P, X)`` summed within the pool's S classes, the middle factor
    is ``M (K W + c I)^-1 K_S(Z, Q)``. Two exact ways to form it, the cheaper taken
    per coalition:

    * by queries: solve with the ``q'`` query classes as right-hand sides, then a
      GEMM with ``M`` (``2 r^2 q' + 2 t r q'`` flops);
    * by centres: solve with the ``t`` centre Sc classes as right-hand sides and use
      ``(K W + c I)^-1 K = W^-1 - c (K W + c I)^-1 W^-1``, so a query class of the
      pool needs only a gather (``2 r^2 t`` flops).

    Kernel blocks between classes are always formed the same way (never as views of
    a larger Gram), so a cached and a fresh coalition give the same floats.
    """

    path = "auto"  # "auto" | "centres" | "queries": both exact; tests force each

    def __init__(
        self,
        problem: CMEProblem,
        compute: Compute,
        solver: CMESolver | None = None,
        stats: EngineStats | None = None,
        cache: FactorCache | None = None,
    ) -> None:
        self.problem = problem
        self.compute = compute
        self.solver: CMESolver = solver or CholeskySolver()
        self.stats = stats
        # Only a factorizing solver has something worth keeping between calls.
        self.cache = cache if hasattr(self.solver, "factorize") else None
        self.ridge = problem.ridge

    @property
    def n_centres(self) -> int:
        return len(self.problem.centres)

    def bind(self, queries: np.ndarray) -> Universe:
        """The universe of one call's query rows (pass it to :meth:`gammas`)."""
        return Universe(self.problem, queries, self.compute)

    def gammas(
        self, masks: np.ndarray, universe: Universe
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Per coalition mask: Gamma (n_centres, q') and each query's column in it."""
        prepared = [self._prepare(np.asarray(m, dtype=bool), universe) for m in masks]
        solutions = self._solve(masks, prepared)
        return [self._finish(p, x, universe) for p, x in zip(prepared, solutions, strict=True)]

    # -- solving ---------------------------------------------------------------------
    def _solve(self, masks: np.ndarray, prepared: list[_Prepared]) -> list[torch.Tensor]:
        if self.cache is None:
            return self.solver.solve([p.system for p in prepared], self.stats)
        missing = [k for k, p in enumerate(prepared) if p.factor is None]
        fresh = self.solver.factorize([prepared[k].system for k in missing], self.stats)  # type: ignore[attr-defined]
        for k, factor in zip(missing, fresh, strict=True):
            p = prepared[k]
            p.factor = factor
            self.cache.put(_key(masks[k]), (factor, p.mixed_t, p.weights))
        return self.solver.solve_factored(  # type: ignore[attr-defined]
            [p.factor for p in prepared], [p.system.rhs for p in prepared], self.stats
        )

    def _prepare(self, mask: np.ndarray, universe: Universe) -> _Prepared:
        c = self.compute
        with maybe_timed(self.stats, "classes"):
            co = universe.classes(mask)
        cached = None if self.cache is None else self.cache.get(_key(mask))
        with maybe_timed(self.stats, "kernels"):
            cols = mask[universe.column_player]
            z = universe.scaled.index_select(1, c.index(np.flatnonzero(cols)))[c.index(co.first)]
            if cached is None:
                factor = None
                mixed_t, weights = self._centre_side(co, universe, ~cols)
            else:
                factor, mixed_t, weights = cached
        r, t, q = co.r, len(co.sc_centre), len(co.q_cls)
        n_extra = int((co.q_cls >= r).sum())
        by_centres = r * r * t + n_extra * r * t < r * r * q + q * r * t
        if self.path != "auto":
            by_centres = self.path == "centres"
        root_w = weights.sqrt()
        if by_centres:
            rhs = mixed_t / root_w[:, None]
        else:
            rhs = root_w[:, None] * kernel(z[:r], z[c.index(co.q_cls)])
        wants_gram = getattr(self.solver, "wants_gram", True) and factor is None
        system = CMESystem(
            points=z[:r],
            gram=kernel(z[:r], z[:r]) if wants_gram else None,
            weights=weights,
            ridge=self.ridge,
            rhs=rhs,
        )
        return _Prepared(co, z, weights, mixed_t, factor, by_centres, system)

    def _centre_side(
        self, co: CoalitionClasses, universe: Universe, sc_cols: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``mixed_t`` (r, t): pool weights times K_Sc(pool row, centre Sc class), per S class."""
        c = self.compute
        xc = universe.scaled.index_select(1, c.index(np.flatnonzero(sc_cols)))
        k_sc = kernel(xc[c.index(co.sc_first[: co.t_pool])], xc[c.index(co.sc_first[co.sc_centre])])
        counts = sparse_csr(c, co.pair_s, co.pair_sc, co.pair_w, (co.r, co.t_pool))
        mixed_t = counts @ k_sc
        weights = torch.zeros(co.r, dtype=k_sc.dtype, device=k_sc.device)
        weights.index_add_(0, c.index(co.pair_s), c.tensor(co.pair_w))
        return mixed_t, weights

    def _finish(
        self, prep: _Prepared, x: torch.Tensor, universe: Universe
    ) -> tuple[torch.Tensor, np.ndarray]:
        c, co, z, mixed_t = self.compute, prep.co, prep.z, prep.mixed_t
        root_w = prep.weights.sqrt()
        r, t = co.r, mixed_t.shape[1]
        if prep.by_centres:
            # x = A^-1 W^-1/2 mixed_t; middle(q) = (mixed(q) - c W^1/2 x(q)) / w(q) for pool q
            in_pool = co.q_cls < r
            middle_t = torch.empty((len(co.q_cls), t), dtype=x.dtype, device=x.device)
            pool_q = c.index(co.q_cls[in_pool])
            w_q = root_w[pool_q][:, None]
            middle_t[c.index(np.flatnonzero(in_pool))] = (
                mixed_t[pool_q] - self.ridge * w_q * x[pool_q]
            ) / (w_q * w_q)
            if not in_pool.all():
                extra = kernel(z[c.index(co.q_cls[~in_pool])], z[:r]) * root_w[None, :]
                with maybe_timed(self.stats, "gemm", 2.0 * len(extra) * r * t):
                    middle_t[c.index(np.flatnonzero(~in_pool))] = extra @ x
        else:
            # x = A^-1 W^1/2 K_S(Z, Q); middle = mixed W^-1/2 x
            with maybe_timed(self.stats, "gemm", 2.0 * x.shape[1] * r * t):
                middle_t = x.T @ (mixed_t / root_w[:, None])
        with maybe_timed(self.stats, "gather"):
            p_cls, p_row = np.unique(co.labels[universe.centre_rows], return_inverse=True)
            k_pq = kernel(z[c.index(p_cls)], z[c.index(co.q_cls)])[c.index(p_row.reshape(-1))]
            gamma = k_pq * middle_t.T[c.index(co.sc_row)]
        return gamma, co.q_col


def _key(mask: np.ndarray) -> bytes:
    return np.packbits(np.asarray(mask, dtype=bool)).tobytes() + bytes([len(mask) % 256])
