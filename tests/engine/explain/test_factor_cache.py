"""Kept coalition solutions: the store's eviction rule, and the solver that makes them."""

from __future__ import annotations

import torch

from prefshap_core.explain.cme.base import CMESystem
from prefshap_core.explain.cme.cache import FactorCache
from prefshap_core.explain.cme.embedding import CholeskySolver
from prefshap_core.kernels.rbf import scaled_gram as rbf

MB = 1 << 20


def entry(megabytes: float) -> tuple[torch.Tensor, ...]:
    return (torch.ones(int(megabytes * MB) // 8, dtype=torch.float64),)


def test_entries_of_the_current_call_are_never_evicted_for_another() -> None:
    cache = FactorCache(3 * MB)
    cache.begin_call()
    for key in "abc":
        cache.put(key, entry(1))
    cache.put("d", entry(1))  # no room, and a, b, c belong to this call: dropped
    assert cache.get("d") is None and len(cache) == 3
    cache.begin_call()
    assert cache.get("b") is not None  # used in this call: protected
    cache.put("d", entry(1))  # evicts the oldest of the earlier call's entries
    assert cache.get("a") is None
    assert all(cache.get(k) is not None for k in "bcd")
    assert cache.bytes == 3 * MB
    cache.put("huge", entry(4))  # larger than the whole budget: dropped
    assert cache.get("huge") is None and cache.bytes == 3 * MB


def test_one_system_is_solved_in_lapack_layout_with_cholesky_solve_numbers() -> None:
    rng = torch.Generator().manual_seed(0)
    points = torch.randn(60, 3, generator=rng, dtype=torch.float64)
    weights = torch.rand(60, generator=rng, dtype=torch.float64) + 0.5
    rhs = torch.randn(60, 25, generator=rng, dtype=torch.float64)
    (x,) = CholeskySolver().solve([CMESystem(points, rbf(points, points), weights, 0.3, rhs)])
    assert x.shape == (60, 25) and x.stride() == (1, 60)  # column-major: no copy for LAPACK
    root_w = weights.sqrt()
    a = root_w[:, None] * rbf(points, points) * root_w[None, :]
    a += 0.3 * torch.eye(60, dtype=torch.float64)
    expected = torch.cholesky_solve(rhs, torch.linalg.cholesky(a))
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(a @ x, rhs, rtol=0, atol=1e-11)
    # the solver forms the Gram itself when a system comes without one: the same floats
    (again,) = CholeskySolver().solve([CMESystem(points, None, weights, 0.3, rhs)])
    torch.testing.assert_close(again, x, rtol=0, atol=0)
    # and a batch of two (the CUDA path) agrees
    pair = CholeskySolver(batch_equal_sizes=True).solve(
        [CMESystem(points, None, weights, 0.3, rhs)] * 2
    )
    for solved in pair:
        torch.testing.assert_close(solved, x, rtol=0, atol=1e-14)
