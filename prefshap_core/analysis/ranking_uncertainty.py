"""How sure the rankings are: posterior draws of every item's strength (docs/method.md).

With the posterior ``alpha ~ N(alpha_hat, F F^T)``, each draw ``alpha_t = alpha_hat +
F z_t`` (seeded) gives a preference matrix against the same opponents as the point
estimate (:func:`rankings.rankings`), so a strength (mean P(win) vs the pool) and a
rank per item. Over the draws: the strength's sd and the rank's 90 % interval (its
5 % and 95 % quantiles). A UPM score ``f(x) - mean f`` is linear in the UPM's alpha,
so its sd is exact: ``||(D - mean D)^T F||`` with ``D`` the centres' bracket columns.
A draw costs one (items x opponents x M) product: ``DEFAULT_DRAWS`` keeps a 500 x 500
pool at M = 2,000 to seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from prefshap_core.analysis.pairwise import context_alpha, win_probability
from prefshap_core.compute import Compute
from prefshap_core.models.preference_function import PreferenceFunction

DEFAULT_DRAWS = 200
INTERVAL = (0.05, 0.95)


@dataclass(frozen=True)
class RankIntervals:
    strength_sd: np.ndarray  # (n,) sd of the mean P(win) over the draws
    rank_low: np.ndarray  # (n,) int, the 5 % quantile of the rank (1 = strongest)
    rank_high: np.ndarray  # (n,) int, the 95 % quantile
    n_draws: int


def ranks_of(strengths: np.ndarray) -> np.ndarray:
    """Ranks (1 = strongest) of each row's strengths, ties broken by position."""
    order = np.argsort(-strengths, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, strengths.shape[-1] + 1)[None, :], axis=-1)
    return ranks


def rank_intervals(
    fn: PreferenceFunction,
    opponents: np.ndarray,
    self_mask: np.ndarray,
    *,
    n_draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    compute: Compute | None = None,
) -> RankIntervals:
    """Draws of every pool item's strength against ``opponents`` (rows of ``fn.items``;
    ``self_mask`` (n, k) marks an item's duel with itself, left out as in the table)."""
    compute = compute or Compute()
    factor = fn.require_posterior()
    z = np.random.default_rng([seed, 11]).standard_normal((n_draws, factor.shape[1]))
    alphas = fn.alpha[None, :] + z @ factor.T
    items = fn.centre_kernels(fn.items, compute)
    rivals = fn.centre_kernels(fn.items[np.asarray(opponents)], compute)
    keep = ~np.asarray(self_mask)
    counts = np.maximum(keep.sum(axis=1), 1)
    strengths = np.empty((n_draws, len(fn.items)))
    for t, alpha in enumerate(alphas):
        drawn = replace(fn, alpha=alpha)
        g = drawn.pair_block(context_alpha(drawn, None, compute), items, rivals)
        p = win_probability(g.cpu().numpy().astype(np.float64))
        strengths[t] = (p * keep).sum(axis=1) / counts
    ranks = ranks_of(strengths)
    low, high = np.quantile(ranks, INTERVAL, axis=0, method="inverted_cdf")
    return RankIntervals(strengths.std(axis=0), low.astype(int), high.astype(int), n_draws)


def utility_sd(fn: PreferenceFunction, x: np.ndarray, compute: Compute | None = None) -> np.ndarray:
    """Posterior sd of a UPM's centred utility ``f(x) - mean f`` per row of ``x``."""
    compute = compute or Compute()
    factor = fn.require_posterior()
    k_left, k_right = fn.centre_kernels(x, compute)
    brackets = (k_left - k_right).cpu().numpy().astype(np.float64)  # (M, n): f = alpha @ D
    centred = brackets - brackets.mean(axis=1, keepdims=True)
    return np.linalg.norm(centred.T @ factor, axis=1)
