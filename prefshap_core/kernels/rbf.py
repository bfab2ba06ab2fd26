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
    out = np.ones(x.shape[1])
    for j in range(x.shape[1]):
        # Every pair twice (the whole matrix, not its upper triangle): each value then
        # appears twice, which leaves the median exactly as it is (both middle values
        # of the doubled list are the pairs' middle ones), and skips the 2M-index
        # gather of the triangle (0.35 -> 0.19 s on 2,000 rows x 6 columns).
        diffs = np.abs(x[:, j][:, None] - x[:, j][None, :]).ravel()
        diffs = diffs[diffs > 1e-12]  # also drops the diagonal's zeros
        if len(diffs):
            out[j] = float(np.median(diffs))
    return out
