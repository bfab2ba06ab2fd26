"""The Dask executor gives the in-process numbers exactly, survives a killed worker,
cancels, and fails fast on an unreachable scheduler (loopback only: a LocalCluster of
two worker processes, one thread each)."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import time
import types

import cloudpickle
import numpy as np
import pytest
import torch
from distributed import Client, LocalCluster

from prefshap_core.errors import CancelledError
from prefshap_core.explain import Explainer, ExplainOptions, LocalExecutor, Shapley
from prefshap_core.explain.dask_executor import (
    DaskExecutor,
    SchedulerUnreachableError,
    _blas_threads,
)
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.progress import Progress

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2), ("size", 1)]
CONTEXT = [("surface", 3), ("temp", 1), ("wind", 1)]
SAMPLED = {"shapley": Shapley("sampled", 16), "seed": 3}

# The slow game below travels by value (workers cannot import this test module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    # Worker processes are spawned, and spawn re-runs the parent's __main__ file: after
    # the dashboard's AppTests that is dashboard/app.py. A bare __main__ meanwhile.
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()
    sys.modules["__main__"] = main


def model(kind: str, seed: int = 1):
    extra = {"context_groups": CONTEXT} if kind == "cgpm" else {}
    return random_preference_function(
        kind, n_items=16, n_centres=10, groups=GROUPS, seed=seed, levels=2, **extra
    )


def duels(fn, n: int, seed: int):
    rng = np.random.default_rng(seed)
    left, right = rng.integers(0, 16, n), rng.integers(0, 16, n)
    contexts = None if fn.contexts is None else fn.contexts[rng.integers(0, len(fn.contexts), n)]
    return left, right, contexts


class PartialsRecorder(LocalExecutor):
    """In-process, recording what each batch hands to the estimator's reduction."""

    def __init__(self) -> None:
        self.nbytes, self.shapes = 0, []

    def map(self, work, batches, on_done=None):
        out = super().map(work, batches, on_done)
        self.nbytes += sum(part.nbytes for part in out)
        self.shapes += [part.shape for part in out]
        return out


def explain(fn, options, left, right, contexts=None, progress=None):
    return Explainer(fn, options)(left, right, contexts=contexts, progress=progress)


def assert_same(a, b) -> None:
    assert np.array_equal(a.values, b.values)
    assert np.array_equal(a.standard_errors, b.standard_errors, equal_nan=True)
    assert np.array_equal(a.outputs, b.outputs)
    assert np.array_equal(a.base_values, b.base_values)


@pytest.mark.parametrize(
    ("kind", "what", "extra"),
    [
        ("gpm", "items", {}),
        ("cgpm", "items", {}),
        ("cgpm", "context", {}),
        ("gpm", "items", SAMPLED),
        ("cgpm", "context", {**SAMPLED, "shapley": Shapley("sampled", 4)}),
    ],
    ids=["exact-gpm", "exact-cgpm-items", "exact-context", "sampled-items", "sampled-context"],
)
def test_cluster_gives_the_in_process_numbers(client, kind, what, extra) -> None:
    fn = model(kind)
    left, right, contexts = duels(fn, 12, seed=2)
    recorder = PartialsRecorder()
    options = ExplainOptions(what=what, task_coalitions=4, executor=recorder, **extra)
    here = explain(fn, options, left, right, contexts)
    executor = DaskExecutor(client)
    there = explain(
        fn, ExplainOptions(what=what, task_coalitions=4, executor=executor, **extra),
        left, right, contexts,
    )  # fmt: skip
    assert there.meta["shapley"] == ("sampled" if extra else "exact")
    assert_same(here, there)
    # Tasks send back the estimator's statistics (what finish() sums), never the values.
    assert executor.transfer.returned_bytes == recorder.nbytes
    p, n_unique = len(there.player_names), there.meta["n_unique_duels"]
    assert recorder.shapes[0] == (p, n_unique)


