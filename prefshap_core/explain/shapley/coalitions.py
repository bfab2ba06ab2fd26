"""Coalitions of players: which ones an explanation evaluates.

A coalition is a boolean mask over the players (feature groups). Exact Pref-SHAP
enumerates all ``2^p`` of them (bit order); beyond ``exact_up_to`` players (the
options' :class:`~prefshap_core.explain.options.Shapley` choice) the explainer
samples proper coalitions in complementary pairs, stratified by size, with the
Shapley kernel weights

    w(S) = (p - 1) / (C(p, |S|) |S| (p - |S|))

(:mod:`stratified`; the estimator that goes with that design is :mod:`sampled`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prefshap_core.explain.options import default_samples
from prefshap_core.explain.shapley.stratified import SampledCoalitions, sample_stratified_coalitions

# Exact enumeration lists 2^p coalitions: beyond this it is refused.
_MAX_LISTED_PLAYERS = 20


@dataclass(frozen=True)
class CoalitionSet:
    """All ``2^p`` coalitions, shared by every duel of one explanation call.

    ``masks[k, i]`` says whether player ``i`` is in coalition ``k``: bit order (row
    ``k`` holds player ``i`` iff bit ``i`` of ``k`` is set), empty and full included.
    """

    masks: np.ndarray  # (K, p) bool
    exact: bool = True

    @property
    def n_players(self) -> int:
        return int(self.masks.shape[1])

    @property
    def n_coalitions(self) -> int:
        return int(self.masks.shape[0])


def masks_from_bits(bits: np.ndarray, n_players: int) -> np.ndarray:
    """(K, p) masks from integer codes (bit i = player i), p <= 62."""
    if n_players > 62:
        raise ValueError("integer coalition codes hold at most 62 players")
    bits = np.asarray(bits, dtype=np.int64)
    return ((bits[:, None] >> np.arange(n_players, dtype=np.int64)) & 1).astype(bool)


def bits_from_masks(masks: np.ndarray) -> np.ndarray:
    """Integer codes of (K, p) masks, p <= 62."""
    masks = np.asarray(masks, dtype=bool)
    if masks.shape[1] > 62:
        raise ValueError("integer coalition codes hold at most 62 players")
    return (masks.astype(np.int64) << np.arange(masks.shape[1], dtype=np.int64)).sum(1)


def all_coalitions(n_players: int) -> CoalitionSet:
    """All 2^p coalitions in bit order (row 0 empty, last row full)."""
    if n_players < 1:
        raise ValueError("need at least one player")
    if n_players > _MAX_LISTED_PLAYERS:
        raise ValueError(f"exact enumeration of {n_players} players (2^{n_players}) is too big")
    masks = masks_from_bits(np.arange(2**n_players, dtype=np.int64), n_players)
    return CoalitionSet(masks=masks)


def kernel_weights(sizes: np.ndarray, n_players: int) -> np.ndarray:
    """Shapley kernel weight w(S) of coalitions of the given sizes (inf at 0 and p).

    Computed in log space: C(p, |S|) exceeds a float beyond ~1,030 players. Weights
    that underflow to 0 there are below 1e-300 of the largest ones, so a float64
    weighted least squares could not have used them anyway.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    p = n_players
    out = np.full(sizes.shape, np.inf)
    proper = (sizes > 0) & (sizes < p)
    s = sizes[proper].astype(np.float64)
    log_binom = np.array(
        [math.lgamma(p + 1) - math.lgamma(k + 1) - math.lgamma(p - k + 1) for k in s],
        dtype=np.float64,
    )
    out[proper] = np.exp(math.log(p - 1) - log_binom - np.log(s) - np.log(p - s))
    return out


def coalition_count(n_players: int, exact_up_to: float, n_samples: int | None) -> int:
    """How many coalitions :func:`choose_coalitions` returns, without making them."""
    p = int(n_players)
    proper = 2**p - 2 if p <= 62 else None
    if p <= max(1, exact_up_to) or (
        n_samples is not None and proper is not None and n_samples >= proper
    ):
        return 2**p
    wanted = n_samples if n_samples is not None else default_samples(p)
    if proper is not None and wanted >= proper:
        return 2**p
    return 2 * max(1, (int(wanted) + 1) // 2)


def choose_coalitions(
    n_players: int, exact_up_to: float, n_samples: int | None, seed: int
) -> CoalitionSet | SampledCoalitions:
    """All coalitions up to ``exact_up_to`` players (or when the sample would hold them
    all), else ``n_samples`` stratified paired samples (``None``: :func:`default_samples`)."""
    if coalition_count(n_players, exact_up_to, n_samples) == 2**n_players:
        return all_coalitions(n_players)
    wanted = n_samples if n_samples is not None else default_samples(n_players)
    return sample_stratified_coalitions(n_players, wanted, seed)
