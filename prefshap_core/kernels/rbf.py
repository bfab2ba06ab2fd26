"""The ARD RBF kernel on model-space features, and its median-heuristic lengthscales.

``k(a, b) = exp(-1/2 * sum_j ((a_j - b_j) / l_j)^2)``: a product over features, which
the Pref-SHAP value functions rely on (a coalition's kernel is the product over its
features, i.e. the same formula restricted to the coalition's columns).
"""

from __future__ import annotations

import numpy as np
import torch


def scaled_sq_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise squared Euclidean distances between rows (already divided by l).

    The GEMM form is fast but cancels; clamp at 0 so the kernel never exceeds 1.
    """
    a2 = (a * a).sum(dim=-1, keepdim=True)
    b2 = (b * b).sum(dim=-1, keepdim=True)
    d2 = a2 - 2.0 * (a @ b.transpose(-1, -2)) + b2.transpose(-1, -2)
    return d2.clamp_min_(0.0)


def rbf_gram(a: torch.Tensor, b: torch.Tensor, lengthscales: torch.Tensor) -> torch.Tensor:
    """ARD RBF Gram matrix k(a_i, b_j), shape (len(a), len(b))."""
    return torch.exp(-0.5 * scaled_sq_dist(a / lengthscales, b / lengthscales))


def rbf_gram_exact(a: torch.Tensor, b: torch.Tensor, lengthscales: torch.Tensor) -> torch.Tensor:
    """The same Gram by explicit differences: slower, no cancellation (for references)."""
    diff = (a[:, None, :] - b[None, :, :]) / lengthscales
    return torch.exp(-0.5 * (diff * diff).sum(-1))


def median_heuristic(x: np.ndarray, max_rows: int = 2000, seed: int = 0) -> np.ndarray:
    """Per-column median of the non-zero absolute pairwise differences.

    Non-zero, because one-hot and integer-valued columns have mostly-equal pairs and
    a zero median would make the kernel a spike. A constant column gets 1.
    """
    x = np.asarray(x, dtype=np.float64)
    if len(x) > max_rows:
        x = x[np.random.default_rng(seed).choice(len(x), max_rows, replace=False)]
    out = np.ones(x.shape[1])
    iu = np.triu_indices(len(x), k=1)
    for j in range(x.shape[1]):
        diffs = np.abs(x[:, j][:, None] - x[:, j][None, :])[iu]
        diffs = diffs[diffs > 1e-12]
        if len(diffs):
            out[j] = float(np.median(diffs))
    return out
