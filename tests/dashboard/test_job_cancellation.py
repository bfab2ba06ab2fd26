"""Cancelling jobs: cancel reaches every long loop, abandoned jobs stop,
heavy jobs queue behind a server-wide limit with their position shown."""

from __future__ import annotations

import threading

import pytest
import torch

from dashboard.jobs import HeavyJobGate, Job
from prefshap_core.errors import CancelledError
from prefshap_core.kernels.operator import dense_operator
from prefshap_core.progress import Progress, cancel_scope, checkpoint
from prefshap_core.solvers.preconditioner import triangular_gram


class _CancelAfter:
    """should_cancel that says yes from its (n + 1)-th call on, and counts calls."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.n


def test_preconditioner_product_checks_for_cancel_between_blocks() -> None:
    lower = torch.tril(torch.rand(64, 64, dtype=torch.float64)) + torch.eye(64)
    full = triangular_gram(lower, block=8)
    torch.testing.assert_close(full, lower.T @ lower)  # still right
    stop = _CancelAfter(3)
    with cancel_scope(stop), pytest.raises(CancelledError):
        triangular_gram(lower, block=8)
    assert stop.calls == 4  # stopped at the fourth of eight blocks


def test_large_preconditioner_blocks_stay_short() -> None:
    # The default block keeps 2 * rows * m^2 flops per block near 1e9 (well under 2 s).
    from prefshap_core.solvers import preconditioner

    seen: list[int] = []
    lower = torch.eye(8000, dtype=torch.float32)
    stop = _CancelAfter(2)
    with cancel_scope(stop), pytest.raises(CancelledError):
        triangular_gram(lower)
    seen.append(stop.calls)
    rows = int(min(256, max(8, preconditioner._BLOCK_FLOPS / (2 * 8000**2))))
    assert rows == 8 and seen == [3]


def test_kernel_cache_build_is_cancellable() -> None:
    matrix = torch.rand(5000, 40, dtype=torch.float64)
    with cancel_scope(_CancelAfter(0)), pytest.raises(CancelledError):
        dense_operator(matrix, torch.arange(40))
    assert dense_operator(matrix, torch.arange(40)).cached  # no scope: builds


def test_checkpoint_outside_a_job_never_raises() -> None:
    checkpoint()
    with cancel_scope(lambda: False):
        checkpoint()


def test_abandoned_job_is_cancelled() -> None:
    started = threading.Event()

    def endless(progress: Progress) -> None:
        started.set()
        while True:
            checkpoint()  # engine loops only, no Progress

    job = Job("a", "A", endless, abandon_after_s=0.2).start()
    assert started.wait(10)
    assert job.wait(20)
    assert job.state == "cancelled" and job.abandoned


def test_touched_job_is_not_abandoned() -> None:
    release = threading.Event()

    def waits(progress: Progress) -> str:
        while not release.is_set():
            progress.update("waiting", 0.5)
            release.wait(0.05)
        return "ok"

    job = Job("t", "T", waits, abandon_after_s=0.5).start()
    for _ in range(15):  # a page polling it for ~1.5 s
        job.touch()
        release.wait(0.1)
    release.set()
    assert job.wait(10)
    assert job.state == "done" and not job.abandoned


def test_heavy_jobs_queue_with_their_position_and_cancel_while_queued() -> None:
    gate = HeavyJobGate(1)
    first_started, release = threading.Event(), threading.Event()

    def first_work(progress: Progress) -> str:
        first_started.set()
        release.wait(20)
        return "first"

    first = Job("1", "First", first_work, heavy=True, gate=gate).start()
    assert first_started.wait(10)
    second = Job("2", "Second", lambda p: "second", heavy=True, gate=gate).start()
    # The gate serves in arrival order: the third job starts only once the second
    # has queued, or a loaded machine may let it arrive first.
    for _ in range(200):
        if second.queue_position == 1:
            break
        release.wait(0.05)
    third = Job("3", "Third", lambda p: "third", heavy=True, gate=gate).start()
    for _ in range(200):
        if second.queue_position == 1 and third.queue_position == 2:
            break
        release.wait(0.05)
    assert (second.queue_position, third.queue_position) == (1, 2)
    assert second.update is not None and "position 1" in second.update.stage
    third.cancel()
    assert third.wait(10) and third.state == "cancelled"
    assert gate.n_running == 1
    release.set()
    assert first.wait(10) and second.wait(10)
    assert (first.result, second.result) == ("first", "second")
    assert gate.n_running == 0
