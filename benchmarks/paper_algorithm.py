"""The paper's CME algorithm as published, for comparison only (never used by the product).

Hu et al. (NeurIPS 2022), Algorithm 1 with Algorithm 3 (BatchedCGD, Appendix A),
with its choices kept on purpose, since they are what ``bench_scale.py`` measures
the product against:

* per coalition an ``n x n`` kernel ``K_S(X, X) + n lam I`` built from scratch over
  the whole pool, duplicates and all (no classes, no deduplication of items);
* one right-hand-side column per duel *side*: ``[K_S(X, x_l), K_S(X, x_r)]``;
* preconditioner ``P = (K(X, X) + n lam I)^-1`` of the full-feature system, one
  for all coalitions, applied as a dense ``n x n`` product (``BatchMM(P, .)``);
* 10 CG iterations, stopped early only when the *mean squared* residual norm over
  the columns falls below an *absolute* tolerance;
* every centre's Gamma evaluated (``K_Sc(C, X) beta`` for all ``M`` centres, both
  sides), then the value function of Prop. 3.2 per duel.

One line of Algorithm 3 as printed, ``L = BatchMM(X, B)``, multiplies by the
right-hand side instead of the search direction; it is read as the textbook
``L = A p`` (the printed version does not converge at all). For context (Prop. 3.3)
the same over the *expanded* contexts ``U`` (every training duel's context).

Values only: the Shapley step is the product's exact one (negligible work), so
that errors against the product compare value functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.models.preference_function import PreferenceFunction

PAPER_MAX_ITERATIONS = 10
# Absolute tolerance on the mean over columns of |r_j|^2 (the paper gives none).
PAPER_TOLERANCE = 1e-10


@dataclass
class PaperStats:
    seconds: dict[str, float] = field(default_factory=dict)
    flops: float = 0.0
    iterations: list[int] = field(default_factory=list)

    def add(self, part: str, seconds: float) -> None:
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds


def _sync(compute: Compute) -> None:
    if compute.device.startswith("cuda"):
        torch.cuda.synchronize()


class _Clock:
    def __init__(self, stats: PaperStats, part: str, compute: Compute) -> None:
        self.stats, self.part, self.compute = stats, part, compute

    def __enter__(self) -> None:
        _sync(self.compute)
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        _sync(self.compute)
        self.stats.add(self.part, time.perf_counter() - self.start)


def batched_cgd(
    a: torch.Tensor, b: torch.Tensor, p_inv: torch.Tensor, stats: PaperStats
) -> torch.Tensor:
    """Algorithm 3: ``PAPER_MAX_ITERATIONS`` PCG steps, absolute mean-residual stop."""
    n, c = b.shape
    x = torch.zeros_like(b)
    r = b.clone()
    z = p_inv @ r
    p = z.clone()
    rz = (r * z).sum(0)
    its = 0
    for _ in range(PAPER_MAX_ITERATIONS):
        its += 1
        ap = a @ p
        alpha = rz / (ap * p).sum(0)
        x += alpha * p
        r -= alpha * ap
        stats.flops += 2.0 * n * n * c
        if float((r * r).sum(0).mean()) < PAPER_TOLERANCE:
            break
        z = p_inv @ r
        stats.flops += 2.0 * n * n * c
        rz_new = (r * z).sum(0)
        p = z + (rz_new / rz) * p
        rz = rz_new
    stats.iterations.append(its)
    return x


def _preconditioner(rows: torch.Tensor, ridge: float, stats: PaperStats) -> torch.Tensor:
    full = kernel(rows, rows)
    full.diagonal().add_(ridge)
    n = len(rows)
    stats.flops += n**3  # Cholesky + inverse from it
    return torch.cholesky_inverse(torch.linalg.cholesky(full))


def item_values(
    fn: PreferenceFunction,
    left: np.ndarray,
    right: np.ndarray,
    masks: np.ndarray,
    lam: float,
    compute: Compute,
    stats: PaperStats | None = None,
) -> np.ndarray:
    """(K, D) ``v(S)`` of Prop. 3.2 (GPM; C-GPM context-averaged) for pool rows left/right."""
    if fn.kind == "upm":
        raise ValueError("the paper's algorithm is written for the GPM value function")
    stats = stats if stats is not None else PaperStats()
    c = compute
    scaled = c.tensor(fn.items / fn.lengthscales)
    cl = c.tensor(fn.centres_left / fn.lengthscales)
    cr = c.tensor(fn.centres_right / fn.lengthscales)
    alpha = fn.averaged_alpha(c)
    n = scaled.shape[0]
    m_c = len(cl)
    ridge = n * lam
    xl, xr = scaled[c.index(left)], scaled[c.index(right)]
    with _Clock(stats, "preconditioner", c):
        p_inv = _preconditioner(scaled, ridge, stats)
    groups = fn.item_space.feature_group
    out = np.empty((len(masks), len(left)))
    n_duels = len(left)
    for k, mask in enumerate(np.asarray(masks, dtype=bool)):
        s = c.index(np.flatnonzero(mask[groups]))
        sc = c.index(np.flatnonzero(~mask[groups]))
        with _Clock(stats, "kernel", c):
            a = kernel(scaled[:, s], scaled[:, s])  # from scratch, every coalition
            a.diagonal().add_(ridge)
            rhs = kernel(scaled[:, s], torch.cat([xl, xr])[:, s])  # one column per side
        with _Clock(stats, "cg", c):
            beta = batched_cgd(a, rhs, p_inv, stats)
        with _Clock(stats, "gamma", c):
            ms = [cl[:, sc], cr[:, sc]]
            mid = [kernel(mm, scaled[:, sc]) @ beta for mm in ms]  # (M, 2D) each
            stats.flops += 2 * 2.0 * m_c * n * 2 * n_duels
            g_l = [kernel(cl[:, s], x[:, s]) for x in (xl, xr)]  # K_S(C_l, x_l), (C_l, x_r)
            g_r = [kernel(cr[:, s], x[:, s]) for x in (xl, xr)]
            gll = g_l[0] * mid[0][:, :n_duels]
            glr = g_l[1] * mid[0][:, n_duels:]
            grl = g_r[0] * mid[1][:, :n_duels]
            grr = g_r[1] * mid[1][:, n_duels:]
            v = alpha @ (gll * grr - glr * grl)
        out[k] = v.cpu().numpy()
        stats.flops += float(n * n * (2 * len(s) + 10) + 2 * n * len(s) * 2 * n_duels)
    return out


def context_values(
    fn: PreferenceFunction,
    left: np.ndarray,
    right: np.ndarray,
    contexts: np.ndarray,
    masks: np.ndarray,
    lam: float,
    compute: Compute,
    stats: PaperStats | None = None,
    max_rows: int | None = None,
    seed: int = 0,
) -> np.ndarray:
    """(K, D) ``v(S')`` of Prop. 3.3 over the expanded training contexts.

    ``max_rows``: use a random subset of that many expanded rows (the full set, one
    row per training duel, is what the paper does; the benchmark times a subset and
    scales, since 77,000 rows need a 47 GB kernel).
    """
    assert fn.contexts is not None and fn.context_weights is not None
    stats = stats if stats is not None else PaperStats()
    c = compute
    counts = np.round(fn.context_weights).astype(np.int64)
    expanded = np.repeat(fn.contexts, counts, axis=0)
    if max_rows is not None and max_rows < len(expanded):
        rng = np.random.default_rng(seed)
        expanded = expanded[rng.choice(len(expanded), max_rows, replace=False)]
    ls_u = fn.context_lengthscales
    u_rows = c.tensor(expanded / ls_u)
    u_q = c.tensor(np.asarray(contexts) / ls_u)
    cu = c.tensor(fn.centres_context / ls_u)
    items = c.tensor(fn.items / fn.lengthscales)
    cl = c.tensor(fn.centres_left / fn.lengthscales)
    cr = c.tensor(fn.centres_right / fn.lengthscales)
    xl, xr = items[c.index(left)], items[c.index(right)]
    xi = kernel(cl, xl) * kernel(cr, xr) - kernel(cl, xr) * kernel(cr, xl)  # (M, D)
    alpha = c.tensor(fn.alpha)
    m = len(u_rows)
    ridge = m * lam
    with _Clock(stats, "preconditioner", c):
        p_inv = _preconditioner(u_rows, ridge, stats)
    groups = fn.context_space.feature_group  # type: ignore[union-attr]
    out = np.empty((len(masks), len(left)))
    for k, mask in enumerate(np.asarray(masks, dtype=bool)):
        s = c.index(np.flatnonzero(mask[groups]))
        sc = c.index(np.flatnonzero(~mask[groups]))
        with _Clock(stats, "kernel", c):
            a = kernel(u_rows[:, s], u_rows[:, s])
            a.diagonal().add_(ridge)
            rhs = kernel(u_rows[:, s], u_q[:, s])
        with _Clock(stats, "cg", c):
            beta = batched_cgd(a, rhs, p_inv, stats)
        with _Clock(stats, "gamma", c):
            gamma = kernel(cu[:, s], u_q[:, s]) * (kernel(cu[:, sc], u_rows[:, sc]) @ beta)
            out[k] = (alpha @ (gamma * xi)).cpu().numpy()
        stats.flops += float(m * m * (2 * len(s) + 10) + 2.0 * len(cu) * m * len(left))
    return out
