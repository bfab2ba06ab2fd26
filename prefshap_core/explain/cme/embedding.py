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
:class:`cg.CGSolver`). With a :class:`cache.FactorCache`, each coalition's
centre-side solution is kept: it depends on the pool and the centres only, so later
calls pay only for their new queries (see :class:`CoalitionEmbedding`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.errors import NumericalError
from prefshap_core.explain.cme.base import (
    CMEProblem,
    CMESolver,
    CMESystem,
    EngineStats,
    maybe_timed,
    sparse_csr,
)
from prefshap_core.explain.cme.cache import FactorCache
from prefshap_core.explain.cme.classes import CoalitionClasses, PoolBinding, Universe
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.progress import checkpoint


class CholeskySolver:
    """Dense Cholesky; systems of equal size batched if asked.

    Batching pays on GPUs (one kernel launch for many small systems); on CPU LAPACK
    loops over the batch anyway, so the default batches on CUDA only.
    """

    name = "cholesky"
    wants_gram = True

    def __init__(self, batch_equal_sizes: bool | None = None) -> None:
        self.batch_equal_sizes = batch_equal_sizes

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]:
        if not systems:
            return []
        batch = self.batch_equal_sizes
        if batch is None:
            batch = systems[0].rhs.device.type == "cuda"
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, s in enumerate(systems):
            key = tuple(s.rhs.shape) if batch else (k,)
            groups.setdefault(key, []).append(k)
        out: dict[int, torch.Tensor] = {}
        for members in groups.values():
            checkpoint()  # a cancel stops between systems (each up to ~1 s on a busy CPU)
            solved = self._solve_stack([systems[k] for k in members], stats)
            out.update(zip(members, solved, strict=True))
        return [out[k] for k in range(len(systems))]

    def _solve_stack(
        self, systems: Sequence[CMESystem], stats: EngineStats | None
    ) -> list[torch.Tensor]:
        if len(systems) == 1:  # the CPU's case: one new matrix, no stacked copies
            return [self._solve_one(systems[0], stats)]
        r, c = systems[0].rhs.shape
        chol = _factor(torch.stack([_system_matrix(s) for s in systems]), stats)
        with maybe_timed(stats, "solve", len(systems) * 2.0 * r * r * c):
            x = torch.cholesky_solve(torch.stack([s.rhs for s in systems]), chol)
        return list(x.unbind(0))

    @staticmethod
    def _solve_one(s: CMESystem, stats: EngineStats | None) -> torch.Tensor:
        r, c = s.rhs.shape
        chol = _factor(_system_matrix(s), stats)
        with maybe_timed(stats, "solve", 2.0 * r * r * c):
            # Two triangular solves in place, in LAPACK's (column-major) layout: the
            # numbers of cholesky_solve without its copies of the factor and of the
            # result (8 % faster at r = 700, c = 680; a row-major x is 20 % slower).
            x = torch.empty((c, r), dtype=s.rhs.dtype, device=s.rhs.device).T
            x.copy_(s.rhs)
            torch.linalg.solve_triangular(chol, x, upper=False, out=x)
            torch.linalg.solve_triangular(chol.mT, x, upper=True, out=x)
        return x


def _system_matrix(s: CMESystem) -> torch.Tensor:
    """``W^1/2 K W^1/2 + ridge I``, a new matrix."""
    root_w = s.weights.sqrt()
    gram = s.gram if s.gram is not None else kernel(s.points, s.points)
    a = (root_w[:, None] * gram).mul_(root_w[None, :])
    a.diagonal().add_(s.ridge)
    return a


def _factor(a: torch.Tensor, stats: EngineStats | None) -> torch.Tensor:
    """The lower Cholesky factor of ``a`` (or of a stack of them), timed; a cancel may
    stop the run after it, before the solve."""
    r = a.shape[-1]
    n_systems = a.shape[0] if a.dim() == 3 else 1
    with maybe_timed(stats, "cholesky", n_systems * r**3 / 3.0):
        chol, info = torch.linalg.cholesky_ex(a)
        if bool((info != 0).any()):
            chol = _cholesky_in_float64(a).to(a.dtype)
    checkpoint()  # between a system's factorization and its solve
    return chol


