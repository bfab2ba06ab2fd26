"""Rows that a coalition cannot tell apart: the class bookkeeping of every CME backend.

For a coalition ``S`` two rows are in the same *S class* when they agree on the
columns of ``S`` (and in the same *Sc class* when they agree on the others). The
coalition's kernel and conditional mean embedding only see classes, so each backend
solves over the pool's S classes (``r``, often far fewer than ``n``) and gathers.

A :class:`PoolUniverse` holds the distinct pool and centre rows (the pool's first)
and, per coalition, their classes: labels are *pool first* and ordered by value, and
they never depend on the queries, which is what lets a backend keep a coalition's
factorization across calls (:mod:`embedding`). A call's :class:`Universe` adds its
query rows: a query takes the label of the pool or centre class with its S columns,
or a new label after them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.cme.base import CMEProblem
from prefshap_core.kernels.rows import unique_rows

# One coalition's kept classes cost about this much per distinct pool and centre row
# (labels, row keys, pairs: 455 kB for 2,000 rows): a 2^16-coalition interaction run on
# a 2,000-item pool would keep 29 GB. Beyond MAX_CLASS_CACHE_BYTES the oldest coalitions'
# classes are dropped (recomputed when asked for again: the same labels).
CLASS_BYTES_PER_ROW = 240
MAX_CLASS_CACHE_BYTES = 256 * 2**20


def class_cache_bytes(n_rows: int, n_coalitions: int) -> int:
    """What a pool universe keeps of ``n_coalitions`` coalitions' classes (for budgets)."""
    return min(MAX_CLASS_CACHE_BYTES, int(n_coalitions) * int(n_rows) * CLASS_BYTES_PER_ROW)


def _first_of_each(labels: np.ndarray, n_labels: int) -> np.ndarray:
    first = np.empty(n_labels, dtype=np.int64)
    first[labels[::-1]] = np.arange(len(labels))[::-1]
    return first


@dataclass(frozen=True)
class _FixedClasses:
    """One coalition's classes of the pool and centre rows (query-independent)."""

    labels: np.ndarray  # (fixed rows,) S class, pool classes first
    r: int  # number of pool S classes
    first: np.ndarray  # (fixed classes,) a fixed row of each S class
    # S columns (bytes) -> S class: filled when a query that is no fixed row first asks
    # (PoolUniverse.key_labels); queries equal to a fixed row take that row's label.
    key_to_label: dict[bytes, int]
    sc_first: np.ndarray  # (t,) a fixed row of each Sc class (pool classes first)
    t_pool: int  # number of pool Sc classes
    sc_centre: np.ndarray  # (t_P,) Sc classes present among the centres
    sc_row: np.ndarray  # (centres,) index into sc_centre
    pair_s: np.ndarray  # pool (S class, Sc class) pairs and their total weight
    pair_sc: np.ndarray
    pair_w: np.ndarray


@dataclass(frozen=True)
class CoalitionClasses(_FixedClasses):
    """Index bookkeeping of one coalition over a call's :class:`Universe` (NumPy).

    The coalition's fixed classes with the call's queries added: ``labels`` and
    ``first`` run over the whole universe (fixed rows, then the queries; a query with
    S columns no fixed row has opens a new class after the fixed ones).
    """

    q_cls: np.ndarray  # (q',) distinct S classes of the queries (sorted: pool first)
    q_col: np.ndarray  # (queries,) column of each query in Gamma


def _mask_key(mask: np.ndarray) -> bytes:
    """A coalition's key in the kept classes (``PoolUniverse._classes``)."""
    return np.packbits(mask).tobytes()


def _row_keys(rows: np.ndarray) -> list[bytes]:
    rows = np.ascontiguousarray(rows + 0.0)  # -0.0 and 0.0 alike
    return [row.tobytes() for row in rows]


