"""Shapley values with calibrated standard errors from sampled coalitions.

The coalitions come from the stratified paired design of
:mod:`prefshap_core.explain.shapley.stratified` (its docstring describes the strata).

Estimator. Kernel WLS with Horvitz-Thompson weights: ``w(S)`` in whole strata and
``W_h / (2 n_h)`` per sampled coalition of sampling stratum ``h`` (``n_h`` pairs), so
the weighted normal equations are unbiased for the complete ones; efficiency is an
exact constraint (the last player is eliminated). With every coalition in, this is
the exact Shapley value; otherwise it is consistent.

Standard errors. The linearisation (sandwich) of the WLS under stratified
sampling: ``phi - phi_true ~ A^-1 sum_k omega_k x_k r_k``; the pair totals ``e_g`` of
``A^-1 omega_k x_k r_k`` vary only inside sampled strata, so

    var(phi_i) = sum_h fpc_h n_h / (n_h - 1) sum_{g in h} (e_gi - mean_h e_i)^2,

``fpc_h = 1 - n_h / N_h`` without replacement (1 with replacement, 0 for whole
strata). Each pair's residuals are scaled by ``(1 - h_g)^-1/2``, ``h_g`` its leverage
(HC2), as fitted residuals are smaller than the errors they stand for. With
every coalition in, the standard error is 0; with fewer independent pairs than
players (phi not identified), NaN.

Two passes. The residuals ``r`` are of the fitted phi, so the computation has two
passes over the coalition values (``partial_statistics``): the first sums ``A^-1
X' W t`` (linear in the values), the second, given phi, sums per stratum the pair
totals and their squares. Both are additive over any partition of the rows into
batches of whole pairs. A single pass would need the cross terms between values and
the unknown phi, ``p^2`` numbers per duel and stratum instead of ``p``.
"""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.shapley.stratified import SampledCoalitions

# Residuals of the fit are shrunk by their pair's leverage h; scaling them by
# (1 - h)^-1/2 (HC2 / Bell-McCaffrey) undoes that on average. It matters when the
# sampled pairs are few for the number of players (p = 30, 100 samples: coverage
# 0.71 without it, 0.92 with; (1 - h)^-1, the jackknife, over-covers at 0.99).
_LEVERAGE_POWER = 0.5


def _solve_gram(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, bool]:
    """(gram^-1 rhs, True) for the SPD normal matrix; (the min-norm answer, False) when
    a design too small to pin every player down leaves it singular."""
    try:
        np.linalg.cholesky(gram)
        if np.linalg.cond(gram) < 1e12:
            return np.linalg.solve(gram, rhs), True
    except np.linalg.LinAlgError:
        pass
    return np.linalg.pinv(gram, hermitian=True) @ rhs, False


