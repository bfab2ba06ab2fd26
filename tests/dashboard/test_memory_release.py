"""Memory release: rounds of training and explaining return their memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from dashboard import state
from dashboard.jobs import Job
from dashboard.services.explanation_cache import ExplanationStore
from prefshap_core.explain.explanation import Explanation
from prefshap_core.paths import repo_root

ROUNDS_RUN = 14
ROUNDS = textwrap.dedent(
    f"""
    import gc, json, os, sys, tempfile, warnings
    warnings.simplefilter("ignore")
    os.environ["PREFSHAP_CACHE_DIR"] = tempfile.mkdtemp()
    sys.path.insert(0, os.getcwd())
    from dashboard import sources, state
    from dashboard.services.explain_requests import request
    from dashboard.services.explanation_cache import explanation_cache
    from dashboard.services.training import train_now
    from dashboard.jobs import Job
    from prefshap_core.data.build import load_directory
    from prefshap_core.workflow.fingerprints import data_fingerprint
    from prefshap_core.workflow.settings import TrainSettings

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    data = load_directory("sample_data")
    fp = data_fingerprint(data)
    loaded = sources.state.LoadedData("upload:x", "x", data, fp, "upload")
    sizes = []
    for r in range({ROUNDS_RUN}):  # a new model and explanation every round, as visitors do
        settings = TrainSettings(kind="cgpm", seed=r, n_centres=100, penalty=1e-3,
                                 lengthscale_scale=1.0, cme_lambda=1e-2)
        job = Job("train", "t", lambda p: train_now(loaded, settings, p)).start()
        job.wait()
        model = job.result
        for what in ("items", "context"):
            req = request(loaded, model, model.result.split.test, what,
                          precision=state.Precision(), executor=None)
            job = Job("x", "x", lambda p: explanation_cache().compute(req, p)).start()
            job.wait()
            assert job.state == "done", job.error_details
        del job, model, req
        gc.collect()
        sizes.append(rss_mb())
    print(json.dumps(sizes))
    """
)


@pytest.mark.slow
def test_rss_is_flat_over_train_and_explain_rounds() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS], cwd=repo_root(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    sizes = np.array(
        [float(v) for v in done.stdout.strip().splitlines()[-1].strip("[]").split(",")]
    )
    steps = np.diff(sizes[2:])  # from round 3 on (rounds 1-2 warm the caches up)
    # A leak shows in every round; glibc and the BLAS threads add a one-time step of
    # 5-20 MB at a random round in some runs (seen with the posterior's factorizations),
    # which is not held memory growing. So: no growth in the typical round, and none
    # over rounds 3..14 once the largest single step is left out.
    assert np.median(steps) < 0.5, sizes
    assert steps.sum() - steps.max() < 5.0, sizes


def _explanation(n: int) -> Explanation:
    return Explanation(
        values=np.zeros((n, 4)), base_values=np.zeros(n), outputs=np.zeros(n),
        data=np.zeros((n, 4)), player_names=("a", "b", "c", "d"),
        duel_ids=np.arange(n).astype(str), left_ids=np.zeros(n).astype(str),
        right_ids=np.ones(n).astype(str), winners=np.ones(n, dtype=np.int8),
    )  # fmt: skip


def test_explanation_store_is_bounded_by_bytes() -> None:
    store = ExplanationStore(capacity=100, max_bytes=2 * 2**20)
    for k in range(20):
        store.put(f"k{k}", ("d", "s", "items"), _explanation(2_000))  # ~0.84 MB each
    assert store.n_bytes <= 2 * 2**20 and 1 <= len(store) <= 3
    assert store.get("k19") is not None and store.get("k0") is None


def test_finished_jobs_release_their_work_and_are_pruned(monkeypatch) -> None:
    session: dict = {"jobs": {}}
    monkeypatch.setattr(state, "jobs", lambda: session["jobs"])
    big = np.ones(2**20)
    job = Job("j", "J", lambda p: float(big.sum())).start()
    assert job.wait(10) and job._work is None  # the closure (and `big`) can be freed
    for k in range(20):
        finished = Job(f"explain:{k}", "E", lambda p, k=k: k).start()
        finished.wait(10)
        state.add_job(finished)
    running_release = threading.Event()
    running = Job("explain:new", "E", lambda p: running_release.wait(10)).start()
    state.add_job(running)
    assert len(session["jobs"]) <= state.MAX_FINISHED_JOBS + 1
    assert "explain:new" in session["jobs"] and "explain:19" in session["jobs"]
    running_release.set()
    running.wait(10)