def test_default_partition_is_the_same_for_every_executor(client) -> None:
    fn = model("gpm", seed=5)
    left, right, _ = duels(fn, 10, seed=5)
    here = explain(fn, ExplainOptions(), left, right)
    executor = DaskExecutor(client)
    there = explain(fn, ExplainOptions(executor=executor), left, right)
    assert executor.transfer.tasks > 1
    assert_same(here, there)
    # Workers start with 1 BLAS thread; tasks run with this process's counts (the last
    # bit of large OpenBLAS products depends on it).
    expected = (torch.get_num_threads(), _blas_threads())
    assert (executor.torch_threads, executor.blas_threads) == expected
    on_workers = client.run(lambda: (__import__("torch").get_num_threads(), _blas_threads()))
    assert expected in set(on_workers.values())  # a worker that ran none keeps Dask's 1


def test_game_travels_without_its_caches() -> None:
    fn = model("gpm")
    explainer = Explainer(fn)
    explainer(*duels(fn, 6, seed=1)[:2])
    game = explainer._game
    assert game is not None and len(game.embedding.cache) > 0
    copy = pickle.loads(pickle.dumps(game))
    assert len(copy.embedding.cache) == 0 and copy.embedding._pool_universe is None
    assert copy.embedding.cache.max_bytes == game.embedding.cache.max_bytes
    assert len(game.embedding.cache) > 0  # the original keeps them


class SlowGame:
    """A game whose batches take a while (so a worker can be killed mid-run)."""

    def __init__(self, game, seconds: float) -> None:
        self.game, self.seconds = game, seconds
        self.what, self.space, self.problem = game.what, game.space, game.problem

    def use(self, backend) -> None:
        self.game.use(backend)

    def boundary(self, batch):
        return self.game.boundary(batch)

    def bind(self, batch):
        return SlowBound(self.game.bind(batch), self.seconds)


class SlowBound:
    def __init__(self, bound, seconds: float) -> None:
        self.bound, self.seconds = bound, seconds

    def values(self, masks, coalition_batch, on_batch=None):
        time.sleep(self.seconds)
        return self.bound.values(masks, coalition_batch, on_batch)


def slow_explainer(fn, options, left, right, seconds: float) -> Explainer:
    explainer = Explainer(fn, options)
    explainer.coalition_values(left[:1], right[:1])  # builds the game
    explainer._game = SlowGame(explainer._game, seconds)
    return explainer


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, SAMPLED], ids=["exact", "sampled"])
def test_a_worker_killed_mid_run_changes_nothing(client, extra) -> None:
    fn = model("gpm", seed=7)
    left, right, _ = duels(fn, 10, seed=7)
    here = explain(fn, ExplainOptions(task_coalitions=2, **extra), left, right)
    options = ExplainOptions(task_coalitions=2, executor=DaskExecutor(client), **extra)
    explainer = slow_explainer(fn, options, left, right, seconds=0.2)
    killed: list[int] = []

    def kill_one(update) -> None:
        if not killed and 0 < update.fraction < 1:
            pids = client.run(os.getpid)
            killed.append(next(iter(pids.values())))
            os.kill(killed[0], signal.SIGKILL)

    there = explainer(left, right, progress=Progress(kill_one))
    assert killed, "no worker was killed during the run"
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)
    assert_same(here, there)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next tests


def test_cancel_stops_the_run_and_its_tasks(client) -> None:
    fn = model("gpm", seed=8)
    left, right, _ = duels(fn, 10, seed=8)
    executor = DaskExecutor(client)
    options = ExplainOptions(task_coalitions=2, executor=executor)
    explainer = slow_explainer(fn, options, left, right, seconds=0.2)
    progress = Progress(should_cancel=lambda: executor.transfer.tasks > 0)  # once submitted
    with pytest.raises(CancelledError):
        explainer(left, right, progress=progress)
    for _ in range(100):  # the scheduler forgets cancelled tasks asynchronously
        processing = [k for keys in client.processing().values() for k in keys]
        if not any(str(k).startswith("prefshap-") for k in processing):
            break
        time.sleep(0.1)
    assert not any(str(k).startswith("prefshap-") for k in processing)


def test_unreachable_scheduler_errors_with_the_address_within_the_timeout() -> None:
    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    fn = model("gpm")
    options = ExplainOptions(executor=DaskExecutor(address, connect_timeout=1))
    start = time.monotonic()
    with pytest.raises(SchedulerUnreachableError, match=address):
        explain(fn, options, *duels(fn, 3, seed=1)[:2])
    # bounded, not a hang (generous: the machine may be loaded)
    assert time.monotonic() - start < 30


