"""Sampled Shapley values: constrained kernel-weighted least squares.

Weighted least squares ``min sum_S w(S) (v(S) - v0 - sum_{i in S} phi_i)^2``
with the Shapley kernel weights ``w(S)`` and efficiency ``sum phi = v(full) - v0``
as an exact constraint (the last player is eliminated, so float32 inputs cannot
bend it). When the coalitions are all proper coalitions, the answer is the exact
Shapley value (Lundberg & Lee 2017, Thm. 2).

Both are computed in two passes of additive statistics over batches of rows
(:meth:`KernelShapley.partial_statistics`), so a cluster's workers send back
``p x duels`` numbers per batch, never the coalition values.

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
        self._position = np.empty_like(order)  # each row's place in cluster order
        self._position[order] = np.arange(len(order))
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
        rows = np.arange(self.coalitions.n_coalitions)
        phi = self.solve(self.partial_statistics(values, rows, v_empty, v_full), v_empty, v_full)
        return self.finish(self.partial_statistics(values, rows, v_empty, v_full, phi), phi)

    # -- two passes over batches of rows (the executor seam) ----------------------------
    def partial_statistics(
        self,
        values: np.ndarray,
        rows: np.ndarray,
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> np.ndarray:
        """Additive statistics of the coalitions ``rows`` (values (B, D)).

        First pass (``phi`` None): (p - 1, D), the free estimates' share of these rows
        (linear in the values). Second pass (``phi`` (D, p) from :meth:`solve`): (p, D),
        the squared jackknife terms of the clusters in ``rows``, which must hold whole
        clusters (pairs).
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        position = self._position[rows]  # rows in cluster order
        values = np.asarray(values, dtype=np.float64)
        v_empty = np.asarray(v_empty, dtype=np.float64)
        delta = np.asarray(v_full, dtype=np.float64) - v_empty  # (D,)
        y = values - v_empty[None, :]  # (B, D)
        if phi is None:
            return self._free[:, position] @ (y - self._last[position, None] * delta[None, :])
        c = self._cluster_size
        order = np.argsort(position, kind="stable")
        sorted_position = position[order]
        clusters = sorted_position[::c] // c
        if len(rows) % c or not np.array_equal(
            sorted_position, (clusters[:, None] * c + np.arange(c)).reshape(-1)
        ):
            raise ValueError("second-pass batches must hold whole clusters (pairs)")
        fit = np.asarray(phi, dtype=np.float64).T  # (p, D)
        residuals = (y[order] - self._z[sorted_position] @ fit).reshape(len(clusters), c, -1)
        adjusted = np.einsum("gab,gbd->gad", self._deflate[clusters], residuals)  # (G_b, c, D)
        influence = self._influence[:, sorted_position].reshape(-1, len(clusters), c)
        out = np.zeros_like(fit)
        for i in range(fit.shape[0]):
            per_cluster = np.einsum("ga,gad->gd", influence[i], adjusted)
            out[i] = (per_cluster**2).sum(0)
        return out

    def solve(self, first: np.ndarray, v_empty: np.ndarray, v_full: np.ndarray) -> np.ndarray:
        """phi (D, p) from the summed first-pass statistics (efficiency exact)."""
        delta = np.asarray(v_full, dtype=np.float64) - np.asarray(v_empty, dtype=np.float64)
        free = np.asarray(first, dtype=np.float64)
        return np.vstack([free, delta[None, :] - free.sum(0, keepdims=True)]).T

    def finish(self, second: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(phi, se), both (D, p), from the summed second-pass statistics."""
        var = np.asarray(second, dtype=np.float64) * max(0.0, 1.0 - self.coalitions.coverage)
        return np.asarray(phi, dtype=np.float64), np.sqrt(var).T
