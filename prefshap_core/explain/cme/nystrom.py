"""Nyström conditional mean embeddings: ``Gamma_S`` in ``O(n m^2)`` per coalition.

The exact engine (:mod:`cme`) solves ``(K W + c I) beta = K_S(Z, Q)`` over the ``r``
pool classes of a coalition and contracts ``beta`` with the centres' ``r``-long rows:
``r^3/3 + 2 r^2 q' + 2 r t q'`` flops, hopeless at ``r = 20,000``. Here the
coalition's kernel is replaced by a rank-``m`` Nyström approximation
``K ~ F F'`` (``F = K(., L) K(L, L)^-1/2`` for ``m`` landmark classes ``L``) in the
system *and* in its right-hand side (the "subset of regressors" estimator, as in
Falkon), which makes the whole middle factor low rank:

    middle(P, Q) = Y (F_pool' W F_pool + c I)^-1 F_Q'         Y = K_Sc(P, X) W F_pool

(``Y``: the centres' Sc kernel against the pool, weighted, times the pool's factor
rows; ``F_Q``: the factor rows of the queries' S classes). That is exact algebra
from ``beta = F_pool (F' W F + c I)^-1 F_Q'``, which solves the approximated system
``(F F' W + c I) beta = F F_Q'`` exactly (push-through identity). With every pool
class a landmark, ``F F' = K`` on the pool and the result *is* the exact CME.

Cost per coalition: the factor ``~ N m^2`` (``N`` = pool + extra query classes),
``2 r m^2`` for the ``m x m`` system, ``2 t_pool t m`` for ``Y`` (blocked over the
pool's Sc classes so only ``block x t`` kernel entries exist at once), ``2 t m q'``
for the middle factor; memory ``O(N m + t q')``.

Landmarks (:func:`nystrom_factor`): ``"rpcholesky"`` (default) picks them by
block randomly-pivoted Cholesky (Chen, Epperly, Tropp, Webber 2023): sample
proportionally to the weighted residual diagonal ``w_i (1 - |F_i|^2)``, a
k-means++-like rule in feature space that never picks a class the factor already
captures; ``"uniform"`` samples classes proportionally to their weights (pool rows
uniformly). Both seeded. Accuracy is reported as ``tr(W^1/2 (K - F F') W^1/2) / c``,
an upper bound on ``||E||_2 / c``, the relative size of what the approximation
leaves out of the system matrix (0 when the factor is exact).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute, transposed
from prefshap_core.explain.cme.base import CMEProblem, EngineStats, maybe_timed
from prefshap_core.explain.cme.classes import CoalitionClasses, PoolBinding, Universe
from prefshap_core.explain.options import CORRECTIONS, NystromOptions
from prefshap_core.explain.options import LANDMARK_RULES as LANDMARK_METHODS
from prefshap_core.kernels.rbf import scaled_gram as kernel

DEFAULT_LANDMARKS = NystromOptions().n_landmarks
# Pivots drawn per round of block RP-Cholesky: small blocks choose almost as well
# as one-at-a-time pivoting, large ones use GEMMs; 64 is a good middle.
_BLOCK = 64
# Kernel entries formed at once when Y is accumulated over the pool's Sc classes.
_Y_BLOCK_ELEMENTS = 1 << 22


def _eig_floor(dtype: torch.dtype) -> float:
    """Relative eigenvalue floor of the landmark cores (kernel diagonal = 1)."""
    return 1e-10 if dtype == torch.float64 else 1e-5


@dataclass(frozen=True)
class NystromFactor:
    """``K ~ F F'`` on ``points`` (pool classes) followed by the ``extra`` rows."""

    factor: torch.Tensor  # (r + extra, rank)
    pivots: torch.Tensor  # landmark indices among the pool classes
    residual_trace: float  # tr(W^1/2 (K - F F') W^1/2) over the pool


def _core_root(core: torch.Tensor) -> torch.Tensor:
    """``U S^-1/2`` of the landmark block, dropping numerically null directions.

    An eigendecomposition rather than a Cholesky: near-duplicate landmarks (common in
    low-dimensional coalitions) make the block singular, and the pseudo-inverse
    keeps ``F F' = K(., L) K(L, L)^+ K(L, .)``, still a valid Nyström approximation.
    """
    core = 0.5 * (core + core.T)
    values, vectors = torch.linalg.eigh(core)
    keep = values > _eig_floor(core.dtype) * max(1.0, float(values.max()))
    return vectors[:, keep] / values[keep].sqrt()


