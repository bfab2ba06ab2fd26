"""Job lanes and reloads: small jobs never queue behind heavy ones; a reload of the same
session (its token) finds its jobs again; job threads run with the CLI's threads."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dashboard import jobs as jobs_module
from dashboard.jobs import (
    HEAVY_JOBS,
    JOB_THREAD_NAME,
    SMALL_JOB_S,
    SMALL_JOBS,
    HeavyJobGate,
    Job,
    SessionJobs,
    lane_for,
)
from dashboard.services import job_estimates
from prefshap_core.explain.cme.select import estimate_flops
from prefshap_core.explain.options import ExplainOptions, Shapley
from prefshap_core.progress import checkpoint

# Waits on wall time: generous for a CI machine at load ~6.
MARGIN_S = 10.0


def _blocker(release: threading.Event, started: threading.Event):
    def work(progress) -> str:
        started.set()
        while not release.wait(0.05):
            checkpoint()
        return "heavy done"

    return work


def test_lanes_by_estimate() -> None:
    assert lane_for(None) is HEAVY_JOBS
    assert lane_for(SMALL_JOB_S) is HEAVY_JOBS
    assert lane_for(SMALL_JOB_S - 0.01) is SMALL_JOBS
    assert Job("k", "K", lambda p: None, heavy=True, estimate_s=1.0)._gate is SMALL_JOBS


def test_a_small_job_starts_while_heavy_ones_fill_their_lane_and_queue(monkeypatch) -> None:
    # Lanes of this test's own: a job an earlier test left running holds no slot here.
    monkeypatch.setattr(jobs_module, "HEAVY_JOBS", HeavyJobGate(HEAVY_JOBS.capacity))
    monkeypatch.setattr(jobs_module, "SMALL_JOBS", HeavyJobGate(SMALL_JOBS.capacity))
    release = threading.Event()
    heavy = []
    try:
        for k in range(jobs_module.HEAVY_JOBS.capacity + 1):  # every slot taken, one waiting
            started = threading.Event()
            heavy.append((Job(f"h{k}", "H", _blocker(release, started), heavy=True), started))
            heavy[-1][0].start()
            # The gate serves in arrival order: let this one arrive before the next.
            deadline = time.monotonic() + MARGIN_S
            while not (started.is_set() or heavy[-1][0].queue_position > 0):
                assert time.monotonic() < deadline, "a heavy job neither ran nor queued"
                time.sleep(0.01)
        assert all(s.wait(MARGIN_S) for _, s in heavy[:-1])
        deadline = time.monotonic() + MARGIN_S
        while heavy[-1][0].queue_position == 0:
            assert time.monotonic() < deadline, "the extra heavy job never queued"
            time.sleep(0.02)
        began = threading.Event()
        clicked = time.monotonic()
        small = Job("s", "S", lambda p: began.set() or 42, heavy=True, estimate_s=0.5).start()
        assert began.wait(MARGIN_S)
        assert small.wait(MARGIN_S) and small.result == 42
        assert time.monotonic() - clicked < MARGIN_S
        assert heavy[-1][0].queue_position >= 1  # the heavy one still waits
    finally:
        release.set()
        for job, _ in heavy:
            job.wait(MARGIN_S)
    assert all(job.state == "done" for job, _ in heavy)


def _request(n_items: int, n_groups: int, n_centres: int, n_duels: int, shapley: str):
    data = SimpleNamespace(
        items=torch.zeros(n_items, n_groups).numpy(),
        item_space=SimpleNamespace(n_groups=n_groups),
        contexts=None,
        context_space=None,
    )
    return SimpleNamespace(
        loaded=SimpleNamespace(data=data),
        model=SimpleNamespace(function=SimpleNamespace(n_centres=n_centres)),
        options=ExplainOptions(shapley=Shapley.parse(shapley)),
        what="items",
        n_duels=n_duels,
    )


def test_explanation_estimates_follow_the_engine_cost_model() -> None:
    sample = _request(60, 5, 200, 25, "auto")  # the sample upload, 25 duels
    assert job_estimates.n_coalitions(sample) == 2**5
    rows, queries = 60, 50
    flops = estimate_flops(rows, 5, 200, queries)
    nominal = 2**5 * min(flops.values()) / 3e10  # the CPU float64 nominal rate
    estimate = job_estimates.explain_estimate_s(sample)  # type: ignore[arg-type]
    assert estimate == pytest.approx(job_estimates.SLOWDOWN * nominal, rel=0.05)
    assert estimate < SMALL_JOB_S
    sampled = _request(60, 20, 200, 25, "sampled:1000")
    assert job_estimates.n_coalitions(sampled) == 1000
    large = _request(5000, 10, 3000, 1000, "exact")  # thousands of items, every coalition
    assert job_estimates.explain_estimate_s(large) >= SMALL_JOB_S  # type: ignore[arg-type]


def test_a_token_bound_again_gets_the_same_jobs() -> None:
    registry = SessionJobs(keep_s=60)
    first: dict[str, Job] = {}
    job = Job("train:x", "T", lambda p: 1)
    first["train:x"] = job
    assert registry.bind("a" * 32, first) is first
    reloaded: dict[str, Job] = {"explain:y": Job("explain:y", "E", lambda p: 2)}
    shared = registry.bind("a" * 32, reloaded)  # the reload's new session
    assert shared is first and shared["train:x"] is job and "explain:y" in shared
    other = registry.bind("b" * 32, {})
    assert other is not first and not other


def test_tokens_are_forgotten_after_the_window_once_their_jobs_ended() -> None:
    registry = SessionJobs(keep_s=0.0)
    release, started = threading.Event(), threading.Event()
    running = Job("r", "R", _blocker(release, started)).start()
    registry.bind("a" * 32, {"r": running})
    registry.bind("b" * 32, {"d": Job("d", "D", lambda p: 0).start()})
    time.sleep(0.05)
    registry.bind("c" * 32, {})  # binding sweeps: b's jobs have ended, a's runs
    assert len(registry) == 2
    release.set()
    assert running.wait(MARGIN_S)
    time.sleep(0.05)
    registry.bind("c" * 32, {})
    assert len(registry) == 1


def test_job_threads_have_the_cli_thread_settings_and_a_name() -> None:
    def work(progress) -> tuple[int, str]:
        comm = Path(f"/proc/self/task/{threading.get_native_id()}/comm")
        name = comm.read_text().strip()
        return torch.get_num_threads(), name

    if not os.path.exists("/proc/self/task"):
        pytest.skip("no /proc: thread names are Linux only")
    job = Job("t", "T", work).start()
    assert job.wait(MARGIN_S)
    assert job.result == (torch.get_num_threads(), JOB_THREAD_NAME)
    assert jobs_module.JOB_THREAD_NAME == "prefshap-job"  # benchmarks/bench_dashboard.py


@pytest.mark.slow
def test_a_reload_of_the_session_shows_its_running_training() -> None:
    from streamlit.testing.v1 import AppTest

    from dashboard import pages
    from tests.dashboard.apptest import APP, TIMEOUT_S, assert_clean, new_app, sample_upload

    tab = sample_upload(new_app())
    token = tab.query_params["session"]
    token = token[0] if isinstance(token, list) else token
    (loaded,) = [d for d in tab.session_state["datasets"].values() if d.source == "upload"]
    release, started = threading.Event(), threading.Event()
    key = f"train:{loaded.fingerprint}"  # services.training.training_job_key
    running = Job(key, "Training GPM on the upload", _blocker(release, started), page="train")
    tab.session_state["jobs"][key] = running.start()
    tab.switch_page(pages.TRAIN.script).run()  # the page shows it; the run binds the token
    try:
        assert started.wait(MARGIN_S)
        reload = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
        reload.query_params["session"] = token
        reload.run()
        reload.switch_page(pages.TRAIN.script).run()
        assert_clean(reload)
        assert reload.session_state["jobs"][key] is running
        assert len(reload.get("progress")) == 1
        assert not any("press Train" in i.value for i in reload.info)
        assert not running.finished  # touched by the reload: not abandoned
    finally:
        release.set()
    assert running.wait(MARGIN_S) and running.state == "done"
