"""How sure the cycles are: posterior draws of the preference matrix (docs/method.md).

With the model file's posterior ``alpha ~ N(alpha_hat, F F^T)``, each draw
``alpha_t = alpha_hat + F z_t`` (``z_t ~ N(0, I)``, seeded) gives a preference matrix
``G_t`` (the same :meth:`PreferenceFunction.pair_block` as the point estimate, so a
C-GPM is context-averaged or conditioned the same way). Over the draws:

- the cyclic share's 90 % interval: the 5 % and 95 % quantiles of the draws' shares;
- ``p_cycle`` of a triangle ``a > b > c > a``: the share of draws in which all
  three edges keep their direction (``G_ab > 0``, ``G_bc > 0``, ``G_ca > 0``).

No draw forms its n x n matrix: ``G`` is linear in alpha, so ``||G||^2`` is a
quadratic form ``a' Q a`` and the potential ``s = S a`` (:func:`_share_forms`, built
once in O(M^2 n)), and the candidates' edges are their brackets times alpha; a draw
costs O(M^2 + M (n + edges)).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from prefshap_core.analysis.intransitivity import IntransitivityReport
from prefshap_core.analysis.triangles import top_cycles
from prefshap_core.compute import Compute
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress

DEFAULT_DRAWS = 1000
DEFAULT_MIN_P_CYCLE = 0.95
INTERVAL = (0.05, 0.95)  # the 90 % interval
# The strongest this many cycles of the point estimate are scored (p_cycle), then
# filtered by the minimum p_cycle, then cut to the number asked for.
CANDIDATE_TRIANGLES = 1000


@dataclass(frozen=True)
class CycleDraws:
    shares: np.ndarray  # (T,) cyclic share of each draw
    p_cycle: np.ndarray  # (k,) share of draws keeping each triangle's three edges

    def share_interval(self) -> list[float]:
        lo, hi = np.quantile(self.shares, INTERVAL)
        return [float(lo), float(hi)]


def posterior_cycle_draws(
    fn: PreferenceFunction,
    item_rows: np.ndarray,
    triangles: np.ndarray,
    *,
    n_draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    compute: Compute | None = None,
    progress: Progress | None = None,
) -> CycleDraws:
    """Draws of G over ``item_rows`` (sorted, as the report's); ``triangles`` (k, 3)
    index those rows, each ``a > b > c > a`` in the point estimate."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be at least 1, got {n_draws}")
    compute = compute or Compute()
    progress = ensure_progress(progress)
    factor = fn.require_posterior()
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_draws, factor.shape[1]))
    c = compute
    kappa = _context_average(fn, c)
    alphas = (c.tensor(fn.alpha)[None, :] + c.tensor(z) @ c.tensor(factor).T) * kappa  # (T, M)
    k_left, k_right = fn.centre_kernels(fn.items[np.asarray(item_rows)], c)  # (M, n) each
    quadratic, potential = _share_forms(fn, k_left, k_right)
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    shares = np.empty(n_draws)
    kept = np.zeros(len(tri))
    edges = None
    if len(tri):  # the candidates' three edges: (3k, M) brackets, g = brackets @ alpha
        a, b = (
            np.concatenate([tri[:, 0], tri[:, 1], tri[:, 2]]),
            np.concatenate([tri[:, 1], tri[:, 2], tri[:, 0]]),
        )
        edges = _edge_brackets(fn, k_left, k_right, c.index(a), c.index(b))
    n = k_left.shape[1]
    step = 100
    for lo in range(0, n_draws, step):
        progress.update("Posterior draws of the preference matrix", lo / n_draws)
        block = alphas[lo : lo + step]
        total = ((block @ quadratic) * block).sum(1)  # ||G_t||^2
        s = block @ potential.T  # (t, n) the potentials s_t
        gradient = 2 * n * (s * s).sum(1) - 2 * s.sum(1) ** 2  # ||s_a - s_b||^2
        share = torch.where(total > 0, 1.0 - gradient / total, torch.zeros_like(total))
        shares[lo : lo + step] = torch.clamp(share, 0.0, 1.0).cpu().numpy()
        if edges is not None:
            g = (block @ edges.T).reshape(len(block), 3, len(tri)) > 0
            kept += g.all(1).sum(0).cpu().numpy()
    progress.update("Posterior draws of the preference matrix", 1.0)
    return CycleDraws(shares, kept / n_draws)