def _cholesky_in_float64(a: torch.Tensor, max_tries: int = 8) -> torch.Tensor:
    """Fallback for float32 systems that lost definiteness to rounding.

    Bounded: at most ``max_tries`` growing jitters (1e-10 .. 1e-3 of the mean
    diagonal). A matrix with NaN or infinite entries (a crafted model: lengthscales
    of 1e-200, items at 1e200) can never be factorised, so it is refused at once
    instead of spinning forever.
    """
    a64 = a.to(torch.float64)
    if not bool(torch.isfinite(a64).all()):
        raise NumericalError(
            "the CME system has NaN or infinite entries: the model's lengthscales, "
            "scales or item values overflow the kernel (check the model file)"
        )
    chol, info = torch.linalg.cholesky_ex(a64)
    scale = a64.diagonal(dim1=-2, dim2=-1).abs().mean()
    jitter = 1e-10 * (scale if bool(scale > 0) else torch.ones_like(scale))
    for _ in range(max_tries):
        if not bool((info != 0).any()):
            return chol
        a64.diagonal(dim1=-2, dim2=-1).add_(jitter)
        chol, info = torch.linalg.cholesky_ex(a64)
        jitter = jitter * 10
    if bool((info != 0).any()) or not bool(torch.isfinite(chol).all()):
        raise NumericalError(
            f"the CME system stays singular after {max_tries} growing jitters: raise the "
            "CME regulariser (cme_lambda) or check the model's lengthscales"
        )
    return chol


@dataclass
class _Prepared:
    """One coalition between its preparation and its finish."""

    co: CoalitionClasses
    z: torch.Tensor  # every S class of the universe (scaled S columns), the pool's first
    weights: torch.Tensor  # (r,) pool class weights
    mixed_q: torch.Tensor  # (q'_pool, t) mixed_t rows of the queried pool classes
    mixed_t: torch.Tensor | None  # (r, t) all of mixed_t (None when x was kept)
    by_centres: bool
    x: torch.Tensor | None  # the kept centre-side solution, or None: solve ``system``
    system: CMESystem | None


