"""How sure the cycles are: posterior draws of the preference matrix (docs/method.md).

With the model file's posterior ``alpha ~ N(alpha_hat, F F^T)``, each draw
``alpha_t = alpha_hat + F z_t`` (``z_t ~ N(0, I)``, seeded) gives a preference matrix
``G_t`` (the same :meth:`PreferenceFunction.pair_block` as the point estimate, so a
C-GPM is context-averaged or conditioned the same way). Over the draws:

- the cyclic share's 90 % interval: the 5 % and 95 % quantiles of the draws' shares;
- ``p_cycle`` of a triangle ``a > b > c > a``: the share of draws in which all
  three edges keep their direction (``G_ab > 0``, ``G_bc > 0``, ``G_ca > 0``).

A draw costs one M x n x n product (n items); draws run in chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from prefshap_core.analysis.intransitivity import IntransitivityReport, hodge_split
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
    alphas = fn.alpha[None, :] + z @ factor.T  # (T, M)
    kappa = _context_average(fn, compute)
    kernels = fn.centre_kernels(fn.items[np.asarray(item_rows)], compute)
    tri = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    shares = np.empty(n_draws)
    kept = np.zeros(len(tri))
    for t in range(n_draws):
        if t % 50 == 0:
            progress.update("Posterior draws of the preference matrix", t / n_draws)
        alpha = compute.tensor(alphas[t]) * kappa
        g = fn.pair_block(alpha, kernels).cpu().numpy().astype(np.float64)
        shares[t] = hodge_split(g)[1]
        if len(tri):
            kept += (g[a, b] > 0) & (g[b, c] > 0) & (g[c, a] > 0)
    progress.update("Posterior draws of the preference matrix", 1.0)
    return CycleDraws(shares, kept / n_draws)


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
