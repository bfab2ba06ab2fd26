"""The stratified design of paired coalitions that the sampled estimator uses.

A proper coalition ``S`` and its complement form a pair; the pairs fall into
strata by their size pair ``{s, p - s}`` (``s = 1 .. floor(p/2)``). Stratum ``s``
holds ``N_s = C(p, s)`` pairs (``C(p, s) / 2`` when ``2s = p``) and the total
Shapley-kernel weight ``W_s = 2 (p - 1) / (s (p - s))`` (half that when ``2s = p``).
The pair budget is allocated to strata in proportion to ``W_s``, capped at ``N_s``;
a capped stratum is taken whole. Because ``N_s / W_s`` grows towards the middle,
the whole strata are the outer ones (sizes 1 and p-1, then 2 and p-2, ...), as in
KernelSHAP. The rest of the budget is drawn uniformly without replacement inside
each remaining stratum. Strata whose share would be below a few pairs are merged
with their neighbours into one sampling stratum in which a pair is drawn with
probability proportional to its weight, with replacement (at most
``_MAX_SAMPLED_STRATA`` sampling strata, so the variance has degrees of freedom
and the statistics stay small for thousands of players).

Each coalition carries its Horvitz-Thompson estimation weight; the estimator and its
standard errors are in :mod:`prefshap_core.explain.shapley.sampled`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

# Sampling strata get at least this many pairs (variance needs two; a few more keep
# it stable), and there are at most this many of them.
_MIN_PAIRS_PER_STRATUM = 4
_MAX_SAMPLED_STRATA = 32
# A size stratum with at most this many pairs is listed, then subsampled; a larger
# one is sampled by rejecting repeats (few, as it is then much bigger than the draw).
_LIST_AT_MOST = 50_000


@dataclass(frozen=True, eq=False)
class SampledCoalitions:
    """Coalitions of one stratified design, shared by every duel of a call.

    Rows ``2t`` and ``2t + 1`` are a coalition and its complement (pair ``t``).
    ``weights`` are the estimation (Horvitz-Thompson) weights. Per stratum ``h``
    (index into the ``stratum_*`` arrays): the smaller coalition sizes it covers
    ``[stratum_min_size, stratum_max_size]``, its pairs ``stratum_population``
    (float, ``inf`` beyond float range), the pairs drawn ``stratum_samples`` and the
    finite-population factor ``stratum_fpc`` (0 whole, ``1 - n/N`` without
    replacement, 1 with replacement).
    """

    masks: np.ndarray  # (K, p) bool
    pair_ids: np.ndarray  # (K,) int
    weights: np.ndarray  # (K,) float64
    stratum_ids: np.ndarray  # (K,) int
    stratum_min_size: np.ndarray  # (H,) int
    stratum_max_size: np.ndarray  # (H,) int
    stratum_population: np.ndarray  # (H,) float64
    stratum_samples: np.ndarray  # (H,) int
    stratum_fpc: np.ndarray  # (H,) float64
    exact: bool  # every proper coalition is in

    @property
    def n_players(self) -> int:
        return int(self.masks.shape[1])

    @property
    def n_coalitions(self) -> int:
        return int(self.masks.shape[0])


def _pairs_in_stratum(p: int, s: int) -> int:
    return math.comb(p, s) // 2 if 2 * s == p else math.comb(p, s)


def _stratum_weight(p: int, s: int) -> float:
    """Total Shapley-kernel weight of the coalitions of sizes s and p - s."""
    return (p - 1) / (s * (p - s)) * (1.0 if 2 * s == p else 2.0)


def _listed_pairs(p: int, s: int) -> np.ndarray:
    """Every pair of stratum s by its representative: the size-s member (with
    player 0 when ``2s = p``)."""
    if 2 * s == p:
        subsets = [(0, *rest) for rest in itertools.combinations(range(1, p), s - 1)]
    else:
        subsets = list(itertools.combinations(range(p), s))
    masks = np.zeros((len(subsets), p), dtype=bool)
    masks[np.repeat(np.arange(len(subsets)), s), np.array(subsets).reshape(-1)] = True
    return masks


def _random_pairs(p: int, s: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent uniform pairs of stratum s (representatives as above)."""
    chosen = np.argpartition(rng.random((n, p)), s - 1, axis=1)[:, :s]
    masks = np.zeros((n, p), dtype=bool)
    np.put_along_axis(masks, chosen, True, axis=1)
    if 2 * s == p:
        masks[~masks[:, 0]] = ~masks[~masks[:, 0]]
    return masks


def _pairs_without_replacement(p: int, s: int, n: int, rng: np.random.Generator) -> np.ndarray:
    population = _pairs_in_stratum(p, s)
    if population <= _LIST_AT_MOST:
        listed = _listed_pairs(p, s)
        return listed[np.sort(rng.choice(population, size=n, replace=False))]
    # Uniform draws with repeats rejected are a simple random sample.
    seen: set[bytes] = set()
    chosen: list[np.ndarray] = []
    while len(chosen) < n:
        for mask in _random_pairs(p, s, 2 * (n - len(chosen)) + 8, rng):
            key = np.packbits(mask).tobytes()
            if key not in seen:
                seen.add(key)
                chosen.append(mask)
                if len(chosen) == n:
                    break
    return np.array(chosen, dtype=bool)


