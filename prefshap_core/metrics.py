"""Held-out metrics of a preference function, and the rankability of duel data.

``roc_auc`` is the true ROC AUC of the real-valued g (Mann-Whitney with ties
averaged). The paper's code thresholded predictions before calling
``roc_auc_score``, which is the *balanced accuracy*; we report it as such.

Ties (``y = 0``) have no winner: ROC AUC and the accuracies leave them out; the log
loss counts a tie as half a win for each side (as the logistic fit does), so model
selection by log loss includes them. ``classification_metrics`` says how many ties
it left out.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits


def _as_labels(y: np.ndarray, *, ties: bool = False) -> np.ndarray:
    y = np.asarray(y)
    allowed = (-1, 0, 1) if ties else (-1, 1)
    if not np.all(np.isin(y, allowed)):
        raise ValueError(
            "labels must be -1, 0 (a tie) or +1" if ties else "labels must be -1 or +1"
        )
    return y.astype(np.int64)


def _decided(y: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The duels with a winner (ties left out), as labels and float scores."""
    y = _as_labels(y, ties=True)
    scores = np.asarray(scores, dtype=np.float64)
    keep = y != 0
    return y[keep], scores[keep]


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    # boundaries of runs of equal values
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    ranks[order] = np.repeat(0.5 * (starts + 1 + ends), ends - starts)
    return ranks


def roc_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), equal scores count 1/2.

    Tied duels (``y = 0``) are left out.
    """
    y, scores = _decided(y, scores)
    n_pos, n_neg = int(np.sum(y > 0)), int(np.sum(y < 0))
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(scores)
    return float((ranks[y > 0].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def accuracy(y: np.ndarray, scores: np.ndarray) -> float:
    """Fraction of duels whose winner has g on its side; g == 0 counts as half right.

    Tied duels are left out.
    """
    y, scores = _decided(y, scores)
    if len(y) == 0:
        return float("nan")
    s = np.sign(scores)
    return float(np.mean(np.where(s == 0, 0.5, s == y)))


def balanced_accuracy(y: np.ndarray, scores: np.ndarray) -> float:
    """Mean of per-class recall of sign(g): what the paper's code reported as "AUC".

    Tied duels are left out.
    """
    y, scores = _decided(y, scores)
    if len(y) == 0:
        return float("nan")
    pred = np.where(np.asarray(scores) > 0, 1, -1)
    recalls = [np.mean(pred[y == c] == c) for c in (-1, 1) if np.any(y == c)]
    return float(np.mean(recalls))


def log_losses(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per duel -log P(observed winner) with P(left wins) = sigmoid(g), computed stably.

    A tie (``y = 0``) costs half of each side's -log P, as in the logistic fit.
    """
    y = _as_labels(y, ties=True)
    g = np.asarray(scores, dtype=np.float64)
    p = 0.5 * (1.0 + y)
    return p * np.logaddexp(0.0, -g) + (1.0 - p) * np.logaddexp(0.0, g)


def log_loss(y: np.ndarray, scores: np.ndarray) -> float:
    """Mean of :func:`log_losses` over the duels."""
    return float(np.mean(log_losses(y, scores)))


def classification_metrics(y: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """ROC AUC and accuracies over the decided duels; log loss over all; the ties count."""
    metrics = {
        "roc_auc": roc_auc(y, scores),
        "accuracy": accuracy(y, scores),
        "balanced_accuracy": balanced_accuracy(y, scores),
        "log_loss": log_loss(y, scores),
    }
    n_ties = int(np.sum(np.asarray(y) == 0))
    if n_ties:
        metrics["ties_excluded"] = n_ties  # from ROC AUC and the accuracies
    return metrics


# -- rankability ---------------------------------------------------------------


def dominance_matrix(winners: np.ndarray, losers: np.ndarray, n_items: int) -> np.ndarray:
    """a[i, j] = share of the i-j duels that i won (0 where they never met)."""
    wins = np.zeros((n_items, n_items))
    np.add.at(wins, (winners, losers), 1.0)
    played = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(played > 0, wins / played, 0.0)
    np.fill_diagonal(share, 0.0)
    return share


def _hausdorff(a: np.ndarray, b: np.ndarray) -> float:
    dist = np.abs(a[:, None] - b[None, :])
    return float(max(dist.min(axis=1).max(), dist.min(axis=0).max()))


def spectral_rankability(adjacency: np.ndarray) -> float:
    """SpecR of Cameron, Langville and Smith (2020), weights in [0, 1].

    A complete dominance graph (a strict total order, every pair met) has Laplacian
    eigenvalues and out-degrees both equal to {0, 1, ..., n-1}; SpecR is 1 minus the
    Hausdorff distances of the observed spectrum and out-degrees from that set,
    normalised by 2 (n - 1). 1 = perfectly rankable.
    """
    a = np.asarray(adjacency, dtype=np.float64)
    n = len(a)
    if n < 2:
        return float("nan")
    out_degree = a.sum(axis=1)
    laplacian = np.diag(out_degree) - a
    eigenvalues = np.linalg.eigvals(laplacian)
    ideal = np.arange(n - 1, -1, -1, dtype=np.float64)
    spread = _hausdorff(eigenvalues, ideal.astype(complex)) + _hausdorff(out_degree, ideal)
    return float(1.0 - spread / (2.0 * (n - 1)))


def duel_rankability(
    winners: np.ndarray, losers: np.ndarray, n_items: int, max_items: int = 1500
) -> tuple[float, int]:
    """SpecR of the dominance graph of some duels, and how many items it covers.

    The eigen-decomposition is O(n^3); beyond ``max_items`` items we measure the
    subgraph of the ``max_items`` items with the most duels (reported by the count).
    """
    winners = np.asarray(winners, dtype=np.int64)
    losers = np.asarray(losers, dtype=np.int64)
    activity = np.bincount(winners, minlength=n_items) + np.bincount(losers, minlength=n_items)
    active = np.flatnonzero(activity > 0)
    if len(active) > max_items:
        active = np.sort(np.argsort(-activity, kind="stable")[:max_items])
    remap = np.full(n_items, -1)
    remap[active] = np.arange(len(active))
    keep = (remap[winners] >= 0) & (remap[losers] >= 0)
    a = dominance_matrix(remap[winners[keep]], remap[losers[keep]], len(active))
    return spectral_rankability(a), len(active)


_BLAS_LIMIT_LOCK = threading.Lock()


def rankability_in_background(
    winners: np.ndarray, losers: np.ndarray, n_items: int
) -> Future[tuple[float, int]]:
    """``duel_rankability`` on a thread of its own, with one BLAS thread.

    Its dense eigenvalue problem (~0.7 s at 1,500 items on 2 cores) does not depend on
    the model, and a training leaves ~0.4 of its cores idle (small solves, Python
    between BLAS calls): started before the fit, it is done when the fit is. One
    BLAS thread keeps it from contending with the fit's own threads.
    """
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specr")

    def measure() -> tuple[float, int]:
        # The BLAS thread count is process-wide and the limit restores what it found:
        # two trainings at once (dashboard jobs) must not nest it, or the second
        # would restore the first's limit of 1 and leave every later solve on one thread.
        with _BLAS_LIMIT_LOCK, threadpool_limits(limits=1, user_api="blas"):
            return duel_rankability(winners, losers, n_items)

    future = executor.submit(measure)
    executor.shutdown(wait=False)  # the thread ends with the work; nothing waits on it
    return future
