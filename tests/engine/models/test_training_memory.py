"""Training memory: the estimate counts what the solver path holds, refusals come before
allocating, and an allocation that still fails ends in the product's error."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prefshap_core import budget
from prefshap_core.cli import main
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.errors import MemoryBudgetError
from prefshap_core.paths import repo_root
from prefshap_core.solvers import preconditioner
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

FIXED = {
    "lengthscale_scale": 1.0,
    "utility_weight": 0.0,
    "penalty": 1e-4,
    "refine_lengthscales": False,
    "baseline": False,
}
TORCH_FAILURE = (
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
    "memory: you tried to allocate 968000000 bytes. Error code 12 (Cannot allocate memory)"
)


def test_a_training_that_would_not_fit_next_to_its_square_matrices_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = 3000
    # 2.5 m duels: 0.8 of them train, and M = m is then at the cap of half of those.
    data = synthetic_clusters(n_items=300, n_duels=int(2.5 * m), seed=0)
    n_train = len(split_duels(data.n_duels, 0).train)
    # What the solver holds at once: K_MM, its jittered copy, two Cholesky factors,
    # T T^T and, while a Newton step refactors A, its input and the new factor (7 m x m)
    # next to the cached K_nM. A job budget just below that cannot run it.
    held = 7 * m * m * 8 + n_train * m * 8
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, str(int(0.95 * held)))
    settings = TrainSettings(n_centres=m, **FIXED)
    peak, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    with pytest.raises(MemoryBudgetError, match="reduce the number of Nyström centres"):
        train(data, settings)
    assert time.perf_counter() - start < 5.0  # refused before the kernel matrices exist
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024 < 64 * 2**20
    assert budget.reserved_bytes() == 0


@pytest.mark.parametrize("failure", [RuntimeError(TORCH_FAILURE), MemoryError()])
def test_an_allocation_failure_is_the_products_error(
    monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    def cannot_allocate(*args, **kwargs):
        raise failure

    monkeypatch.setattr(preconditioner, "jittered_cholesky", cannot_allocate)
    data = synthetic_clusters(n_items=60, n_duels=600, seed=0)
    with pytest.raises(MemoryBudgetError, match="ran out of memory") as caught:
        train(data, TrainSettings(n_centres=50, **FIXED))
    if isinstance(failure, RuntimeError):
        assert "an allocation of 923 MiB failed" in str(caught.value)
    assert "reduce the number of Nyström centres" in str(caught.value)
    assert budget.reserved_bytes() == 0


def test_other_runtime_errors_are_not_taken_for_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(preconditioner, "jittered_cholesky", broken)
    data = synthetic_clusters(n_items=60, n_duels=600, seed=0)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        train(data, TrainSettings(n_centres=50, **FIXED))


_CAPPED_TRAIN = """
import os, resource, sys
from prefshap_core.cli import main
from prefshap_core.datasets.synthetic import synthetic_clusters  # imports done: then cap
vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (vm + 400 * 2**20, resource.RLIM_INFINITY))
sys.exit(main(["train", "--model", "gpm", "--data", "synthetic", "--n-centres", "3000",
               "--lengthscale-scale", "1", "--utility-weight", "0", "--penalty", "1e-4",
               "--no-refine-lengthscales",
               "--out", sys.argv[1], "--quiet"]))
"""


@pytest.mark.slow
def test_a_real_allocation_failure_in_the_cli_is_one_line(tmp_path: Path) -> None:
    # The machine has less memory than the budget says (here: an address-space cap).
    env = {**os.environ, "PYTHONPATH": str(repo_root()), budget.MEMORY_BUDGET_ENV: "100G"}
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED_TRAIN, str(tmp_path / "m.npz")],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "DefaultCPUAllocator" not in done.stderr
    assert "prefshap train: error: Training with 3,000 centres" in done.stderr
    assert "ran out of memory" in done.stderr


def test_cli_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    def cannot_allocate(*args, **kwargs):
        raise RuntimeError(TORCH_FAILURE)

    monkeypatch.setattr(preconditioner, "jittered_cholesky", cannot_allocate)
    code = main(
        ["train", "--model", "gpm", "--data", str(repo_root() / "sample_data"),
         "--out", str(tmp_path / "m.npz"), "--n-centres", "40", "--lengthscale-scale", "1",
         "--penalty", "1e-3", "--quiet"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "ran out of memory" in err


# -- the estimate against the measured peak ---------------------------------------------------
_MEASURE = """
import json, os, resource, sys
from prefshap_core import budget
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.workflow import training
from prefshap_core.workflow.settings import TrainSettings
m = int(sys.argv[1])
weights = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(sys.argv[2]).items()}
# 2.5 m duels: 0.8 of them train, and M = m is then at the cap of half of those.
data = synthetic_clusters(n_items=300, n_duels=int(2.5 * m), seed=0)
settings = TrainSettings(
    n_centres=m, lengthscale_scale=1.0, penalty=1e-4, refine_lengthscales=False,
    baseline=False, **weights)
seen = {}
reserve = budget.reserve
def spy(need, what, reduce):
    seen["need"] = need
    return reserve(need, what, reduce)
training.budget.reserve = spy
page = os.sysconf("SC_PAGE_SIZE")
before = int(open("/proc/self/statm").read().split()[1]) * page
training.train(data, settings)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"estimate": seen["need"], "peak": peak - before}))
"""


# The two larger sizes take 1.5-2 min each on two cores: run them with
# PREFSHAP_MEMORY_TESTS=1 (README, "Tests"); the suite always runs the first.
_ALL_SIZES = os.environ.get("PREFSHAP_MEMORY_TESTS") == "1"
_ON_REQUEST = pytest.mark.skipif(
    not _ALL_SIZES, reason="a 2 GB peak measurement: set PREFSHAP_MEMORY_TESTS=1 to run it"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "m, weights",
    [
        (4000, {"utility_weight": 0.0}),
        pytest.param(  # the weight grid: three K_nM at once
            4800, {"utility_weights": (0.0, 10.0)}, marks=_ON_REQUEST
        ),
        pytest.param(5600, {"utility_weight": 0.0}, marks=_ON_REQUEST),
    ],
)
def test_the_estimate_is_the_measured_peak_within_15_percent(m: int, weights: dict) -> None:
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    env.pop(budget.MEMORY_BUDGET_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(m), json.dumps(weights)],
        capture_output=True, text=True, env=env, timeout=900, check=True,
    )  # fmt: skip
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    estimate, peak = sizes["estimate"], sizes["peak"]
    print(
        f"{m} centres {weights}: estimate {estimate / 2**30:.2f} GiB, peak {peak / 2**30:.2f} GiB"
    )
    assert peak >= 2**30  # large enough that the square matrices dominate
    assert abs(estimate - peak) <= 0.15 * peak, (estimate / 2**30, peak / 2**30)
