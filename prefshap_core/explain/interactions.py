"""Pairwise Shapley interaction index from an exact coalition value table.

Grabisch and Roubens (1999): for players ``i != j`` of a game ``v`` on ``p`` players,

    I(i, j) = sum_{S subset of N - {i, j}} |S|! (p - |S| - 2)! / (p - 1)!
              * [ v(S + i + j) - v(S + i) - v(S + j) + v(S) ]

It is linear in ``v``, so, as for :func:`exact_shapley_matrix`, one coefficient
matrix per ``p`` (pairs x 2^p) maps the table of every duel at once. The table is
in bit order (row ``k`` holds player ``i`` iff bit ``i`` of ``k`` is set, empty to
full); pairs are ``(i, j)`` with ``i < j`` in player (group) order, the order of the
``<a>*<b>`` columns of ``prefshap explain --what interactions``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

MAX_INTERACTION_PLAYERS = 16  # (120, 65,536) float64 coefficients: 63 MB


def player_pairs(n_players: int) -> np.ndarray:
    """(p (p - 1) / 2, 2) int64: every pair ``(i, j)``, ``i < j``, in lexicographic order."""
    i, j = np.triu_indices(n_players, k=1)
    return np.stack([i, j], axis=1).astype(np.int64)


@lru_cache(maxsize=2)
def _interaction_matrix(n_players: int) -> np.ndarray:
    p = n_players
    codes = np.arange(2**p, dtype=np.int64)
    member = ((codes[None, :] >> np.arange(p, dtype=np.int64)[:, None]) & 1).astype(bool)
    size = member.sum(0)  # (2^p,)
    # weight of |S| = s, the coalition without i and j: s! (p - s - 2)! / (p - 1)!
    # = 1 / ((p - 1) C(p - 2, s))
    weight = np.array([1.0 / ((p - 1) * math.comb(p - 2, s)) for s in range(p - 1)])
    pairs = player_pairs(p)
    has_i, has_j = member[pairs[:, 0]], member[pairs[:, 1]]  # (pairs, 2^p)
    inside = has_i.astype(np.int64) + has_j.astype(np.int64)
    # v(S + i + j) and v(S) enter with +, v(S + i) and v(S + j) with -.
    sign = np.where(inside == 1, -1.0, 1.0)
    matrix = sign * weight[size[None, :] - inside]
    matrix.setflags(write=False)
    return matrix


def exact_interaction_matrix(n_players: int) -> np.ndarray:
    """(pairs, 2^p) float64 ``B`` with ``SII = B @ v`` for ``v`` in bit order.

    Rows follow :func:`player_pairs`. Built once per ``p`` (cached, read-only).
    """
    _check_players(n_players)
    return _interaction_matrix(n_players)


def shapley_interactions(values: np.ndarray) -> np.ndarray:
    """(D, pairs) pairwise Shapley interaction index of every pair, for each of D games.

    ``values``: (2^p, D) (or (2^p,) for one game), the exact coalition value table in
    bit order, boundary rows included. Pairs as in :func:`player_pairs`.
    """
    table = np.asarray(values, dtype=np.float64)
    if table.ndim == 1:
        table = table[:, None]
    if table.ndim != 2:
        raise ValueError(f"values must be (2^p, D), got shape {np.shape(values)}")
    rows = table.shape[0]
    p = rows.bit_length() - 1
    if rows < 1 or rows != 2**p:
        raise ValueError(f"values need 2^p rows (one per coalition), got {rows}")
    _check_players(p)
    return (exact_interaction_matrix(p) @ table).T


def interaction_square(pair_values: np.ndarray, n_players: int) -> np.ndarray:
    """(D, p, p) symmetric matrices from (D, pairs) values; the diagonal is 0."""
    pair_values = np.atleast_2d(np.asarray(pair_values, dtype=np.float64))
    pairs = player_pairs(n_players)
    if pair_values.shape[1] != len(pairs):
        raise ValueError(f"{n_players} players have {len(pairs)} pairs, got {pair_values.shape[1]}")
    square = np.zeros((pair_values.shape[0], n_players, n_players))
    square[:, pairs[:, 0], pairs[:, 1]] = pair_values
    square[:, pairs[:, 1], pairs[:, 0]] = pair_values
    return square


def pair_names(player_names: tuple[str, ...] | list[str]) -> list[str]:
    """Column names ``<a>*<b>`` of the pairs, in :func:`player_pairs` order."""
    names = list(player_names)
    return [f"{names[i]}*{names[j]}" for i, j in player_pairs(len(names)).tolist()]


def _check_players(n_players: int) -> None:
    if n_players < 2:
        raise ValueError(f"interactions need at least 2 players, got {n_players}")
    if n_players > MAX_INTERACTION_PLAYERS:
        raise ValueError(
            f"exact interaction values are limited to {MAX_INTERACTION_PLAYERS} players "
            f"(2^p coalitions per duel), this game has {n_players}"
        )