class PoolUniverse:
    """The distinct pool and centre rows of a problem, pool rows first; classes per mask."""

    def __init__(self, problem: CMEProblem, compute: Compute) -> None:
        pool = np.atleast_2d(np.asarray(problem.pool, dtype=np.float64))
        centres = np.atleast_2d(np.asarray(problem.centres, dtype=np.float64))
        n_pool = len(pool)
        uniq, inverse = unique_rows(np.vstack([pool, centres]))
        in_pool = np.zeros(len(uniq), dtype=bool)
        in_pool[inverse[:n_pool]] = True
        order = np.concatenate([np.flatnonzero(in_pool), np.flatnonzero(~in_pool)])
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        inverse = position[inverse]
        self.rows = uniq[order]
        self.n_pool = int(in_pool.sum())  # rows 0..n_pool-1 are the pool's
        self.pool_weights = np.bincount(
            inverse[:n_pool], weights=problem.weights, minlength=self.n_pool
        )
        self.centre_rows = inverse[n_pool:]
        self.column_player = np.asarray(problem.column_player, dtype=np.int64)
        self.n_players = int(self.column_player.max()) + 1
        self.lengthscales = np.asarray(problem.lengthscales, dtype=np.float64)
        # Per-player codes: equal codes = equal rows on that player's columns.
        self._codes = np.stack(
            [unique_rows(self.rows[:, self.column_player == g])[1] for g in range(self.n_players)],
            axis=1,
        )
        self._cardinality = self._codes.max(0) + 1
        self.scaled = compute.tensor(self.rows / self.lengthscales)
        self._classes: dict[bytes, _FixedClasses] = {}
        self._class_bytes: dict[bytes, int] = {}  # the same keys, oldest first
        self._kept_bytes = 0

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

    def fixed_classes(self, mask: np.ndarray) -> _FixedClasses:
        """The pool and centre classes of one coalition (computed once, then kept)."""
        cache_key = _mask_key(mask)
        found = self._classes.get(cache_key)
        if found is not None:
            return found
        labels, r = self._pool_first_labels(mask)
        sc_labels, t_pool = self._pool_first_labels(~mask)
        sc_centre, sc_row = np.unique(sc_labels[self.centre_rows], return_inverse=True)
        pool_s, pool_sc = labels[: self.n_pool], sc_labels[: self.n_pool]
        pairs, pair_index = np.unique(pool_s * (t_pool + 1) + pool_sc, return_inverse=True)
        pair_w = np.bincount(pair_index.reshape(-1), weights=self.pool_weights)
        fixed = _FixedClasses(
            labels=labels,
            r=r,
            first=_first_of_each(labels, int(labels.max()) + 1),
            key_to_label={},
            sc_first=_first_of_each(sc_labels, int(sc_labels.max()) + 1),
            t_pool=t_pool,
            sc_centre=sc_centre,
            sc_row=sc_row.reshape(-1),
            pair_s=pairs // (t_pool + 1),
            pair_sc=pairs % (t_pool + 1),
            pair_w=pair_w,
        )
        self._keep(cache_key, fixed)
        return fixed

    def key_labels(self, mask: np.ndarray, fixed: _FixedClasses) -> dict[bytes, int]:
        """``fixed.key_to_label``, built on first use: the S class of each distinct row of
        S columns (as bytes), for query rows that are no fixed row (what-if rows)."""
        if not fixed.key_to_label:
            keys = _row_keys(self.rows[fixed.first][:, mask[self.column_player]])
            fixed.key_to_label.update((k, label) for label, k in enumerate(keys))
            cache_key = _mask_key(mask)
            if self._classes.get(cache_key) is fixed:  # counted while it is kept
                size = len(keys) * (len(keys[0]) + 100) if keys else 0
                self._class_bytes[cache_key] += size
                self._kept_bytes += size
        return fixed.key_to_label

    def _keep(self, key: bytes, fixed: _FixedClasses) -> None:
        arrays = (fixed.labels, fixed.first, fixed.sc_first, fixed.sc_centre, fixed.sc_row,
                  fixed.pair_s, fixed.pair_sc, fixed.pair_w)  # fmt: skip
        size = sum(a.nbytes for a in arrays)
        self._classes[key], self._class_bytes[key] = fixed, size
        self._kept_bytes += size
        while self._kept_bytes > MAX_CLASS_CACHE_BYTES and len(self._classes) > 1:
            oldest = next(iter(self._classes))
            del self._classes[oldest]
            self._kept_bytes -= self._class_bytes.pop(oldest)