def nystrom_factor(
    points: torch.Tensor,
    weights: torch.Tensor,
    n_landmarks: int,
    *,
    extra: torch.Tensor | None = None,
    method: str = "rpcholesky",
    seed: int = 0,
) -> NystromFactor:
    """A rank-``<= n_landmarks`` factor of the RBF Gram of ``points`` (rows / lengthscales).

    ``weights`` (the classes' multiplicities) steer the choice of landmarks; the
    ``extra`` rows (queries outside the pool) get factor rows but are never chosen.
    Every pool class is a landmark when ``n_landmarks >= len(points)``: exact.
    """
    if method not in LANDMARK_METHODS:
        raise ValueError(f"landmarks must be one of {LANDMARK_METHODS}, got {method!r}")
    r = len(points)
    rows = points if extra is None or len(extra) == 0 else torch.cat([points, extra])
    m = min(int(n_landmarks), r)
    generator = torch.Generator(device=points.device).manual_seed(int(seed))
    if m >= r:
        # All classes: one block, exact up to the eigenvalue floor.
        pivots = torch.arange(r, device=points.device)
        factor = kernel(rows, points) @ _core_root(kernel(points, points))
        return NystromFactor(factor, pivots, _residual_trace(factor[:r], weights))
    if method == "uniform":
        pivots = torch.multinomial(weights, m, replacement=False, generator=generator)
        factor = kernel(rows, points[pivots]) @ _core_root(kernel(points[pivots], points[pivots]))
        return NystromFactor(factor, pivots, _residual_trace(factor[:r], weights))
    return _rp_cholesky(rows, points, weights, m, generator)


def _rp_cholesky(
    rows: torch.Tensor,
    points: torch.Tensor,
    weights: torch.Tensor,
    m: int,
    generator: torch.Generator,
) -> NystromFactor:
    r = len(points)
    residual = weights.clone()  # w_i (k(x_i, x_i) - |F_i|^2), k(x, x) = 1
    floor = _eig_floor(points.dtype) * float(weights.max())
    blocks: list[torch.Tensor] = []
    chosen: list[torch.Tensor] = []
    rank = 0
    while rank < m:
        live = residual > floor
        n_live = int(live.sum())
        if n_live == 0:
            break  # the factor already reproduces the whole pool
        b = min(_BLOCK, m - rank, n_live)
        pick = torch.multinomial(
            torch.where(live, residual, torch.zeros_like(residual)),
            b,
            replacement=False,
            generator=generator,
        )
        cols = kernel(rows, points[pick])  # (N, b)
        if blocks:
            done = torch.cat(blocks, 1)
            cols -= done @ done[pick].T  # residual kernel against the new pivots
        new = cols @ _core_root(cols[pick])
        blocks.append(new)
        chosen.append(pick)
        rank += new.shape[1]
        residual -= weights * (new[:r] * new[:r]).sum(1)
        residual[pick] = 0.0
        residual.clamp_min_(0.0)
        if new.shape[1] == 0:
            break  # every candidate was already captured
    if not blocks:
        factor = rows.new_zeros((len(rows), 0))
        return NystromFactor(factor, points.new_zeros(0, dtype=torch.long), float(weights.sum()))
    factor = torch.cat(blocks, 1)
    return NystromFactor(factor, torch.cat(chosen), _residual_trace(factor[:r], weights))


def _residual_trace(pool_factor: torch.Tensor, weights: torch.Tensor) -> float:
    captured = (pool_factor * pool_factor).sum(1).clamp_max(1.0)
    return float((weights * (1.0 - captured)).sum())


