"""Model preferences of many items against an opponent pool at once, as matrices.

For a GPM the preference of every item ``i`` against every opponent ``j`` is

    g(i, j) = sum_m w_m [k(cl_m, x_i) k(cr_m, x_j) - k(cl_m, x_j) k(cr_m, x_i)]
            = (KL_I^T W KR_J - (KL_J^T W KR_I)^T)_ij

two matrix products instead of one kernel evaluation per pair; for a UPM
``g(i, j) = f(x_i) - f(x_j)`` with ``f = w^T (KL - KR)``, which a GPM / C-GPM with
utility weight ``c > 0`` adds ``c`` times (the sum kernel ``k_E + c k_UPM``). The
weights ``w`` are the model's ``alpha`` times the context kernel averaged over chosen
contexts (a C-GPM), so one product gives the model under one context, a context slice or the whole
observed context mix (which is the model's own g_bar). Tested against
``PreferenceFunction.decision_on_pool`` pair by pair.
"""

from __future__ import annotations

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.models.preference_function import PreferenceFunction


def win_probability(g: np.ndarray | float) -> np.ndarray:
    """P(left wins) = sigmoid(g), without overflow for large |g|."""
    g = np.asarray(g, dtype=np.float64)
    e = np.exp(-np.abs(g))
    return np.where(g >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def context_alpha(
    fn: PreferenceFunction, context_weights: np.ndarray | None, compute: Compute
) -> torch.Tensor:
    """(M,) alpha_m * sum_u w_u k_U(cu_m, u) / sum_u w_u over the model's observed contexts.

    ``None``: the model's own context mix (its ``context_weights``); models without
    context: alpha itself.
    """
    if fn.kind != "cgpm":
        return compute.tensor(fn.alpha)
    if context_weights is None:
        return fn.averaged_alpha(compute)
    assert fn.contexts is not None
    w = np.asarray(context_weights, dtype=np.float64)
    if w.shape != (len(fn.contexts),) or w.sum() <= 0:
        raise ValueError("context_weights need one non-negative weight per observed context")
    ku = fn.context_kernel_to_centres(fn.contexts, compute)  # (M, p)
    return compute.tensor(fn.alpha) * (ku @ compute.tensor(w / w.sum()))


def preference_matrix(
    fn: PreferenceFunction,
    x_items: np.ndarray,
    x_opponents: np.ndarray,
    *,
    context_weights: np.ndarray | None = None,
    compute: Compute | None = None,
) -> np.ndarray:
    """(n, k) g(item i, opponent j) for model-space rows, under ``context_weights``."""
    return preference_matrices(fn, x_items, x_opponents, [context_weights], compute=compute)[0]


def preference_matrices(
    fn: PreferenceFunction,
    x_items: np.ndarray,
    x_opponents: np.ndarray,
    context_weight_sets: list[np.ndarray | None],
    *,
    compute: Compute | None = None,
) -> list[np.ndarray]:
    """One (n, k) matrix per context weighting, the kernels computed once."""
    compute = compute or Compute()
    items = fn.centre_kernels(x_items, compute)  # (M, n) each
    opponents = fn.centre_kernels(x_opponents, compute)  # (M, k) each
    out = []
    for weights in context_weight_sets:
        g = fn.pair_block(context_alpha(fn, weights, compute), items, opponents)
        out.append(g.cpu().numpy().astype(np.float64))
    return out


def utility(fn: PreferenceFunction, x: np.ndarray, compute: Compute | None = None) -> np.ndarray:
    """A UPM's f(x) per model-space row (defined up to a constant; centred by callers)."""
    if fn.kind != "upm":
        raise ValueError(f"only a UPM has a utility f(x), not a {fn.kind!r} model")
    compute = compute or Compute()
    k_left, k_right = fn.centre_kernels(x, compute)
    return (compute.tensor(fn.alpha) @ (k_left - k_right)).cpu().numpy().astype(np.float64)
