"""Sampled Shapley values: constrained kernel-weighted least squares.

Weighted least squares ``min sum_S w(S) (v(S) - v0 - sum_{i in S} phi_i)^2``
with the Shapley kernel weights ``w(S)`` and efficiency ``sum phi = v(full) - v0``
as an exact constraint (the last player is eliminated, so float32 inputs cannot
bend it). When the coalitions are all proper coalitions, the answer is the exact
Shapley value (Lundberg & Lee 2017, Thm. 2).

Standard errors (sampled only) are the jackknife over complementary pairs, in its
closed cluster-robust form (CR3): ``se_i^2 = (1 - coverage) * sum_pairs
(H_i,g (I - L_gg)^-1 r_g)^2`` with ``H`` the map from values to estimates, ``r``
the residuals of the additive fit and ``L_gg`` the pair's leverage. The
finite-population factor ``1 - coverage`` makes them 0 once every coalition is in.
They estimate the spread due to the choice of coalitions and shrink like
``1/sqrt(K)``.
"""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.shapley.coalitions import CoalitionSet, kernel_weights


class KernelShapley:
    """Constrained kernel-weighted least squares over sampled proper coalitions."""

    def __init__(self, coalitions: CoalitionSet) -> None:
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

    def partial(self, values: np.ndarray, rows: slice) -> tuple[slice, np.ndarray]:
        """The values of the coalitions ``rows`` themselves (the residuals need them all)."""
        return rows, np.asarray(values, dtype=np.float64)

    def finish(
        self, partials: list[tuple[slice, np.ndarray]], v_empty: np.ndarray, v_full: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        values = np.vstack([part for _, part in sorted(partials, key=lambda p: p[0].start)])
        return self(values, v_empty, v_full)