def test_dashboard_uses_the_cluster_named_by_the_environment(client, monkeypatch, tmp_path) -> None:
    from types import SimpleNamespace

    from dashboard.services.cluster import CLUSTER_ENV, cluster_address, cluster_executor
    from dashboard.services.explain_requests import inline_request, request
    from dashboard.services.explanation_cache import ExplanationCache
    from dashboard.state import Precision
    from prefshap_core.cache import DiskCache

    fn = model("gpm", seed=9)
    trained = SimpleNamespace(
        data_fp="data",
        settings_fp="settings",
        function=fn,
        settings=SimpleNamespace(dtype="float64"),
    )
    loaded = SimpleNamespace(fingerprint="data", title="t")
    duel_rows = np.arange(4)
    monkeypatch.delenv(CLUSTER_ENV, raising=False)
    assert cluster_executor() is None and cluster_address() is None
    local = request(loaded, trained, duel_rows, precision=Precision(), executor=None)
    address = client.scheduler.address
    monkeypatch.setenv(CLUSTER_ENV, address)
    executor = cluster_executor()  # what a page reads once and passes
    remote = request(loaded, trained, duel_rows, precision=Precision(), executor=executor)
    assert isinstance(remote.options.executor, DaskExecutor)
    assert remote.options.executor.address == address == cluster_address()
    assert remote.key == local.key  # the same numbers: the same cache entries
    cache = ExplanationCache(DiskCache(tmp_path))
    left, right, _ = duels(fn, 8, seed=9)
    here = cache.explainer(local)(left, right)
    there_explainer = cache.explainer(remote)
    assert there_explainer.options.executor is remote.options.executor
    assert_same(here, there_explainer(left, right))
    # a what-if duel (inline rows) runs on the cluster too, with the same numbers
    rows = fn.items[[left[0]]] + 0.25, fn.items[[right[0]]]
    inline_local = inline_request(loaded, trained, *rows, precision=Precision(), executor=None)
    inline_remote = inline_request(loaded, trained, *rows, precision=Precision(), executor=executor)
    assert inline_remote.key == inline_local.key
    assert cache.explainer(inline_remote) is there_explainer
    assert_same(
        Explainer(fn, ExplainOptions())(*rows),
        ExplanationCache(DiskCache(tmp_path)).compute(inline_remote),
    )


@pytest.mark.slow
def test_cli_scheduler_and_workers_give_the_in_process_csv(client, tmp_path, capsys) -> None:
    import pandas as pd

    from prefshap_core.cli import main
    from prefshap_core.models.model_file import save_model

    fn = model("gpm", seed=10)
    path = save_model(fn, tmp_path / "m.npz")
    left, right, _ = duels(fn, 9, seed=10)
    ids = np.asarray(fn.item_ids)
    pd.DataFrame({"left": ids[left], "right": ids[right]}).to_csv(tmp_path / "d.csv", index=False)
    base = ["explain", "--model", str(path), "--duels", str(tmp_path / "d.csv"), "--samples", "20"]
    runs = {
        "here": [],
        "scheduler": ["--scheduler", client.scheduler.address],
        "workers": ["--workers", "1"],
    }
    for name, extra in runs.items():
        assert main([*base, "--out", str(tmp_path / f"{name}.csv"), "--quiet", *extra]) == 0
    here = pd.read_csv(tmp_path / "here.csv")
    assert "se:a" in here.columns  # a sampled run, with standard errors
    for name in ("scheduler", "workers"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / f"{name}.csv"), here, check_exact=True)
    with pytest.raises(SystemExit):  # argparse: they exclude each other
        main(
            [*base, "--out", str(tmp_path / "x.csv"), "--workers", "2", "--scheduler", "tcp://a:1"]
        )
    capsys.readouterr()
    address = "tcp://127.0.0.1:9"
    code = main([*base, "--out", str(tmp_path / "x.csv"), "--scheduler", address,
                 "--connect-timeout", "1"])  # fmt: skip
    assert code != 0 and address in capsys.readouterr().err
