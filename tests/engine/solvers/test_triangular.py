"""The panelled triangular products and solves equal their dense counterparts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prefshap_core.solvers.triangular import lower_inverse, solve_lower_by_lower, times_upper


def _lower(rng: np.random.Generator, m: int) -> torch.Tensor:
    return torch.as_tensor(np.tril(rng.standard_normal((m, m))) + 4.0 * np.eye(m))


@pytest.mark.parametrize("panel", [4, 13, 512])
def test_lower_inverse_by_panels_is_the_inverse(panel):
    lower = _lower(np.random.default_rng(6), 13)
    got = lower_inverse(lower, panel).numpy()
    np.testing.assert_allclose(got, np.linalg.inv(lower.numpy()), rtol=0, atol=1e-13)
    assert np.array_equal(np.triu(got, 1), np.zeros((13, 13)))


@pytest.mark.parametrize("panel", [4, 13, 512])
def test_solve_with_a_lower_right_hand_side_ignores_its_upper_triangle(panel):
    rng = np.random.default_rng(7)
    lower, rhs = _lower(rng, 13), _lower(rng, 13)
    # Whatever sits above the right-hand side's diagonal is not read.
    noisy = rhs + torch.as_tensor(np.triu(rng.standard_normal((13, 13)), 1))
    got = solve_lower_by_lower(lower, noisy, panel).numpy()
    np.testing.assert_allclose(got, np.linalg.solve(lower.numpy(), rhs.numpy()),
                               rtol=0, atol=1e-13)  # fmt: skip
    assert np.array_equal(np.triu(got, 1), np.zeros((13, 13)))


@pytest.mark.parametrize("panel", [4, 13, 512])
@pytest.mark.parametrize("transposed", [False, True])
def test_times_upper_is_the_product(panel, transposed):
    rng = np.random.default_rng(8)
    upper = _lower(rng, 13).T if transposed else _lower(rng, 13).T.contiguous()
    rows = torch.as_tensor(rng.standard_normal((5, 13)))
    got = times_upper(rows, upper, panel).numpy()
    np.testing.assert_allclose(got, rows.numpy() @ upper.numpy(), rtol=0, atol=1e-13)