class Universe:
    """A call's universe: the pool universe's rows followed by the query rows."""

    def __init__(self, pool: PoolUniverse, queries: np.ndarray, compute: Compute) -> None:
        self.pool = pool
        self.queries = np.atleast_2d(np.asarray(queries, dtype=np.float64)) + 0.0
        n_fixed = len(pool.rows)
        self.query_rows = n_fixed + np.arange(len(self.queries))
        self.centre_rows = pool.centre_rows
        self.column_player = pool.column_player
        self.n_pool = pool.n_pool
        query_scaled = compute.tensor(self.queries / pool.lengthscales)
        self.scaled = torch.cat([pool.scaled, query_scaled]) if len(self.queries) else pool.scaled
        # The fixed row equal to each query (-1: none). Duels of the data set query pool
        # rows only: their labels are the fixed rows', with no per-row keys (hashing
        # every query's S columns per coalition took ~10 % of an exact explanation).
        uniq, inverse = unique_rows(np.vstack([pool.rows, self.queries]))
        fixed_of = np.full(len(uniq), -1, dtype=np.int64)
        fixed_of[inverse[:n_fixed]] = np.arange(n_fixed)
        self.fixed_row = fixed_of[inverse[n_fixed:]]

    def classes(self, mask: np.ndarray) -> CoalitionClasses:
        fixed = self.pool.fixed_classes(mask)
        query_labels = np.empty(len(self.queries), dtype=np.int64)
        in_fixed = self.fixed_row >= 0
        query_labels[in_fixed] = fixed.labels[self.fixed_row[in_fixed]]
        new_first: list[int] = []
        outside = np.flatnonzero(~in_fixed)
        if len(outside):
            cols = mask[self.column_player]
            known = self.pool.key_labels(mask, fixed)
            n_fixed_classes = len(fixed.first)
            new: dict[bytes, int] = {}
            for k, key in zip(outside, _row_keys(self.queries[outside][:, cols]), strict=True):
                label = known.get(key)
                if label is None:
                    label = new.get(key)
                    if label is None:
                        label = new[key] = n_fixed_classes + len(new)
                        new_first.append(int(self.query_rows[k]))
                query_labels[k] = label
        q_cls, q_col = np.unique(query_labels, return_inverse=True)
        with_queries = {
            "labels": np.concatenate([fixed.labels, query_labels]),
            "first": np.concatenate([fixed.first, np.asarray(new_first, dtype=np.int64)]),
        }
        return CoalitionClasses(
            **{f.name: with_queries.get(f.name, getattr(fixed, f.name)) for f in fields(fixed)},
            q_cls=q_cls,
            q_col=q_col.reshape(-1),
        )


class PoolBinding:
    """Builds a problem's :class:`PoolUniverse` once and binds each call's queries to it.

    The embeddings (exact and Nyström) take this part by inheritance: the pool
    universe is a per-process cache, so it never travels when they are pickled.
    """

    problem: CMEProblem
    compute: Compute
    _pool_universe: PoolUniverse | None = None

    def bind(self, queries: np.ndarray) -> Universe:
        """The universe of one call's query rows (pass it to ``gammas``)."""
        if self._pool_universe is None:
            self._pool_universe = PoolUniverse(self.problem, self.compute)
        return Universe(self._pool_universe, queries, self.compute)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_pool_universe"] = None  # rebuilt on the first bind where it lands
        return state
