"""The ARD RBF kernel on model-space features, and its median-heuristic lengthscales.

``k(a, b) = exp(-1/2 * sum_j ((a_j - b_j) / l_j)^2)``: a product over features, which
the Pref-SHAP value functions rely on (a coalition's kernel is the product over its
features, i.e. the same formula restricted to the coalition's columns).
"""

from __future__ import annotations

import numpy as np
import torch


def scaled_gram(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """RBF Gram of rows already divided by their lengthscales (no columns: all ones).

    ``exp(a.b - |a|^2/2 - |b|^2/2)`` in place after one GEMM: Gram matrices are the
    engine's largest temporaries, so every extra pass over them counts. The GEMM form
    cancels, so the exponent (``-|a-b|^2/2``) is clamped at 0 and the kernel never
    exceeds 1. The engine's one RBF: models, pair kernels and CMEs all call it.
    """
    out = a @ b.transpose(-1, -2)
    out.sub_(0.5 * (a * a).sum(-1, keepdim=True))
    out.sub_(0.5 * (b * b).sum(-1).unsqueeze(-2))
    return out.clamp_max_(0.0).exp_()


def rbf_gram(a: torch.Tensor, b: torch.Tensor, lengthscales: torch.Tensor) -> torch.Tensor:
    """ARD RBF Gram matrix k(a_i, b_j), shape (len(a), len(b))."""
    return scaled_gram(a / lengthscales, b / lengthscales)


def median_heuristic(x: np.ndarray, max_rows: int = 2000, seed: int = 0) -> np.ndarray:
    """Per-column median of the non-zero absolute pairwise differences.

    Non-zero, because one-hot and integer-valued columns have mostly-equal pairs and
    a zero median would make the kernel a spike. A constant column gets 1.
    """
    x = np.asarray(x, dtype=np.float64)
    if len(x) > max_rows:
        x = x[np.random.default_rng(seed).choice(len(x), max_rows, replace=False)]
    return np.array([_median_pair_difference(x[:, j]) for j in range(x.shape[1])])


# Up to this many distinct values a column's pairs are counted per pair of values
# (u^2 / 2 weighted differences) instead of listed (n^2): tennis's 14 item columns
# have at most 52 values, and its three median heuristics of an auto training took
# 2.4 s listed.
_COUNTED_MAX_VALUES = 512


def _median_pair_difference(column: np.ndarray) -> float:
    """``np.median`` of ``|a_i - a_j|`` over the pairs of rows that differ (> 1e-12).

    The same float: a pair of distinct values ``v_k < v_l`` stands for its
    ``c_k c_l`` pairs of rows, each with difference ``v_l - v_k`` (the same rounding as
    ``|a_i - a_j|``), and the middle one or two of the counted list are averaged as
    ``np.median`` averages them.
    """
    values, counts = np.unique(column, return_counts=True)
    if len(values) > _COUNTED_MAX_VALUES:
        # Every pair twice (the whole matrix, not its upper triangle): each value then
        # appears twice, which leaves the median exactly as it is (both middle values
        # of the doubled list are the pairs' middle ones), and skips the 2M-index
        # gather of the triangle (0.35 -> 0.19 s on 2,000 rows x 6 columns).
        diffs = np.abs(column[:, None] - column[None, :]).ravel()
        diffs = diffs[diffs > 1e-12]  # also drops the diagonal's zeros
        return float(np.median(diffs)) if len(diffs) else 1.0
    upper = np.triu_indices(len(values), 1)
    diffs = (values[None, :] - values[:, None])[upper]
    weights = (counts[:, None] * counts[None, :])[upper]
    keep = diffs > 1e-12
    diffs, weights = diffs[keep], weights[keep]
    if not len(diffs):
        return 1.0
    order = np.argsort(diffs, kind="stable")
    diffs, cumulative = diffs[order], np.cumsum(weights[order])
    n_pairs = int(cumulative[-1])
    middle = np.searchsorted(cumulative, [(n_pairs - 1) // 2, n_pairs // 2], side="right")
    return float(np.mean(diffs[middle]))
