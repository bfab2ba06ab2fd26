"""Numerical guards (Cholesky fallback, Shapley kernel weights, deadlines): a clear error,
never a hang or an overflow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prefshap_core.errors import NumericalError
from prefshap_core.explain.cme.embedding import _cholesky_in_float64


def test_cholesky_fallback_refuses_nan_at_once() -> None:
    a = torch.eye(4, dtype=torch.float32)[None].clone()
    a[0, 1, 1] = float("nan")
    with pytest.raises(NumericalError, match="NaN or infinite"):
        _cholesky_in_float64(a)


def test_cholesky_fallback_gives_up_after_bounded_jitter() -> None:
    # Negative definite: no jitter of at most 1e-3 x the diagonal can fix it.
    a = -torch.eye(3, dtype=torch.float32)[None]
    with pytest.raises(NumericalError, match="singular"):
        _cholesky_in_float64(a)


def test_cholesky_fallback_still_repairs_rounding() -> None:
    # Rank-deficient PSD (a rounding casualty): a tiny jitter makes it factorise.
    v = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    a = (v.T @ v)[None]
    chol = _cholesky_in_float64(a)
    assert torch.isfinite(chol).all()
    np.testing.assert_allclose((chol @ chol.mT).numpy(), a.numpy(), atol=1e-6)


def test_kernel_weights_match_exact_and_survive_many_players() -> None:
    import math

    from prefshap_core.explain.shapley.coalitions import kernel_weights
    from prefshap_core.explain.shapley.stratified import sample_stratified_coalitions

    p = 12
    sizes = np.arange(p + 1)
    slow = [math.inf] + [(p - 1) / (math.comb(p, s) * s * (p - s)) for s in range(1, p)]
    np.testing.assert_allclose(kernel_weights(sizes, p), [*slow, math.inf], rtol=1e-12)
    # Beyond ~1,030 players C(p, s) overflowed a float (OverflowError while explaining).
    big = 1500
    w = kernel_weights(np.array([1, 2, 750, 1499]), big)
    assert np.all(np.isfinite(w)) and w[0] > 0 and w[-1] == w[0]
    coalitions = sample_stratified_coalitions(big, 8, seed=0)
    assert coalitions.masks.shape == (8, big) and not coalitions.exact


def test_deadline_progress_stops_at_the_first_late_checkpoint() -> None:
    from prefshap_core.errors import CancelledError, DeadlineExceeded
    from prefshap_core.progress import Progress, with_deadline

    seen: list[float] = []
    on_time = with_deadline(Progress(lambda u: seen.append(u.fraction)), 60.0, "Work")
    on_time.span(0.5, 1.0).update("half", 0.5)
    assert seen == [0.75]
    late = with_deadline(None, 0.0, "Preparing the demo")
    with pytest.raises(DeadlineExceeded, match="Preparing the demo took more than 0 s"):
        late.span(0.0, 0.5).update("training", 0.1)
    assert issubclass(DeadlineExceeded, CancelledError)
