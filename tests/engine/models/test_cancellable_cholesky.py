"""The Cholesky factorization a cancel can stop: one LAPACK call below BLOCKED_FROM (the
same numbers), blocked with checkpoints above it (the same factor to rounding)."""

from __future__ import annotations

import pytest
import torch

from prefshap_core.errors import CancelledError
from prefshap_core.progress import cancel_scope
from prefshap_core.solvers import cholesky
from prefshap_core.solvers.cholesky import cholesky_ex


def _spd(m: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, m + 5, generator=gen, dtype=torch.float64)
    return x @ x.T / m + 1e-3 * torch.eye(m, dtype=torch.float64)


def test_small_matrices_are_one_lapack_call_bit_for_bit() -> None:
    a = _spd(300)
    factor, info = cholesky_ex(a)
    assert info == 0 and torch.equal(factor, torch.linalg.cholesky(a))


def test_the_blocked_factor_matches_lapack_to_rounding() -> None:
    a = _spd(700)
    factor, info = cholesky_ex(a, blocked_from=100)
    assert info == 0
    torch.testing.assert_close(factor, torch.linalg.cholesky(a), rtol=0, atol=1e-12)
    assert torch.equal(factor, torch.tril(factor))


@pytest.mark.parametrize("bad", [10, 350, 690])
def test_the_blocked_info_names_the_first_bad_minor_as_lapack_does(bad: int) -> None:
    a = _spd(700)
    a[bad, bad] = -1.0
    assert cholesky_ex(a, blocked_from=100)[1] == int(torch.linalg.cholesky_ex(a)[1]) == bad + 1


def test_a_cancel_stops_the_blocked_factorization_between_steps(monkeypatch) -> None:
    monkeypatch.setattr(cholesky, "STEP_FLOPS", 1e6)  # many short steps
    calls = []

    def stop_at_the_fifth() -> bool:
        calls.append(1)
        return len(calls) >= 5

    with cancel_scope(stop_at_the_fifth), pytest.raises(CancelledError):
        cholesky_ex(_spd(600), blocked_from=100)
    assert len(calls) == 5
    steps = []
    with cancel_scope(lambda: steps.append(1) or False):
        cholesky_ex(_spd(600), blocked_from=100)
    assert len(steps) > 20  # a checkpoint every ~1e6 flops of 7e7: short steps


def test_cme_systems_check_for_cancel_between_systems_and_before_each_solve() -> None:
    from prefshap_core.explain.cme.base import CMESystem
    from prefshap_core.explain.cme.embedding import CholeskySolver

    def system(seed: int) -> CMESystem:
        a = _spd(30, seed)
        return CMESystem(torch.zeros(30, 2, dtype=torch.float64), a,
                         torch.ones(30, dtype=torch.float64), 0.1,
                         torch.ones(30, 3, dtype=torch.float64))  # fmt: skip

    systems = [system(k) for k in range(4)]
    solver = CholeskySolver(batch_equal_sizes=False)
    solved = solver.solve(systems)
    for s, x in zip(systems, solved, strict=True):  # still right
        torch.testing.assert_close((s.gram + 0.1 * torch.eye(30, dtype=torch.float64)) @ x, s.rhs)
    calls = []
    with cancel_scope(lambda: calls.append(1) or False):
        solver.solve(systems)
    assert len(calls) == 2 * len(systems)  # before each system and before each solve
    stop = lambda: calls.append(1) or len(calls) > 2 * len(systems) + 2  # noqa: E731
    with cancel_scope(stop), pytest.raises(CancelledError):
        solver.solve(systems)