class CoalitionEmbedding(PoolBinding):
    """``Gamma_S(P, Q)`` for a fixed :class:`CMEProblem`; queries come with each call.

    With ``M = K_Sc(P, X)`` summed within the pool's S classes (``mixed_t``), the
    middle factor is ``M (K W + c I)^-1 K_S(Z, Q)``. Two exact ways to form it:

    * by queries: solve with the ``q'`` query classes as right-hand sides, then a
      GEMM with ``M`` (``2 r^2 q' + 2 t r q'`` flops);
    * by centres: solve with the ``t`` centre Sc classes as right-hand sides,
      ``x = A^-1 W^-1/2 M'``, and use ``(K W + c I)^-1 K = W^-1 - c (K W + c I)^-1 W^-1``,
      so a query class of the pool needs only a gather (``2 r^2 t`` flops).

    The centre-side solution ``x`` (r x t) depends on the pool and the centres only:
    with a :class:`FactorCache`, every coalition whose ``x`` fits is solved by centres
    and ``x`` is kept, so a later call with new queries skips the Gram, the
    factorization and the solve of that coalition (``meta["cme"]["factor_cache"]``).
    Without one, the cheaper path is taken per coalition. A kept coalition forms the
    queried rows of ``mixed_t`` on their own, so its numbers may differ from a fresh
    one's in the last bits (1e-15 relative); within one call every duel and its swap
    are the same floats negated whatever the path.
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
        self.cache = cache
        self.ridge = problem.ridge

    @property
    def n_centres(self) -> int:
        return len(self.problem.centres)

    def gammas(
        self, masks: np.ndarray, universe: Universe
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Per coalition mask: Gamma (n_centres, q') and each query's column in it."""
        prepared = [self._prepare(np.asarray(m, dtype=bool), universe) for m in masks]
        to_solve = [k for k, p in enumerate(prepared) if p.x is None]
        systems = [prepared[k].system for k in to_solve]
        solved = self.solver.solve(systems, self.stats)  # type: ignore[arg-type]
        for k, x in zip(to_solve, solved, strict=True):
            p = prepared[k]
            p.x = x
            if p.by_centres and self.cache is not None:
                self.cache.put(_key(masks[k]), (x, p.weights))
        return [self._finish(p, universe) for p in prepared]

    # -- preparing -------------------------------------------------------------------
    def _prepare(self, mask: np.ndarray, universe: Universe) -> _Prepared:
        c = self.compute
        with maybe_timed(self.stats, "classes"):
            co = universe.classes(mask)
        cols = mask[universe.column_player]
        z = universe.scaled[c.index(co.first)][:, c.index(np.flatnonzero(cols))]
        pool_q = co.q_cls[co.q_cls < co.r]
        kept = None if self.cache is None else self.cache.get(_key(mask))
        if kept is not None:
            x, weights = kept
            with maybe_timed(self.stats, "kernels"):
                mixed_q = self._mixed_rows(co, universe, ~cols, pool_q)
            return _Prepared(co, z, weights, mixed_q, None, True, x, None)
        with maybe_timed(self.stats, "kernels"):
            mixed_t, weights = self._centre_side(co, universe, ~cols)
        r, t, q = co.r, len(co.sc_centre), len(co.q_cls)
        n_extra = q - len(pool_q)
        itemsize = mixed_t.element_size()
        if self.path != "auto":
            by_centres = self.path == "centres"
        elif self.cache is not None and r * t * itemsize <= self.cache.max_bytes:
            by_centres = True  # the solution that later calls can reuse
        else:
            by_centres = r * r * t + n_extra * r * t < r * r * q + q * r * t
        root_w = weights.sqrt()
        with maybe_timed(self.stats, "kernels"):
            if by_centres:
                rhs = mixed_t / root_w[:, None]
            else:
                rhs = root_w[:, None] * kernel(z[:r], z[c.index(co.q_cls)])
            wants_gram = getattr(self.solver, "wants_gram", True)
            system = CMESystem(
                points=z[:r],
                gram=kernel(z[:r], z[:r]) if wants_gram else None,
                weights=weights,
                ridge=self.ridge,
                rhs=rhs,
            )
        mixed_q = mixed_t[c.index(pool_q)]
        return _Prepared(co, z, weights, mixed_q, mixed_t, by_centres, None, system)

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

    def _mixed_rows(
        self, co: CoalitionClasses, universe: Universe, sc_cols: np.ndarray, pool_q: np.ndarray
    ) -> torch.Tensor:
        """The rows ``pool_q`` of ``mixed_t`` alone (a kept coalition's new queries)."""
        c = self.compute
        position = np.full(co.r, -1, dtype=np.int64)
        position[pool_q] = np.arange(len(pool_q))
        pick = np.flatnonzero(position[co.pair_s] >= 0)
        sc, sc_index = np.unique(co.pair_sc[pick], return_inverse=True)
        # (queried classes x their pool Sc classes) weights: sparse, each pool pair
        # belongs to one S class, so this costs (pool rows of the queried classes) x t
        weights = sparse_csr(
            c, position[co.pair_s[pick]], sc_index.reshape(-1), co.pair_w[pick],
            (len(pool_q), len(sc)),
        )  # fmt: skip
        xc = universe.scaled.index_select(1, c.index(np.flatnonzero(sc_cols)))
        k_sc = kernel(xc[c.index(co.sc_first[sc])], xc[c.index(co.sc_first[co.sc_centre])])
        return weights @ k_sc

    # -- finishing -------------------------------------------------------------------
    def _finish(self, prep: _Prepared, universe: Universe) -> tuple[torch.Tensor, np.ndarray]:
        c, co, z, x = self.compute, prep.co, prep.z, prep.x
        assert x is not None
        root_w = prep.weights.sqrt()
        r, t = co.r, len(co.sc_centre)
        if prep.by_centres:
            # x = A^-1 W^-1/2 mixed_t; middle(q) = (mixed(q) - c W^1/2 x(q)) / w(q) for pool q
            in_pool = co.q_cls < r
            pool_q = c.index(co.q_cls[in_pool])
            w_q = root_w[pool_q][:, None]
            # (mixed_q - ridge w_q x_q) / w_q^2, in place on the gathered rows (the same
            # roundings: only a negation moved).
            middle_pool = x[pool_q].mul_(-self.ridge * w_q).add_(prep.mixed_q).div_(w_q * w_q)
            if in_pool.all():  # the usual case: no query outside the pool's classes
                middle_t = middle_pool
            else:
                middle_t = torch.empty((len(co.q_cls), t), dtype=x.dtype, device=x.device)
                middle_t[c.index(np.flatnonzero(in_pool))] = middle_pool
                extra = kernel(z[c.index(co.q_cls[~in_pool])], z[:r]) * root_w[None, :]
                with maybe_timed(self.stats, "gemm", 2.0 * len(extra) * r * t):
                    middle_t[c.index(np.flatnonzero(~in_pool))] = extra @ x
        else:
            # x = A^-1 W^1/2 K_S(Z, Q); middle = mixed W^-1/2 x
            assert prep.mixed_t is not None
            with maybe_timed(self.stats, "gemm", 2.0 * x.shape[1] * r * t):
                middle_t = x.T @ (prep.mixed_t / root_w[:, None])
        with maybe_timed(self.stats, "gather"):
            centre_cls = co.labels[universe.centre_rows]
            p_cls, p_row = np.unique(centre_cls, return_inverse=True)
            z_q = z[c.index(co.q_cls)]
            if 2 * len(p_cls) > len(centre_cls):  # few centres share a class: no gather
                k_pq = kernel(z[c.index(centre_cls)], z_q)
            else:
                k_pq = kernel(z[c.index(p_cls)], z_q)[c.index(p_row.reshape(-1))]
            gamma = k_pq.mul_(middle_t.T[c.index(co.sc_row)])
        return gamma, co.q_col


def _key(mask: np.ndarray) -> bytes:
    return np.packbits(np.asarray(mask, dtype=bool)).tobytes() + bytes([len(mask) % 256])
