"""Choosing the CME regulariser ``lam`` by held-out CME error (closed form in kernels).

The model trainer calls :func:`choose_cme_lambda` once per model (items, and contexts
with their counts) and stores the result in the model file; explanations use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.kernels.rows import unique_rows
from prefshap_core.models.hyperparameters import DEFAULT_CME_LAMBDA
from prefshap_core.progress import checkpoint

DEFAULT_LAMBDA_CANDIDATES = (1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)


@dataclass(frozen=True)
class LambdaSearch:
    """How the regulariser is scored: candidates, random coalitions, held-out share."""

    candidates: tuple[float, ...] = DEFAULT_LAMBDA_CANDIDATES
    n_coalitions: int = 8
    holdout: float = 0.25
    max_rows: int = 1000
    seed: int = 0


def cme_lambda_scores(
    rows: np.ndarray,
    lengthscales: np.ndarray,
    feature_group: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    search: LambdaSearch | None = None,
    compute: Compute | None = None,
) -> dict[float, float]:
    """Held-out CME error of each candidate ``lam``, averaged over random coalitions.

    For a proper coalition ``S`` the CME is fitted on part of the rows and scored on
    the others by its squared RKHS error, in closed form with kernels:
    ``E ||k_Sc(., x_Sc) - mu_hat(x_S)||^2 = 1 - 2 c' k_Sc(F, x) + c' K_Sc(F, F) c``
    with ``c = W (K_S(F,F) W + n_F lam I)^-1 k_S(F, x)`` over the fitted rows ``F``.
    ``weights`` are multiplicities (unique contexts with counts): integer counts are
    split binomially, so the split is that of the expanded rows. At most ``max_rows``
    distinct rows are used (a random subset): the best ``lam`` shrinks slowly as the
    pool grows, so a subsample leans a little towards larger values.
    """
    compute = compute or Compute()
    search = search or LambdaSearch()
    candidates, holdout, max_rows = search.candidates, search.holdout, search.max_rows
    rng = np.random.default_rng(search.seed)
    uniq, inverse = unique_rows(rows)
    w = np.bincount(inverse, weights=None if weights is None else np.asarray(weights, float))
    if len(uniq) > max_rows:
        keep = np.sort(rng.choice(len(uniq), max_rows, replace=False))
        uniq, w = uniq[keep], w[keep]
    if np.allclose(w, np.round(w)):
        held = rng.binomial(np.round(w).astype(np.int64), holdout).astype(np.float64)
    else:
        held = np.where(rng.random(len(w)) < holdout, w, 0.0)
    fit_w, held_w = w - held, held
    fit, test = fit_w > 0, held_w > 0
    groups = np.asarray(feature_group, dtype=np.int64)
    p = int(groups.max()) + 1
    masks = _proper_coalitions(p, search.n_coalitions, rng)
    if len(masks) == 0 or fit.sum() < 2 or test.sum() < 1:
        return {}
    scaled = compute.tensor(uniq / np.asarray(lengthscales, dtype=np.float64))
    xf, xt = scaled[compute.index(np.flatnonzero(fit))], scaled[compute.index(np.flatnonzero(test))]
    root_w = compute.tensor(np.sqrt(fit_w[fit]))
    test_w = compute.tensor(held_w[test] / held_w[test].sum())
    n_fit = float(fit_w.sum())
    scores = dict.fromkeys(candidates, 0.0)
    for mask in masks:
        s_cols = compute.index(np.flatnonzero(mask[groups]))
        c_cols = compute.index(np.flatnonzero(~mask[groups]))
        ks_ff = kernel(xf[:, s_cols], xf[:, s_cols])
        ks_ft = kernel(xf[:, s_cols], xt[:, s_cols])
        kc_ff = kernel(xf[:, c_cols], xf[:, c_cols])
        kc_ft = kernel(xf[:, c_cols], xt[:, c_cols])
        a = root_w[:, None] * ks_ff * root_w[None, :]
        for lam in candidates:
            # A cancel stops between factorizations: the search runs 8 x 7 of them on up
            # to 750 rows and had none (a training cancelled here took 1.2-1.8 s at load 3.3-3.8).
            checkpoint()
            system = a.clone()
            system.diagonal().add_(lam * n_fit)
            chol = torch.linalg.cholesky(system)
            coef = root_w[:, None] * torch.cholesky_solve(root_w[:, None] * ks_ft, chol)
            err = 1.0 - 2.0 * (coef * kc_ft).sum(0) + (coef * (kc_ff @ coef)).sum(0)
            scores[lam] += float((err * test_w).sum()) / len(masks)
    return scores


def choose_cme_lambda(
    rows: np.ndarray,
    lengthscales: np.ndarray,
    feature_group: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    search: LambdaSearch | None = None,
    compute: Compute | None = None,
    fallback: float = DEFAULT_CME_LAMBDA,
) -> float:
    """The candidate ``lam`` with the least held-out CME error (see :func:`cme_lambda_scores`).

    Returns ``fallback`` when there is nothing to score (a single player has no
    proper coalition; too few rows to hold any out). For contexts pass their counts
    as ``weights`` and ``fallback=DEFAULT_CONTEXT_CME_LAMBDA``.
    """
    scores = cme_lambda_scores(
        rows, lengthscales, feature_group, weights=weights, search=search, compute=compute
    )
    if not scores:
        return float(fallback)
    return float(min(scores, key=lambda lam: scores[lam]))


def _proper_coalitions(p: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if p < 2:
        return np.zeros((0, p), dtype=bool)
    if p <= 20:
        codes = np.arange(1, 2**p - 1)
        if len(codes) > n:
            codes = rng.choice(codes, size=n, replace=False)
        return ((codes[:, None] >> np.arange(p)) & 1).astype(bool)
    masks = rng.random((4 * n, p)) < 0.5
    masks = np.unique(masks[(masks.sum(1) > 0) & (masks.sum(1) < p)], axis=0)
    return masks[rng.permutation(len(masks))[:n]]


def usable_regulariser(value: float | None, default: float) -> float:
    """A usable CME regulariser: the given one, else the default (also for NaN / <= 0)."""
    if value is None or not np.isfinite(value) or value <= 0:
        return default
    return float(value)
