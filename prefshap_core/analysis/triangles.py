"""Cyclic triangles of a skew-symmetric matrix: the strongest ones, and how many.

``M`` is skew-symmetric (``M_ab = -M_ba``): the model's preferences ``g(a, b)``, or
the data's net wins (wins of a over b minus wins of b over a). ``a`` beats ``b``
when ``M_ab > 0``. A *cyclic triangle* is ``a > b > c > a``; its strength is
``M_ab + M_bc + M_ca`` (all three terms positive). Each triangle is listed once,
from its smallest index along the cycle: ``(a, b, c)`` with ``a < b`` and ``a < c``.

Search without a triple loop: for each anchor ``a`` (the smallest index), the
candidates are ``b`` among the later items ``a`` beats and ``c`` among the later
items that beat ``a``; one vectorised block ``M[b, c]`` per anchor finds every
cycle through ``a``. Per-item bounds (``M_bc`` is at most the largest entry of row
``b`` and of column ``c``) drop the candidates that cannot reach the current ``k``-th
strength, which a first pass over the items with the most extreme preferences sets
high from the start. Ties in strength are broken by ``(a, b, c)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.progress import Progress, ensure_progress


@dataclass(frozen=True)
class Cycles:
    """The top cyclic triangles: rows of ``(a, b, c)`` indices and their strengths."""

    items: np.ndarray  # (k, 3) int64, a > b > c > a, a the smallest index
    strength: np.ndarray  # (k,) M_ab + M_bc + M_ca, decreasing


def top_cycles(matrix: np.ndarray, k: int, *, progress: Progress | None = None) -> Cycles:
    """The ``k`` strongest cyclic triangles of the skew-symmetric ``matrix``."""
    m = np.asarray(matrix, dtype=np.float64)
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    progress = ensure_progress(progress)
    n = m.shape[0]
    if k == 0 or n < 3:
        return Cycles(*_best([], [], k, keep_ties=False))
    # A first threshold from the items with the most extreme preferences: their
    # cycles are real cycles, so the k-th of them bounds the k-th overall from below.
    seed_items, seed_strength = [], []
    if n > _SEED_ITEMS:
        extreme = np.sort(np.argsort(-(m.max(axis=1) - m.min(axis=1)))[:_SEED_ITEMS])
        seed = _search(m[np.ix_(extreme, extreme)], k, -np.inf)
        seed_items, seed_strength = [extreme[seed.items]], [seed.strength]
    threshold = (
        float(seed_strength[0][k - 1]) if seed_items and seed_strength[0].size >= k else -np.inf
    )
    found = _search(m, k, threshold, progress)
    items, strength = _best([*seed_items, found.items], [*seed_strength, found.strength], k,
                            keep_ties=False)  # fmt: skip
    progress.update("Searching cyclic triangles", 1.0)
    return Cycles(items=items, strength=strength)


_SEED_ITEMS = 96


def _search(m: np.ndarray, k: int, threshold: float, progress: Progress | None = None) -> Cycles:
    """Every cyclic triangle among the k strongest with strength >= ``threshold``."""
    n = m.shape[0]
    found_items: list[np.ndarray] = []
    found_strength: list[np.ndarray] = []
    n_found = 0
    beats = m > 0
    # M[b, c] <= max of row b, and <= max of column c: per-item bounds that drop the
    # b's and c's that cannot reach the threshold before the block is gathered.
    row_max, col_max = m.max(axis=1), m.max(axis=0)
    for a in range(n - 2):
        if progress is not None and a % 64 == 0:
            progress.update("Searching cyclic triangles", a / n)
        later = np.arange(a + 1, n)
        out = later[beats[a, a + 1 :]]  # a > b
        into = later[beats[a + 1 :, a]]  # c > a
        if out.size == 0 or into.size == 0:
            continue
        first, last = m[a, out], m[into, a]
        if threshold > -np.inf:
            keep_b = first + row_max[out] + last.max() >= threshold
            keep_c = last + col_max[into] + first.max() >= threshold
            out, first = out[keep_b], first[keep_b]
            into, last = into[keep_c], last[keep_c]
            if out.size == 0 or into.size == 0:
                continue
        block = m[out][:, into]
        strength = first[:, None] + block + last[None, :]
        rows, cols = np.nonzero((block > 0) & (strength >= threshold))
        if rows.size == 0:
            continue
        values = strength[rows, cols]
        if values.size > k:  # keep the k best of this anchor (and ties with the k-th)
            kth = np.partition(values, values.size - k)[values.size - k]
            sel = values >= kth
            rows, cols, values = rows[sel], cols[sel], values[sel]
        found_items.append(np.stack([np.full(rows.size, a), out[rows], into[cols]], axis=1))
        found_strength.append(values)
        n_found += values.size
        if n_found >= k:
            merged_items, merged_strength = _best(found_items, found_strength, k, keep_ties=True)
            found_items, found_strength = [merged_items], [merged_strength]
            n_found = merged_strength.size
            threshold = max(threshold, float(merged_strength[min(k, n_found) - 1]))
    items, strength = _best(found_items, found_strength, k, keep_ties=True)
    return Cycles(items=items, strength=strength)


def count_cycles(matrix: np.ndarray) -> int:
    """How many cyclic triangles ``matrix`` has: trace(B^3) / 3, B = [M > 0]."""
    beats = (np.asarray(matrix) > 0).astype(np.float32)
    # Path counts stay below n (exact in float32); the sum is taken in float64.
    two_steps = beats @ beats
    return round(float(np.sum(two_steps * beats.T, dtype=np.float64)) / 3)


def _best(
    items: list[np.ndarray], strength: list[np.ndarray], k: int, *, keep_ties: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct triangles sorted by strength (then indices), cut to ``k`` (with
    the ties of the k-th when ``keep_ties``)."""
    if not items:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0)
    triples = np.concatenate(items).astype(np.int64).reshape(-1, 3)
    values = np.concatenate(strength)
    triples, first = np.unique(triples, axis=0, return_index=True)
    values = values[first]
    order = np.lexsort((triples[:, 2], triples[:, 1], triples[:, 0], -values))
    triples, values = triples[order], values[order]
    if values.size <= k:
        return triples, values
    if keep_ties:
        keep = values >= values[k - 1]
        return triples[keep], values[keep]
    return triples[:k], values[:k]
