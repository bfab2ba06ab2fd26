"""Exact Shapley values from the values of all 2^p coalitions.

``phi_i = sum_{S not containing i} |S|!(p-|S|-1)!/p! (v(S + i) - v(S))``: a linear map
``phi = A v`` built once per ``p`` and applied to every duel, in float64 whatever
precision the value function ran in. Being linear, it splits over any partition of
the coalitions into batches: ``phi = sum_b A[:, b] v[b]`` (what a cluster backend
sends back instead of the values themselves).
"""

from __future__ import annotations

import math

import numpy as np

from prefshap_core.explain.shapley.coalitions import CoalitionSet
from prefshap_core.explain.shapley.sampled import ordered_sum


def exact_shapley_matrix(n_players: int) -> np.ndarray:
    """(p, 2^p) float64 ``A`` with ``phi = A @ v`` for v in bit order (empty .. full)."""
    p = n_players
    codes = np.arange(2**p, dtype=np.int64)
    member = ((codes[None, :] >> np.arange(p, dtype=np.int64)[:, None]) & 1).astype(bool)
    size = member.sum(0)
    # |S|!(p-|S|-1)!/p! = 1 / (p C(p-1, |S|))
    weight = np.array([1.0 / (p * math.comb(p - 1, s)) if s < p else 0.0 for s in range(p + 1)])
    with_i = weight[np.maximum(size - 1, 0)]  # S contains i: it is (S - i) + i
    without_i = weight[size]
    return np.where(member, with_i[None, :], -without_i[None, :])


class ExactShapley:
    """Exact Shapley values for an exact :class:`CoalitionSet` (bit order)."""

    def __init__(self, coalitions: CoalitionSet) -> None:
        if not coalitions.exact:
            raise ValueError("ExactShapley needs all 2^p coalitions")
        self.coalitions = coalitions
        self._matrix = exact_shapley_matrix(coalitions.n_players)

    def __call__(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """values (2^p, D), boundary rows included -> phi (D, p), zero standard errors."""
        values = np.asarray(values, dtype=np.float64)
        phi = (self._matrix @ values).T
        return phi, np.zeros_like(phi)

    # -- the estimator interface of the explainer (executor seam) ---------------------
    passes = 1

    def partial(
        self,
        values: np.ndarray,
        rows: slice,
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> np.ndarray:
        """(p, D) contribution of the coalitions ``rows`` (values (rows, D))."""
        return self._matrix[:, rows] @ np.asarray(values, dtype=np.float64)

    def finish(
        self,
        partials: list[np.ndarray],
        v_empty: np.ndarray,
        v_full: np.ndarray,
        phi: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """phi (D, p) from the partials of a partition, summed in order; zero errors."""
        phi = ordered_sum(partials).T
        return phi, np.zeros_like(phi)