def _share_forms(
    fn: PreferenceFunction, k_left: torch.Tensor, k_right: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``Q`` (M, M) with ``||G||_F^2 = a' Q a`` and ``S`` (n, M) with ``s = S a``.

    For the bracket ``P_ab - P_ba + w (d_a - d_b)``, ``P_ab = kl(a) kr(b)``,
    ``d = kl - kr`` (UPM: the second term alone, w = 1), summed over all ordered pairs
    of the n items (what :func:`hodge_split` sums): no n x n matrix per draw.
    """
    n = k_left.shape[1]
    upm = fn.kind == "upm"
    w = 1.0 if upm else float(fn.utility_weight)
    d = k_left - k_right
    sum_l, sum_r, sum_d = k_left.sum(1), k_right.sum(1), d.sum(1)
    quadratic = torch.zeros((len(sum_l), len(sum_l)), dtype=k_left.dtype, device=k_left.device)
    potential = torch.zeros_like(k_left.T)
    if not upm:
        quadratic += 2 * ((k_left @ k_left.T) * (k_right @ k_right.T))
        quadratic -= 2 * ((k_left @ k_right.T) * (k_right @ k_left.T))
        potential += (k_left.T * sum_r[None, :] - k_right.T * sum_l[None, :]) / n
    if w != 0:
        quadratic += w * w * (2 * n * (d @ d.T) - 2 * torch.outer(sum_d, sum_d))
        potential += w * (d.T - sum_d[None, :] / n)
        if not upm:  # the cross terms of the two brackets
            cross = 2 * ((k_left @ d.T) * sum_r[:, None] - sum_l[:, None] * (k_right @ d.T))
            quadratic += w * (cross + cross.T)
    return quadratic, potential


def _edge_brackets(
    fn: PreferenceFunction,
    k_left: torch.Tensor,
    k_right: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
) -> torch.Tensor:
    """(edges, M) brackets of ``g(item a, item b)`` among the kernels' items."""
    d = k_left - k_right
    utility = (d[:, a] - d[:, b]).T
    if fn.kind == "upm":
        return utility
    pair = (k_left[:, a] * k_right[:, b] - k_left[:, b] * k_right[:, a]).T
    return pair + fn.utility_weight * utility if fn.utility_weight != 0 else pair


@dataclass(frozen=True)
class SureCycles:
    """The cycles that survive the posterior, and the cyclic share's interval."""

    triangles: list[dict]  # report.triangles()'s dicts with "p_cycle", filtered, cut
    share_interval: list[float]  # [lo, hi], 90 %
    n_draws: int
    n_candidates: int  # cycles scored

    def filtered(self, min_p_cycle: float, top: int) -> list[dict]:
        """The first ``top`` of these (strongest first) with ``p_cycle >= min_p_cycle``."""
        return [t for t in self.triangles if t["p_cycle"] >= min_p_cycle][:top]


def sure_cycles(
    fn: PreferenceFunction,
    report: IntransitivityReport,
    *,
    min_p_cycle: float = DEFAULT_MIN_P_CYCLE,
    top: int = 20,
    n_draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    compute: Compute | None = None,
    progress: Progress | None = None,
) -> SureCycles:
    """The ``top`` strongest cycles of ``report`` with ``p_cycle >= min_p_cycle``.

    ``fn``: the function the report is of (a C-GPM conditioned on its context, as
    given to ``analyse``); it needs a posterior. The candidates are the point
    estimate's :data:`CANDIDATE_TRIANGLES` strongest cycles (``prefshap cycles`` and
    the Intransitivity page use this).
    """
    if not 0.0 <= min_p_cycle <= 1.0:
        raise ValueError(f"the minimum p_cycle must be in [0, 1], got {min_p_cycle}")
    candidates = top_cycles(report.preference, max(top, CANDIDATE_TRIANGLES) if top else 0)
    draws = posterior_cycle_draws(
        fn, report.item_rows, candidates.items, n_draws=n_draws, seed=seed,
        compute=compute, progress=progress,
    )  # fmt: skip
    triangles = replace(report, cycles=candidates).triangles()
    for triangle, p_cycle in zip(triangles, draws.p_cycle.tolist(), strict=True):
        triangle["p_cycle"] = p_cycle
    scored = SureCycles(triangles, draws.share_interval(), n_draws, len(triangles))
    return replace(scored, triangles=scored.filtered(min_p_cycle, top))


def _context_average(fn: PreferenceFunction, compute: Compute) -> torch.Tensor:
    """What ``averaged_alpha`` multiplies alpha by (1 unless C-GPM)."""
    if fn.kind != "cgpm":
        return torch.ones(fn.n_centres, dtype=compute.torch_dtype, device=compute.torch_device)
    assert fn.contexts is not None and fn.context_weights is not None
    ku = fn.context_kernel_to_centres(fn.contexts, compute)
    w = compute.tensor(fn.context_weights)
    return (ku @ w) / w.sum()
