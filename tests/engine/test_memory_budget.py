"""The memory budget: every job checks its memory need before allocating."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

import numpy as np
import pytest

from prefshap_core import budget
from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import MemoryBudgetError
from prefshap_core.explain.shapley.coalitions import coalition_count
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.solvers import logistic
from prefshap_core.workflow.explaining import explain_duels
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train, training_sizes


def test_physical_memory_reads_cgroup_limits_and_closes_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    total = budget.physical_memory_bytes()
    lower = tmp_path / "memory.max"
    lower.write_text(f"{total // 2}\n", encoding="ascii")
    unlimited = tmp_path / "unlimited"
    unlimited.write_text("max\n", encoding="ascii")
    files = [str(unlimited), str(tmp_path / "missing"), str(lower)]
    monkeypatch.setattr(budget, "_cgroup_limit_files", lambda: files)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert budget.physical_memory_bytes() == total // 2  # the lower limit wins
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_budget_defaults_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    physical = budget.physical_memory_bytes()
    monkeypatch.delenv(budget.MEMORY_BUDGET_ENV, raising=False)
    default = budget.current_budget()
    assert default.job_bytes == int(0.25 * physical)
    assert default.server_bytes == int(0.60 * physical)
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "512M,2GiB")
    assert budget.current_budget() == budget.MemoryBudget(512 * 2**20, 2 * 2**30)
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "10%")
    assert budget.current_budget().job_bytes == int(0.10 * physical)
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match="PREFSHAP_MEMORY_BUDGET"):
        budget.current_budget()


def test_estimates_grow_with_their_sizes() -> None:
    # The centre Gram dominates: 50,000 centres in float64 are 4 x 20 GB.
    assert budget.training_bytes(60_000, 50_000, 4) > 4 * 50_000**2 * 8
    assert budget.training_bytes(60_000, 300, 4) < 2**30
    # Centres beyond the training duels are never drawn.
    assert budget.training_bytes(100, 50_000, 4) == budget.training_bytes(100, 100, 4)
    assert coalition_count(4, 12, None) == 16
    assert coalition_count(20_000, 12, None) == 2 * 20_000 + 2048
    assert coalition_count(14, 12, 10**9) == 2**14


def _duels(n_duels: int, n_items: int = 40) -> DuelData:
    rng = np.random.default_rng(0)
    space = FeatureSpace(("a", "b"), ("a", "b"), np.arange(2), np.zeros(2), np.ones(2))
    left = rng.integers(0, n_items, n_duels)
    right = (left + 1 + rng.integers(0, n_items - 1, n_duels)) % n_items
    return DuelData(
        name="big",
        item_ids=np.array([f"i{k}" for k in range(n_items)]),
        items=rng.normal(size=(n_items, 2)),
        item_space=space,
        left=left,
        right=right,
        y=np.where(rng.random(n_duels) < 0.5, 1, -1).astype(np.int8),
        duel_ids=np.array([str(k) for k in range(n_duels)]),
    )


def test_fifty_thousand_centres_are_refused_before_allocating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "1G")
    data = _duels(70_000)
    settings = TrainSettings(n_centres=50_000, penalty=1.0, lengthscale_scale=1.0)
    with pytest.raises(MemoryBudgetError, match="Nyström centres"):
        train(data, settings)
    assert budget.reserved_bytes() == 0


def test_server_budget_is_shared_between_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "600M,1G")
    with budget.reserve(500 * 2**20, "first", "x"):
        with (
            pytest.raises(MemoryBudgetError, match="other jobs"),
            budget.reserve(600 * 2**20, "second", "x"),
        ):
            pass
        with budget.reserve(400 * 2**20, "third", "x"):
            assert budget.reserved_bytes() == 900 * 2**20
    assert budget.reserved_bytes() == 0


def _wide_function(n_features: int) -> PreferenceFunction:
    names = tuple(f"c{j}" for j in range(n_features))
    space = FeatureSpace(
        names, names, np.arange(n_features), np.zeros(n_features), np.ones(n_features)
    )
    items = np.zeros((3, n_features))
    return PreferenceFunction(
        kind="gpm",
        item_space=space,
        item_ids=np.array(["a", "b", "c"]),
        items=items,
        lengthscales=np.ones(n_features),
        centres_left=items[:1],
        centres_right=items[1:2],
        alpha=np.ones(1),
        cme_lambda=0.01,
    )


def test_twenty_thousand_columns_are_refused_before_explaining(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "1G")
    fn = _wide_function(20_000)
    data = DuelData(
        name="wide",
        item_ids=fn.item_ids,
        items=fn.items,
        item_space=fn.item_space,
        left=np.array([0, 1]),
        right=np.array([1, 2]),
        y=np.array([1, -1], dtype=np.int8),
        duel_ids=np.array(["d1", "d2"]),
    )
    with pytest.raises(MemoryBudgetError, match="feature columns"):
        explain_duels(fn, data, np.array([0, 1]))


def test_kernel_matrix_is_chunked_when_only_its_cache_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _duels(2_000)
    settings = TrainSettings(
        n_centres=200, penalty=1e-2, lengthscale_scale=1.0, cme_lambda=1e-2, baseline=False
    )
    split = split_duels(data.n_duels, 0)
    n_train = len(split.train)
    sizes, shapes = training_sizes(data, settings, split)
    assert sizes == (n_train, 200, 2, 8)
    without = budget.training_bytes(*sizes, kernel_cache_bytes=0, **shapes)
    copies = 3 + 2 * len(split.validation) / n_train  # the utility-weight grid's
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, str(int(without + 10_000 * copies) + 1))
    assert budget.kernel_cache_allowance(*sizes, **shapes) == 10_000 < n_train * 200 * 8
    chunked = train(data, settings)  # fits: K_nM used through item-by-item products
    monkeypatch.delenv(budget.MEMORY_BUDGET_ENV)
    # The cached K_nM would take exact Newton directions (a small problem); the chunked
    # one solves by CG: compare the products, not the two solvers.
    monkeypatch.setattr(logistic, "DENSE_NEWTON_MAX_CENTRES", 0)
    cached = train(data, settings)
    # The same model up to rounding: its predictions agree to ~1e-14 (alpha itself only
    # to ~1e-6 along the directions K_MM hardly sees, which no prediction reads).
    g = [
        fit.function.decision_on_pool(data.items, data.left, data.right)
        for fit in (chunked, cached)
    ]
    np.testing.assert_allclose(g[0], g[1], rtol=0, atol=1e-10 * np.abs(g[1]).max())


def test_the_estimate_counts_the_centres_the_fits_use() -> None:
    # 1,800 train + validation duels, K-fold selection: at most half of them are
    # centres, whatever was asked.
    data = _duels(2_000)
    split = split_duels(data.n_duels, 0)
    asked = TrainSettings(n_centres=2_000, penalty=1e-2, lengthscale_scale=1.0, baseline=False)
    sizes, _ = training_sizes(data, asked, split)
    assert sizes[1] == (len(split.train) + len(split.validation)) // 2 < 2_000
    fitted = train(data, asked)
    assert len(fitted.function.alpha) == sizes[1]


def test_tiny_data_may_use_every_duel_as_a_centre() -> None:
    data = _duels(120)
    split = split_duels(data.n_duels, 0)
    asked = TrainSettings(n_centres=2_000, penalty=1e-2, lengthscale_scale=1.0, baseline=False)
    sizes, _ = training_sizes(data, asked, split)
    assert sizes[1] == len(split.train) + len(split.validation)  # K-fold: all fitted duels
    assert len(train(data, asked).function.alpha) == sizes[1]