class SampledShapley:
    """Shapley values and standard errors from the values of a :class:`SampledCoalitions`.

    ``__call__`` is the two passes of :meth:`partial_statistics` over all rows at
    once; a batched (e.g. distributed) caller runs them itself::

        first = sum(est.partial_statistics(v[b], b, v0, v1) for b in batches)
        phi = est.solve(first, v0, v1)
        second = sum(est.partial_statistics(v[b], b, v0, v1, phi=phi) for b in batches)
        phi, se = est.finish_totals(second, phi)

    Batches may be any partition of the rows for the first pass; for the second each
    batch must hold whole pairs (rows ``2t`` and ``2t + 1`` together). Every pass is
    also separable by duel, so columns can be chunked as well.
    """

    def __init__(self, coalitions: SampledCoalitions) -> None:
        masks = np.asarray(coalitions.masks, dtype=bool)
        p = masks.shape[1]
        sizes = masks.sum(1)
        if p < 2 or np.any(sizes == 0) or np.any(sizes == p):
            raise ValueError("SampledShapley takes proper coalitions of at least two players")
        if len(masks) % 2 or not np.array_equal(masks[0::2], ~masks[1::2]):
            raise ValueError("rows 2t and 2t + 1 must be a coalition and its complement")
        self.coalitions = coalitions
        z = masks.astype(np.float64)
        self._x = z[:, :-1] - z[:, -1:]  # eliminate phi_p = delta - sum(others)
        self._last = z[:, -1]
        self._omega = np.asarray(coalitions.weights, dtype=np.float64)
        gram = self._x.T @ (self._omega[:, None] * self._x)
        # d phi / d (omega_k t_k) for every row: (X A^-1, then minus its row sum for
        # the eliminated player).
        free, self.identified = _solve_gram(gram, self._x.T)
        free = free.T
        self._influence = np.hstack([free, -free.sum(1, keepdims=True)])  # (K, p)
        leverage = self._omega * np.einsum("kj,kj->k", self._x, free)
        pair_leverage = leverage[0::2] + leverage[1::2]
        self._residual_scale = np.repeat(
            np.clip(1.0 - pair_leverage, 1e-3, None) ** -_LEVERAGE_POWER, 2
        )
        n = np.asarray(coalitions.stratum_samples, dtype=np.float64)
        fpc = np.asarray(coalitions.stratum_fpc, dtype=np.float64)
        self._sampled = np.flatnonzero((fpc > 0) & (n >= 2))
        # Without-replacement variance of a stratum total from its pair totals.
        self._factor = fpc[self._sampled] * n[self._sampled] / (n[self._sampled] - 1)
        self._samples = n[self._sampled]
        self._stratum = np.asarray(coalitions.stratum_ids)

    @property
    def n_players(self) -> int:
        return int(self._influence.shape[1])

    def _targets(self, values, rows, v_empty, v_full) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        v_empty = np.asarray(v_empty, dtype=np.float64)
        delta = np.asarray(v_full, dtype=np.float64) - v_empty
        if values.shape != (len(rows), delta.shape[0]):
            raise ValueError(f"values must be ({len(rows)}, {delta.shape[0]}), got {values.shape}")
        return values - v_empty[None, :] - self._last[rows, None] * delta[None, :]

    def partial_statistics(
        self,
        values_batch: np.ndarray,
        rows_batch: np.ndarray,
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> np.ndarray:
        """Additive statistics of a batch of rows (values (B, D) of rows (B,)).

        First pass (``phi`` None): (p, D). Second pass (``phi`` (D, p) from
        :meth:`solve`): (H, 2, p, D), per sampled stratum the sum of the pair totals
        of the linearised errors and the sum of their squares.
        """
        rows = np.asarray(rows_batch, dtype=np.int64).reshape(-1)
        t = self._targets(values_batch, rows, v_empty, v_full)  # (B, D)
        if phi is None:
            return self._influence[rows].T @ (self._omega[rows, None] * t)
        beta = np.asarray(phi, dtype=np.float64)[:, :-1].T  # (p - 1, D)
        q = (self._omega * self._residual_scale)[rows, None] * (t - self._x[rows] @ beta)
        order = np.argsort(rows, kind="stable")
        partner = np.searchsorted(rows[order], rows ^ 1)
        partner = np.minimum(partner, len(rows) - 1)
        if not np.array_equal(rows[order][partner], rows ^ 1):
            raise ValueError("second-pass batches must hold whole pairs (rows 2t and 2t + 1)")
        partner = order[partner]
        out = np.zeros((len(self._sampled), 2, self.n_players, t.shape[1]))
        first = np.flatnonzero(rows % 2 == 0)
        stratum = self._stratum[rows[first]]
        for j, h in enumerate(self._sampled):
            a = first[stratum == h]
            b = partner[a]
            ga, gb, qa, qb = self._influence[rows[a]], self._influence[rows[b]], q[a], q[b]
            out[j, 0] = ga.T @ qa + gb.T @ qb
            out[j, 1] = (
                (ga * ga).T @ (qa * qa) + 2 * (ga * gb).T @ (qa * qb) + (gb * gb).T @ (qb * qb)
            )
        return out

    def solve(self, first: np.ndarray, v_empty: np.ndarray, v_full: np.ndarray) -> np.ndarray:
        """phi (D, p) from the summed first-pass statistics."""
        phi = np.array(first, dtype=np.float64)
        phi[-1] += np.asarray(v_full, dtype=np.float64) - np.asarray(v_empty, dtype=np.float64)
        return phi.T

    def finish_totals(self, second: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(phi, se), both (D, p), from the summed second-pass statistics."""
        second = np.asarray(second, dtype=np.float64)
        totals, squares = second[:, 0], second[:, 1]
        spread = squares - totals**2 / self._samples[:, None, None]
        var = np.einsum("h,hpd->pd", self._factor, spread)
        se = np.sqrt(np.maximum(var, 0.0)).T
        if not self.identified:  # fewer independent pairs than players: no error bar
            se = np.full_like(se, np.nan)
        return np.asarray(phi, dtype=np.float64), se

    def __call__(
        self, values: np.ndarray, v_empty: np.ndarray, v_full: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """values (K, D) of the coalitions -> phi (D, p), standard errors (D, p)."""
        rows = np.arange(self.coalitions.n_coalitions)
        phi = self.solve(self.partial_statistics(values, rows, v_empty, v_full), v_empty, v_full)
        second = self.partial_statistics(values, rows, v_empty, v_full, phi=phi)
        return self.finish_totals(second, phi)

    # -- the estimator interface of the explainer (executor seam) ---------------------
    passes = 2

    def partial(
        self,
        values: np.ndarray,
        rows: slice,
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> np.ndarray:
        """The statistics of the coalitions ``rows`` (first pass, or second given phi)."""
        index = np.arange(rows.start, rows.stop)
        return self.partial_statistics(values, index, v_empty, v_full, phi=phi)

    def solve_partials(
        self, partials: list[np.ndarray], v_empty: np.ndarray, v_full: np.ndarray
    ) -> np.ndarray:
        """phi (D, p) from the first pass's partials, summed in order."""
        return self.solve(ordered_sum(partials), v_empty, v_full)

    def finish(
        self,
        partials: list[np.ndarray],
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(phi, se) from the second pass's partials, summed in order."""
        assert phi is not None, "the second pass needs phi from solve_partials"
        return self.finish_totals(ordered_sum(partials), phi)


def ordered_sum(parts: list[np.ndarray]) -> np.ndarray:
    """The partials of a partition summed in their order (every executor alike)."""
    total = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total = total + part
    return total
