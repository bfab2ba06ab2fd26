"""Calibrating the Laplace posterior (docs/method.md, "Calibration"): the penalty's
bias of alpha folded into the factor (:func:`widen_by_penalty_bias`), and a dispersion
``c >= 1`` from the held-out duels' calibration slope (:func:`with_holdout_dispersion`):
the Laplace posterior covers the penalised fit, whose shrinkage it does not contain.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models import data_term
from prefshap_core.models.preference_function import PreferenceFunction

# Fewer held-out duels than this estimate no calibration slope worth using (its se is
# then ~0.1 or more): the posterior is kept as it is.
MIN_CALIBRATION_DUELS = 200
# ... and at most this many (seeded subsample): the slope's se is then ~0.03, and the
# held-out sds cost |S| M r flops, part of the posterior's cost.
MAX_CALIBRATION_DUELS = 2_000


def widen_by_penalty_bias(factor: np.ndarray, bias_coordinates: np.ndarray) -> np.ndarray:
    """``F'`` with ``F' F'^T = F F^T + u u^T``, ``u = F v``: the posterior widened by the
    penalty's bias of alpha (docs/method.md, "Calibration"), same shape.

    ``F F^T + F v v^T F^T = F (I + v v^T) F^T`` and ``(I + v v^T)^1/2 = I + gamma v v^T``
    with ``gamma = (sqrt(1 + |v|^2) - 1) / |v|^2``, so ``F' = F + gamma u v^T``: a rank-one
    update, no new column (r stays what the trace share chose).
    """
    v = np.asarray(bias_coordinates, dtype=np.float64)
    squared = float(v @ v)
    if not squared > 0:
        return factor
    gamma = np.expm1(0.5 * np.log1p(squared)) / squared  # (sqrt(1 + s) - 1) / s, no cancelling
    widened = np.array(factor, dtype=np.float64, order="C")
    # A rank-one update in place (BLAS ger): no (M, r) outer product beside it.
    torch.from_numpy(widened).addr_(torch.from_numpy(factor @ v), torch.from_numpy(v),
                                    alpha=gamma)  # fmt: skip
    return widened


def calibration_slope(g: np.ndarray, sd: np.ndarray, y: np.ndarray) -> float:
    """``a`` maximising the held-out log likelihood of ``P(y = 1) = sigmoid(a g / k)``,
    ``k = sqrt(1 + pi sd^2 / 8)`` (the posterior's own spread folded in, MacKay's probit
    approximation); a tie is half a win each way. 1-D golden-section search on
    ``log a`` in [1/4, 4]: ``a > 1`` means the fit shrinks g (too strong a penalty)."""
    f = np.asarray(g, dtype=np.float64) / np.sqrt(1.0 + np.pi * np.asarray(sd) ** 2 / 8.0)
    win = (1.0 + np.asarray(y, dtype=np.float64)) / 2.0

    def loss(log_a: float) -> float:
        z = np.exp(log_a) * f
        return float(np.mean(win * np.logaddexp(0.0, -z) + (1.0 - win) * np.logaddexp(0.0, z)))

    lo, hi = np.log(0.25), np.log(4.0)
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if loss(a) <= loss(b):
            hi = b
        else:
            lo = a
    return float(np.exp((lo + hi) / 2.0))


def dispersion(g: np.ndarray, sd: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(c, a): the factor ``c >= 1`` the posterior sd is scaled by, and the held-out
    calibration slope ``a`` it comes from (docs/method.md, "Calibration").

    The Laplace posterior describes the error of g *around the penalised fit*; the fit
    itself is shrunk (``truth ~ a g``), an error the posterior does not contain. On
    held-out duels the error of g is then ``(a - 1) g + e``, ``e`` the posterior's, so
    its mean square is ``sd^2 + (a - 1)^2 g^2``; ``c^2`` matches the posterior's mean
    variance to it: ``c^2 = mean(sd^2 + (a - 1)^2 g^2) / mean(sd^2)``. One outcome per
    duel identifies only this systematic part (the slope), so ``c`` never narrows.
    """
    g, sd = np.asarray(g, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    a = calibration_slope(g, sd, y)
    variance = float(np.mean(sd**2))
    if not variance > 0:
        return 1.0, a
    return float(np.sqrt(np.mean(sd**2 + (a - 1.0) ** 2 * g**2) / variance)), a


def with_holdout_dispersion(
    fn: PreferenceFunction,
    data: DuelData,
    holdout: np.ndarray,
    compute: Compute,
    rows: torch.Tensor | None = None,
) -> PreferenceFunction:
    """``fn`` with its posterior factor scaled by :func:`dispersion` on ``holdout`` duels
    (duels the final fit did not see); ``metadata["posterior"]`` records ``c`` and ``a``.
    ``rows``: the holdout duels' kernel rows to ``fn``'s centres, if at hand
    (:attr:`TrainingSystem.validation_rows`)."""
    if fn.posterior_factor is None or len(holdout) < MIN_CALIBRATION_DUELS:
        return fn
    start = time.perf_counter()
    holdout = np.asarray(holdout)
    assert rows is None or len(rows) == len(holdout), "rows of other duels"
    if len(holdout) > MAX_CALIBRATION_DUELS:
        rng = np.random.default_rng(len(holdout))
        picked = np.sort(rng.choice(len(holdout), MAX_CALIBRATION_DUELS, replace=False))
        holdout = holdout[picked]
        if rows is not None:
            rows = rows[torch.as_tensor(picked, device=rows.device)]
    ctx_pool = ctx_index = None
    if fn.kind == "cgpm":
        ctx_pool, ctx_index = data.contexts, data.context_index[holdout]
    g, sd = data_term.decision_and_sd(
        fn, data.items, data.left[holdout], data.right[holdout], ctx_pool, ctx_index,
        compute, rows=rows,
    )  # fmt: skip
    assert sd is not None
    c, a = dispersion(g, sd, data.y[holdout])
    info = dict(fn.metadata.get("posterior", {}))
    info.update(dispersion=c, calibration_slope=a, calibration_duels=len(holdout),
                seconds=info.get("seconds", 0.0) + time.perf_counter() - start)  # fmt: skip
    return replace(fn, posterior_factor=fn.posterior_factor * c,
                   metadata={**fn.metadata, "posterior": info})  # fmt: skip
