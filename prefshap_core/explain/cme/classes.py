"""Rows that a coalition cannot tell apart: the class bookkeeping of every CME backend.

For a coalition ``S`` two rows are in the same *S class* when they agree on the
columns of ``S`` (and in the same *Sc class* when they agree on the others). The
coalition's kernel and conditional mean embedding only see classes, so each backend
solves over the pool's S classes (``r``, often far fewer than ``n``) and gathers.

A :class:`Universe` merges the pool, the centres and one call's query rows, with
the pool's rows first. Class labels are *pool first* and ordered by value within
the pool and within the rest, so the pool's classes (and the centres' Sc classes)
have the same labels whatever queries are added: that is what lets a backend keep a
coalition's factorization across calls (:mod:`embedding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.explain.cme.base import CMEProblem, unique_rows


def _first_of_each(labels: np.ndarray, n_labels: int) -> np.ndarray:
    first = np.empty(n_labels, dtype=np.int64)
    first[labels[::-1]] = np.arange(len(labels))[::-1]
    return first


@dataclass
class CoalitionClasses:
    """Index bookkeeping of one coalition over a :class:`Universe` (NumPy)."""

    labels: np.ndarray  # (universe,) S class, pool classes first
    r: int  # number of pool S classes
    first: np.ndarray  # (classes,) a universe row of each S class
    q_cls: np.ndarray  # (q',) distinct S classes of the queries (sorted: pool first)
    q_col: np.ndarray  # (queries,) column of each query in Gamma
    sc_first: np.ndarray  # (t,) a universe row of each Sc class (pool classes first)
    t_pool: int  # number of pool Sc classes
    sc_centre: np.ndarray  # (t_P,) Sc classes present among the centres
    sc_row: np.ndarray  # (centres,) index into sc_centre
    pair_s: np.ndarray  # pool (S class, Sc class) pairs and their total weight
    pair_sc: np.ndarray
    pair_w: np.ndarray


class Universe:
    """Pool, centres and queries as one table of distinct rows, pool rows first."""

    def __init__(self, problem: CMEProblem, queries: np.ndarray, compute: Compute) -> None:
        pool = np.atleast_2d(np.asarray(problem.pool, dtype=np.float64))
        centres = np.atleast_2d(np.asarray(problem.centres, dtype=np.float64))
        weights = problem.weights
        n_pool, n_centres = len(pool), len(centres)
        stacked = np.vstack([pool, centres, np.atleast_2d(queries)])
        uniq, inverse = unique_rows(stacked)
        in_pool = np.zeros(len(uniq), dtype=bool)
        in_pool[inverse[:n_pool]] = True
        order = np.concatenate([np.flatnonzero(in_pool), np.flatnonzero(~in_pool)])
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        inverse = position[inverse]
        self.rows = uniq[order]
        self.n_pool = int(in_pool.sum())  # rows 0..n_pool-1 are the pool's
        self.pool_weights = np.bincount(inverse[:n_pool], weights=weights, minlength=self.n_pool)
        self.centre_rows = inverse[n_pool : n_pool + n_centres]
        self.query_rows = inverse[n_pool + n_centres :]
        self.column_player = np.asarray(problem.column_player, dtype=np.int64)
        self.n_players = int(self.column_player.max()) + 1
        # Per-player codes: equal codes = equal rows on that player's columns.
        self._codes = np.stack(
            [unique_rows(self.rows[:, self.column_player == g])[1] for g in range(self.n_players)],
            axis=1,
        )
        self._cardinality = self._codes.max(0) + 1
        self.scaled = compute.tensor(self.rows / np.asarray(problem.lengthscales, np.float64))

    def _pool_first_labels(self, mask: np.ndarray) -> tuple[np.ndarray, int]:
        """Labels, equal iff rows agree on the mask's players; the pool's first."""
        key = np.zeros(len(self.rows), dtype=np.int64)
        for g in np.flatnonzero(mask):
            key = key * self._cardinality[g] + self._codes[:, g]
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
        pool_keys = np.unique(key[: self.n_pool])
        remap = np.full(int(key.max()) + 1, -1, dtype=np.int64)
        remap[pool_keys] = np.arange(len(pool_keys))
        rest = np.flatnonzero(remap < 0)
        remap[rest] = len(pool_keys) + np.arange(len(rest))
        return remap[key], len(pool_keys)

    def classes(self, mask: np.ndarray) -> CoalitionClasses:
        labels, r = self._pool_first_labels(mask)
        sc_labels, t_pool = self._pool_first_labels(~mask)
        q_cls, q_col = np.unique(labels[self.query_rows], return_inverse=True)
        sc_centre, sc_row = np.unique(sc_labels[self.centre_rows], return_inverse=True)
        pool_s, pool_sc = labels[: self.n_pool], sc_labels[: self.n_pool]
        pairs, pair_index = np.unique(pool_s * (t_pool + 1) + pool_sc, return_inverse=True)
        pair_w = np.bincount(pair_index.reshape(-1), weights=self.pool_weights)
        return CoalitionClasses(
            labels=labels,
            r=r,
            first=_first_of_each(labels, int(labels.max()) + 1),
            q_cls=q_cls,
            q_col=q_col.reshape(-1),
            sc_first=_first_of_each(sc_labels, int(sc_labels.max()) + 1),
            t_pool=t_pool,
            sc_centre=sc_centre,
            sc_row=sc_row.reshape(-1),
            pair_s=pairs // (t_pool + 1),
            pair_sc=pairs % (t_pool + 1),
            pair_w=pair_w,
        )
