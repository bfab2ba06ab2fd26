"""The first design's sampled Shapley estimator, kept only as the baseline of
``bench_se_coverage.py`` (the engine uses :mod:`prefshap_core.explain.shapley.sampled`).

Paired Shapley-kernel sampling without duplicates (Efraimidis-Spirakis keys), kernel
WLS with efficiency as a constraint, and a CR3 jackknife over pairs scaled by a global
finite-population factor: its intervals were ~10x too wide (issue 8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.explain.shapley.coalitions import kernel_weights, masks_from_bits

_MAX_LISTED_PLAYERS = 20


@dataclass(frozen=True)
class LegacyCoalitions:
    masks: np.ndarray
    pair_ids: np.ndarray
    exact: bool = False

    @property
    def n_players(self) -> int:
        return int(self.masks.shape[1])

    @property
    def n_coalitions(self) -> int:
        return int(self.masks.shape[0])

    @property
    def coverage(self) -> float:
        proper = 2.0**self.n_players - 2.0 if self.n_players <= 1000 else float("inf")
        return min(1.0, self.n_coalitions / proper) if proper > 0 else 1.0


def sample_paired_coalitions(n_players: int, n_samples: int, seed: int) -> LegacyCoalitions:
    """About ``n_samples`` distinct proper coalitions, in complementary pairs.

    ``n_samples`` is rounded up to an even number. When it reaches the number of
    proper coalitions, all of them are returned (the WLS is then exact).
    """
    p = n_players
    if p < 2:
        raise ValueError("sampling needs at least two players")
    n_pairs = max(1, (int(n_samples) + 1) // 2)
    rng = np.random.default_rng(seed)
    if p <= _MAX_LISTED_PLAYERS:
        total_pairs = 2 ** (p - 1) - 1
        # Each pair {S, S^c} once: the representative without the last player.
        bits = np.arange(1, 2 ** (p - 1), dtype=np.int64)
        if n_pairs < total_pairs:
            sizes = masks_from_bits(bits, p).sum(1)
            w = kernel_weights(sizes, p)
            # Efraimidis-Spirakis: the n largest u^(1/w) are a weighted sample
            # without replacement; log form for stability.
            keys = np.log(rng.random(len(bits))) / w
            bits = bits[np.sort(np.argpartition(-keys, n_pairs - 1)[:n_pairs])]
        first = masks_from_bits(bits, p)
    else:
        first = _rejection_sample(p, n_pairs, rng)
    masks = np.empty((2 * len(first), p), dtype=bool)
    masks[0::2] = first
    masks[1::2] = ~first
    pair_ids = np.repeat(np.arange(len(first)), 2)
    return LegacyCoalitions(masks=masks, pair_ids=pair_ids)


def _rejection_sample(p: int, n_pairs: int, rng: np.random.Generator) -> np.ndarray:
    """Pairs by drawing a size from the kernel's size law, then a uniform subset."""
    sizes = np.arange(1, p)
    size_prob = 1.0 / (sizes * (p - sizes))
    size_prob /= size_prob.sum()
    seen: set[bytes] = set()
    chosen: list[np.ndarray] = []
    while len(chosen) < n_pairs:
        for s in rng.choice(sizes, size=2 * (n_pairs - len(chosen)) + 8, p=size_prob):
            mask = np.zeros(p, dtype=bool)
            mask[rng.choice(p, size=int(s), replace=False)] = True
            if mask[-1]:  # store each pair by its member without the last player
                mask = ~mask
            key = np.packbits(mask).tobytes()
            if key not in seen:
                seen.add(key)
                chosen.append(mask)
                if len(chosen) == n_pairs:
                    break
    return np.array(chosen, dtype=bool)


class KernelShapley:
    """Constrained kernel-weighted least squares over sampled proper coalitions."""

    def __init__(self, coalitions: LegacyCoalitions) -> None:
        masks = np.asarray(coalitions.masks, dtype=bool)
        sizes = masks.sum(1)
        p = coalitions.n_players
        if p < 2 or np.any(sizes == 0) or np.any(sizes == p):
            raise ValueError("KernelShapley takes proper coalitions of at least two players")
        self.coalitions = coalitions
        clusters = (
            np.asarray(coalitions.pair_ids)
            if coalitions.pair_ids is not None
            else np.arange(len(masks))
        )
        order = np.argsort(clusters, kind="stable")
        counts = np.bincount(clusters)
        if np.any(counts[counts > 0] != counts.max()):
            raise ValueError("standard errors need clusters (pairs) of equal size")
        # Rows grouped by cluster: (G, c) blocks after a reshape.
        self._order, self._cluster_size = order, int(counts.max())
        z = masks[order].astype(np.float64)
        w = kernel_weights(sizes[order], p)
        x = z[:, :-1] - z[:, -1:]  # eliminate phi_p = delta - sum(others)
        sqrt_w = np.sqrt(w)
        # H maps the adjusted targets to the p-1 free estimates; pinv survives
        # sets too small to pin every player down (min-norm answer).
        h = np.linalg.pinv(sqrt_w[:, None] * x) * sqrt_w[None, :]
        self._free, self._last, self._z = h, z[:, -1], z
        self._influence = np.vstack([h, -h.sum(0, keepdims=True)])  # (p, K)
        # Leaving a cluster g out moves the estimate by H_g (I - L_gg)^-1 r_g, with
        # L_gg = X_g H_g its leverage block: the jackknife (CR3) correction that
        # keeps small samples from under-reporting their error.
        g, c = len(masks) // self._cluster_size, self._cluster_size
        lev = np.einsum("gak,kgb->gab", x.reshape(g, c, -1), h.reshape(-1, g, c))
        self._deflate = np.linalg.pinv(np.eye(c)[None] - lev)  # (G, c, c)

    def __call__(
        self, values: np.ndarray, v_empty: np.ndarray, v_full: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """values (K, D) of the sampled coalitions -> phi (D, p), standard errors (D, p)."""
        values = np.asarray(values, dtype=np.float64)[self._order]
        v_empty = np.asarray(v_empty, dtype=np.float64)
        delta = np.asarray(v_full, dtype=np.float64) - v_empty  # (D,)
        y = values - v_empty[None, :]  # (K, D)
        free = self._free @ (y - self._last[:, None] * delta[None, :])  # (p-1, D)
        phi = np.vstack([free, delta[None, :] - free.sum(0, keepdims=True)])  # (p, D)
        g, c = self._deflate.shape[0], self._cluster_size
        residuals = (y - self._z @ phi).reshape(g, c, -1)
        adjusted = np.einsum("gab,gbd->gad", self._deflate, residuals)  # (G, c, D)
        var = np.zeros_like(phi)
        for i in range(phi.shape[0]):
            per_cluster = np.einsum("ga,gad->gd", self._influence[i].reshape(g, c), adjusted)
            var[i] = (per_cluster**2).sum(0)
        var *= max(0.0, 1.0 - self.coalitions.coverage)
        return phi.T, np.sqrt(var).T
