"""Bradley-Terry scores of a win/loss record: P(i beats j) = sigmoid(s_i - s_j).

Maximum likelihood by Hunter's (2004) minorise-maximise iteration on strengths
``pi = exp(s)``. Plain maximum likelihood has no finite answer for an item that never
lost (or never won), so every item also gets one virtual win and one virtual loss
against a fixed reference of strength 1 (score 0): a weak prior that keeps every
score finite and barely moves items with many duels. Scores are centred (mean 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VIRTUAL_GAMES = 1.0  # virtual wins = virtual losses per item against the reference


@dataclass(frozen=True)
class BradleyTerryFit:
    scores: np.ndarray  # (n,) centred log-strengths (what to show)
    log_strengths: np.ndarray  # (n,) the maximiser itself (the reference has score 0)
    n_iterations: int
    converged: bool


def bradley_terry(
    winners: np.ndarray,
    losers: np.ndarray,
    n_items: int,
    *,
    weights: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> BradleyTerryFit:
    """Scores from duels ``winners[k]`` beat ``losers[k]`` (item rows); ``weights`` per
    duel (e.g. 0.5 for each half of a tie), 1 by default."""
    winners = np.asarray(winners, dtype=np.int64)
    losers = np.asarray(losers, dtype=np.int64)
    w = np.ones(len(winners)) if weights is None else np.asarray(weights, dtype=np.float64)
    wins = np.bincount(winners, weights=w, minlength=n_items) + VIRTUAL_GAMES
    pi = np.ones(n_items)
    converged = False
    iteration = 0
    for iteration in range(1, max_iter + 1):  # noqa: B007 (reported below)
        pair = w / (pi[winners] + pi[losers])
        denominator = (
            np.bincount(winners, weights=pair, minlength=n_items)
            + np.bincount(losers, weights=pair, minlength=n_items)
            + 2.0 * VIRTUAL_GAMES / (pi + 1.0)
        )
        new = wins / denominator
        change = float(np.max(np.abs(np.log(new) - np.log(pi))))
        pi = new
        if change < tol:
            converged = True
            break
    scores = np.log(pi)
    return BradleyTerryFit(scores - scores.mean(), scores, iteration, converged)


def log_likelihood(
    scores: np.ndarray, winners: np.ndarray, losers: np.ndarray, weights: np.ndarray | None = None
) -> float:
    """The objective maximised above (with the virtual games), at ``log_strengths``."""
    s = np.asarray(scores, dtype=np.float64)
    w = np.ones(len(winners)) if weights is None else np.asarray(weights, dtype=np.float64)
    d = s[winners] - s[losers]
    ll = float(np.sum(w * -np.logaddexp(0.0, -d)))
    virtual = -np.logaddexp(0.0, -s) - np.logaddexp(0.0, s)
    return ll + VIRTUAL_GAMES * float(np.sum(virtual))
