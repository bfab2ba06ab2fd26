"""Coalitions of players: exact enumeration, and paired Shapley-kernel sampling.

A coalition is a boolean mask over the players (feature groups). Exact Pref-SHAP
enumerates all ``2^p`` of them; beyond ``max_exact_players`` the explainer samples
proper coalitions (neither empty nor full) with probability proportional to the
Shapley kernel weight

    w(S) = (p - 1) / (C(p, |S|) |S| (p - |S|)),

always together with their complements (paired sampling: the pair's errors cancel
to first order), and without duplicates. Drawing with rejection of duplicates is
successive sampling without replacement, which is what the Efraimidis-Spirakis keys
below implement exactly whenever the coalitions can be listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Listing all pairs (for exact weighted sampling without replacement) costs
# 2^(p-1) rows; above this, sample with rejection (collisions are rare there).
_MAX_LISTED_PLAYERS = 20


@dataclass(frozen=True)
class CoalitionSet:
    """Coalitions to evaluate, shared by every duel of one explanation call.

    ``masks[k, i]`` says whether player ``i`` is in coalition ``k``. For sampled
    sets, rows ``2t`` and ``2t + 1`` are a coalition and its complement
    (``pair_ids``); for exact sets, all ``2^p`` coalitions in bit order (row ``k``
    holds player ``i`` iff bit ``i`` of ``k`` is set), including empty and full.
    """

    masks: np.ndarray  # (K, p) bool
    exact: bool
    pair_ids: np.ndarray | None = None  # (K,) cluster of each row (sampled sets)

    @property
    def n_players(self) -> int:
        return int(self.masks.shape[1])

    @property
    def n_coalitions(self) -> int:
        return int(self.masks.shape[0])

    @property
    def coverage(self) -> float:
        """Fraction of the 2^p - 2 proper coalitions present (1.0 when exact)."""
        if self.exact:
            return 1.0
        p = self.n_players
        if p > 1000:  # 2^p overflows a float; the fraction is below 1e-290 anyway
            return 0.0
        proper = 2.0**p - 2.0
        return min(1.0, self.n_coalitions / proper) if proper > 0 else 1.0


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
    return CoalitionSet(masks=masks, exact=True)


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


def sample_paired_coalitions(n_players: int, n_samples: int, seed: int) -> CoalitionSet:
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
    return CoalitionSet(masks=masks, exact=False, pair_ids=pair_ids)


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


def coalition_count(n_players: int, max_exact_players: int, n_samples: int | None) -> int:
    """How many coalitions :func:`choose_coalitions` returns, without making them."""
    p = int(n_players)
    proper = 2**p - 2 if p <= 62 else None
    if p <= max(1, max_exact_players) or (
        n_samples is not None and proper is not None and n_samples >= proper
    ):
        return 2**p
    wanted = n_samples if n_samples is not None else 2 * p + 2048
    if proper is not None and wanted >= proper:
        return 2**p
    return 2 * max(1, (int(wanted) + 1) // 2)


def choose_coalitions(
    n_players: int, max_exact_players: int, n_samples: int | None, seed: int
) -> CoalitionSet:
    """All coalitions up to ``max_exact_players`` players (or when the sample would hold
    them all), else ``n_samples`` paired samples (``None``: ``2p + 2048``)."""
    if coalition_count(n_players, max_exact_players, n_samples) == 2**n_players:
        return all_coalitions(n_players)
    wanted = n_samples if n_samples is not None else 2 * n_players + 2048
    return sample_paired_coalitions(n_players, wanted, seed)