@dataclass
class NystromReport:
    """What the Nyström embeddings of one explanation did (for ``Explanation.meta``)."""

    n_landmarks: int
    landmarks: str
    coalitions: int = 0
    max_rank: int = 0
    exact_coalitions: int = 0  # every pool class a landmark: no approximation
    worst_trace_ratio: float = 0.0

    def add(self, rank: int, exact: bool, trace_ratio: float) -> None:
        self.coalitions += 1
        self.max_rank = max(self.max_rank, rank)
        self.exact_coalitions += int(exact)
        self.worst_trace_ratio = max(self.worst_trace_ratio, trace_ratio)

    def as_dict(self) -> dict[str, object]:
        return {
            "n_landmarks": self.n_landmarks,
            "landmarks": self.landmarks,
            "coalitions": self.coalitions,
            "max_rank": self.max_rank,
            "exact_coalitions": self.exact_coalitions,
            # tr(W^1/2 (K - F F') W^1/2) / ridge, worst coalition: bounds ||E|| / ridge
            "worst_trace_ratio": self.worst_trace_ratio,
        }


class NystromEmbedding(PoolBinding):
    """``Gamma_S(P, Q)`` with a Nyström CME (see the module docstring).

    The same interface as :class:`embedding.CoalitionEmbedding` (``bind``, ``gammas``);
    ``n_landmarks`` (default 512), ``landmarks`` (``"rpcholesky"`` or ``"uniform"``),
    ``correction`` (``"diagonal"``, default, or ``"none"``), ``seed``; ``report`` (a
    :class:`NystromReport`) collects the accuracy of every coalition it embeds.
    """

    def __init__(
        self,
        problem: CMEProblem,
        compute: Compute,
        *,
        n_landmarks: int = DEFAULT_LANDMARKS,
        landmarks: str = "rpcholesky",
        correction: str = "diagonal",
        seed: int = 0,
        stats: EngineStats | None = None,
    ) -> None:
        if n_landmarks < 1:
            raise ValueError(f"n_landmarks must be at least 1, got {n_landmarks}")
        if landmarks not in LANDMARK_METHODS:
            raise ValueError(f"landmarks must be one of {LANDMARK_METHODS}, got {landmarks!r}")
        if correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
        self.problem = problem
        self.compute = compute
        self.stats = stats
        self.ridge = problem.ridge
        self.n_landmarks = int(n_landmarks)
        self.landmarks = landmarks
        self.correction = correction
        self.seed = int(seed)
        self.report = NystromReport(self.n_landmarks, landmarks)

    def gammas(
        self, masks: np.ndarray, universe: Universe
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        return [self._gamma(np.asarray(mask, dtype=bool), universe) for mask in masks]

    def _gamma(self, mask: np.ndarray, universe: Universe) -> tuple[torch.Tensor, np.ndarray]:
        c, stats = self.compute, self.stats
        with maybe_timed(stats, "classes"):
            co = universe.classes(mask)
        r, t, q = co.r, len(co.sc_centre), len(co.q_cls)
        cols = mask[universe.column_player]
        xs = universe.scaled.index_select(1, c.index(np.flatnonzero(cols)))
        xc = universe.scaled.index_select(1, c.index(np.flatnonzero(~cols)))
        z = xs[c.index(co.first)]  # every S class of the universe, the pool's first
        pair_w = c.tensor(co.pair_w)
        weights = torch.zeros(r, dtype=z.dtype, device=z.device)
        weights.index_add_(0, c.index(co.pair_s), pair_w)
        q_pool = co.q_cls[co.q_cls < r]  # q_cls is sorted: pool classes first
        extra_q = co.q_cls[co.q_cls >= r]
        m_est = min(self.n_landmarks, r)
        n_rows = r + len(extra_q)
        with maybe_timed(stats, "nystrom_factor", 2.0 * n_rows * m_est * (m_est + z.shape[1])):
            fac = nystrom_factor(
                z[:r],
                weights,
                self.n_landmarks,
                extra=z[c.index(extra_q)],
                method=self.landmarks,
                seed=self.seed,
            )
        f_pool = fac.factor[:r]
        m = f_pool.shape[1]
        self.report.add(m, len(fac.pivots) >= r, fac.residual_trace / self.ridge)
        # K ~ F F' + D on the pool (D: what the factor misses of each class's own
        # k(x, x) = 1; zero without the correction), so the system is
        # Lambda + Phi Phi' with Lambda = W D + c I diagonal: Woodbury in m x m.
        if self.correction == "diagonal":
            missed = (1.0 - (f_pool * f_pool).sum(1)).clamp_min_(0.0)
        else:
            missed = torch.zeros_like(weights)
        lam = weights * missed + self.ridge
        with maybe_timed(stats, "nystrom_solve", 2.0 * r * m * m + m**3 / 3.0):
            core = f_pool.T @ ((weights / lam)[:, None] * f_pool)
            core.diagonal().add_(1.0)
            chol = torch.linalg.cholesky(core)
            # Query rows of F; a pool class's row carries the diagonal term's c / lambda.
            q_idx = c.index(q_pool)
            f_q = torch.cat([f_pool[q_idx] * (self.ridge / lam[q_idx])[:, None], fac.factor[r:]])
            h = torch.cholesky_solve(transposed(f_q), chol)  # (m, q')
        y, delta = self._centre_side(co, xc, f_pool, pair_w, lam, missed, q_pool)
        with maybe_timed(stats, "gemm", 2.0 * t * m * q):
            middle = y @ h  # (t, q')
            if delta is not None:
                middle[:, : len(q_pool)] += delta.T
        with maybe_timed(stats, "gather"):
            p_cls, p_row = np.unique(co.labels[universe.centre_rows], return_inverse=True)
            k_pq = kernel(z[c.index(p_cls)], z[c.index(co.q_cls)])
            gamma = k_pq[c.index(p_row.reshape(-1))] * middle[c.index(co.sc_row)]
        return gamma, co.q_col

    def _centre_side(
        self,
        co: CoalitionClasses,
        xc: torch.Tensor,
        f_pool: torch.Tensor,
        pair_w: torch.Tensor,
        lam: torch.Tensor,
        missed: torch.Tensor,
        q_pool: np.ndarray,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``Y = K_Sc(centres, pool) W Lambda^-1 F`` (t x m) and the diagonal term.

        The diagonal term of a queried pool class ``j`` is ``mixed_j d_j / lambda_j``,
        ``mixed_j`` the centres' Sc kernel summed over the pool rows of class ``j``.
        Both are accumulated over blocks of the pool's Sc classes, so at most
        ``block x t`` kernel entries exist at once.
        """
        c = self.compute
        t_pool, t, m = co.t_pool, len(co.sc_centre), f_pool.shape[1]
        dtype, device = f_pool.dtype, f_pool.device
        pair_s = c.index(co.pair_s)
        # v[sc] = sum over the pool rows of Sc class sc of w / lambda_s F_s
        v = torch.zeros((t_pool, m), dtype=dtype, device=device)
        v.index_add_(0, c.index(co.pair_sc), (pair_w / lam[pair_s])[:, None] * f_pool[pair_s])
        centre_sc = xc[c.index(co.sc_first[co.sc_centre])]
        pool_sc = xc[c.index(co.sc_first[:t_pool])]
        y = torch.zeros((t, m), dtype=dtype, device=device)
        delta = None
        if len(q_pool) and bool((missed > 0).any()):
            delta = torch.zeros((len(q_pool), t), dtype=dtype, device=device)
            # the pairs whose S class is a queried pool class, sorted by Sc class
            position = np.full(co.r, -1, dtype=np.int64)
            position[q_pool] = np.arange(len(q_pool))
            pick = np.flatnonzero(position[co.pair_s] >= 0)
            pick = pick[np.argsort(co.pair_sc[pick], kind="stable")]
            d_sc = co.pair_sc[pick]
            d_row = c.index(position[co.pair_s[pick]])
            s_pick = pair_s[c.index(pick)]
            d_val = pair_w[c.index(pick)] * missed[s_pick] / lam[s_pick]
        step = max(1, _Y_BLOCK_ELEMENTS // max(1, t))
        with maybe_timed(self.stats, "gemm", 2.0 * t_pool * t * (m + xc.shape[1])):
            for s in range(0, t_pool, step):
                block = kernel(pool_sc[s : s + step], centre_sc)  # (b, t)
                y += block.T @ v[s : s + step]
                if delta is not None:
                    lo, hi = np.searchsorted(d_sc, [s, s + step])
                    if hi > lo:
                        rows = block[c.index(d_sc[lo:hi] - s)]
                        delta.index_add_(0, d_row[lo:hi], d_val[lo:hi, None] * rows)
        return y, delta