def _pairs_with_replacement(
    p: int, sizes: list[int], n: int, rng: np.random.Generator
) -> np.ndarray:
    """n pairs, each of stratum s with probability W_s / sum W, then uniform in it:
    a pair's probability is proportional to its kernel weight."""
    weight = np.array([_stratum_weight(p, s) for s in sizes])
    drawn = rng.choice(len(sizes), size=n, p=weight / weight.sum())
    masks = np.zeros((n, p), dtype=bool)
    for k, s in enumerate(sizes):
        rows = np.flatnonzero(drawn == k)
        if len(rows):
            masks[rows] = _random_pairs(p, s, len(rows), rng)
    return masks


def _group_sampled_sizes(shares: np.ndarray, budget: int) -> list[list[int]]:
    """Consecutive size strata merged until each group's share reaches the minimum."""
    minimum = max(_MIN_PAIRS_PER_STRATUM, math.ceil(budget / _MAX_SAMPLED_STRATA))
    groups: list[list[int]] = []
    current: list[int] = []
    total = 0.0
    for k, share in enumerate(shares):
        current.append(k)
        total += share
        if total >= minimum:
            groups.append(current)
            current, total = [], 0.0
    if current:
        if groups:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


def _largest_remainder(shares: np.ndarray, total: int) -> np.ndarray:
    counts = np.floor(shares).astype(np.int64)
    extra = total - int(counts.sum())
    if extra > 0:
        counts[np.argsort(-(shares - counts), kind="stable")[:extra]] += 1
    return counts


def sample_stratified_coalitions(n_players: int, n_samples: int, seed: int) -> SampledCoalitions:
    """About ``n_samples`` proper coalitions in complementary pairs, stratified by size.

    ``n_samples`` is rounded up to whole pairs (and to at least two sampled pairs when
    any stratum is sampled). At or above the number of proper coalitions, all of
    them are returned with their kernel weights (the estimate is then exact).
    Works for any number of players: nothing lists the ``2^p`` coalitions.
    """
    p = int(n_players)
    if p < 2:
        raise ValueError("sampling needs at least two players")
    rng = np.random.default_rng(seed)
    sizes = list(range(1, p // 2 + 1))
    population = [_pairs_in_stratum(p, s) for s in sizes]
    weight = [_stratum_weight(p, s) for s in sizes]
    budget = max(1, math.ceil(int(n_samples) / 2))
    weight_left = sum(weight)
    n_whole = 0
    # Proportional allocation capped at the stratum: whole strata from the outside in.
    while n_whole < len(sizes) and budget * weight[n_whole] / weight_left >= population[n_whole]:
        budget -= population[n_whole]
        weight_left -= weight[n_whole]
        n_whole += 1

    firsts: list[np.ndarray] = []
    row_weight: list[float] = []
    strata: list[tuple[int, int, float, int, float]] = []  # min, max, N, n, fpc
    for k in range(n_whole):
        s = sizes[k]
        firsts.append(_listed_pairs(p, s))
        row_weight.append(weight[k] / (2 * population[k]))  # = w(S), the kernel weight
        strata.append((s, s, float(population[k]), population[k], 0.0))

    if n_whole < len(sizes):
        budget = max(budget, 2)
        shares = np.array([budget * w / weight_left for w in weight[n_whole:]])
        groups = _group_sampled_sizes(shares, budget)
        counts = _largest_remainder(np.array([shares[g].sum() for g in groups]), budget)
        for group, n in zip(groups, counts, strict=True):
            group_sizes = [sizes[n_whole + k] for k in group]
            group_population = sum(population[n_whole + k] for k in group)
            group_weight = sum(weight[n_whole + k] for k in group)
            if len(group) == 1:
                s = group_sizes[0]
                firsts.append(_pairs_without_replacement(p, s, int(n), rng))
                fpc = 1.0 - int(n) / group_population
            else:
                firsts.append(_pairs_with_replacement(p, group_sizes, int(n), rng))
                fpc = 1.0
            row_weight.append(group_weight / (2 * int(n)))
            n_pop = float(group_population) if group_population < 2**1023 else math.inf
            strata.append((group_sizes[0], group_sizes[-1], n_pop, int(n), fpc))

    pair_counts = [len(f) for f in firsts]
    first = np.concatenate(firsts)
    masks = np.empty((2 * len(first), p), dtype=bool)
    masks[0::2], masks[1::2] = first, ~first
    pair_stratum = np.repeat(np.arange(len(strata)), pair_counts)
    stratum_table = list(zip(*strata, strict=True))
    return SampledCoalitions(
        masks=masks,
        pair_ids=np.repeat(np.arange(len(first)), 2),
        weights=np.repeat(np.array(row_weight), 2 * np.array(pair_counts)),
        stratum_ids=np.repeat(pair_stratum, 2),
        stratum_min_size=np.array(stratum_table[0], dtype=np.int64),
        stratum_max_size=np.array(stratum_table[1], dtype=np.int64),
        stratum_population=np.array(stratum_table[2], dtype=np.float64),
        stratum_samples=np.array(stratum_table[3], dtype=np.int64),
        stratum_fpc=np.array(stratum_table[4], dtype=np.float64),
        exact=bool(all(fpc == 0.0 for *_, fpc in strata)),
    )
