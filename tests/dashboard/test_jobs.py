"""Background jobs of the dashboard (no Streamlit needed): outcomes, progress, cancel."""

from __future__ import annotations

import threading

from dashboard.jobs import Job
from prefshap_core.errors import DataValidationError
from prefshap_core.progress import Progress


def test_done_job_keeps_result_and_last_progress() -> None:
    def work(progress: Progress) -> int:
        progress.update("half", 0.5)
        progress.update("all", 1.0)
        return 42

    job = Job("k", "Working", work).start()
    assert job.wait(10)
    assert job.state == "done" and job.result == 42
    assert job.update is not None and job.update.stage == "all"
    assert job.elapsed_s >= 0


def test_failures_are_kept_with_details() -> None:
    def bad_data(progress: Progress) -> None:
        raise DataValidationError("boom", file="duels.csv", row=3, column="left")

    def bug(progress: Progress) -> None:
        raise ZeroDivisionError("oops")

    user = Job("a", "A", bad_data).start()
    crash = Job("b", "B", bug).start()
    assert user.wait(10) and crash.wait(10)
    assert user.state == crash.state == "failed"
    assert user.user_error and "duels.csv, row 3" in str(user.error)
    assert not crash.user_error and "ZeroDivisionError" in crash.error_details


def test_cancel_stops_at_the_next_checkpoint() -> None:
    started = threading.Event()

    def endless(progress: Progress) -> None:
        started.set()
        while True:
            progress.update("looping", 0.1)

    job = Job("c", "C", endless).start()
    assert started.wait(10)
    assert not job.finished
    job.cancel()
    assert job.wait(10)
    assert job.state == "cancelled" and job.cancel_requested and job.result is None


def test_cancel_after_the_end_keeps_the_result() -> None:
    job = Job("d", "D", lambda progress: "ready").start()
    assert job.wait(10)
    job.cancel()
    assert job.state == "done" and job.result == "ready"
