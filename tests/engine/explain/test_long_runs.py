"""Interactions and side-aware values: progress per batch, cancellable, in the budget.

A side-aware explanation embeds every distinct side coalition before it contracts
any; an interaction run keeps the whole 2^p-row table of every duel. Both used to run
for minutes at 0 % with their temporaries outside the memory budget.
"""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest

from prefshap_core import budget
from prefshap_core.errors import CancelledError, MemoryBudgetError
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.cme import embedding as cme_embedding
from prefshap_core.explain.interaction_explanation import explain_interactions
from prefshap_core.explain.options import CholeskyOptions
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.progress import ETA_AFTER_S, Progress, cancel_scope


def _model(n_groups: int, n_items: int = 40, n_centres: int = 30):
    groups = [(f"g{k}", 1) for k in range(n_groups)]
    return random_preference_function(
        "gpm", n_items=n_items, n_centres=n_centres, groups=groups, seed=3, levels=6
    )


def _duels(n_items: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    left = rng.integers(0, n_items, n)
    return left, (left + 1 + rng.integers(0, n_items - 1, n)) % n_items


@pytest.fixture()
def solves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many coalition CME embeddings were asked for (one entry per mask)."""
    calls: list[int] = []
    original = cme_embedding.CoalitionEmbedding.gammas

    def counted(self, masks, universe):
        calls.extend([1] * len(masks))
        return original(self, masks, universe)

    monkeypatch.setattr(cme_embedding.CoalitionEmbedding, "gammas", counted)
    return calls


SAMPLED_SIDES = ExplainOptions(
    what="sides", shapley="sampled:80", cme=CholeskyOptions(), factor_cache_bytes=0
)


# -- side-aware values ------------------------------------------------------------------------
def test_sampled_side_values_report_progress_per_batch_of_embeddings(solves) -> None:
    fn = _model(6)
    fractions: list[float] = []
    Explainer(fn, SAMPLED_SIDES)(
        *_duels(40, 12), progress=Progress(lambda u: fractions.append(u.fraction))
    )
    embedding_phase = [f for f in fractions if 0 < f < 0.5]
    assert len(solves) >= 20
    assert len(set(embedding_phase)) >= len(solves) // 2  # one update per batch of solves
    assert embedding_phase == sorted(embedding_phase)
    assert fractions[-1] == 1.0


def test_a_cancel_stops_side_values_between_embeddings(solves) -> None:
    fn = _model(6)
    fractions: list[float] = []
    progress = Progress(
        lambda u: fractions.append(u.fraction), should_cancel=lambda: len(fractions) >= 5
    )
    with pytest.raises(CancelledError):
        Explainer(fn, SAMPLED_SIDES)(*_duels(40, 12), progress=progress)
    assert max(fractions) < 0.5  # stopped among the embeddings, not after them
    assert 0 < len(solves) < 20


def test_a_job_cancel_reaches_the_side_embedding_loop(solves) -> None:
    fn = _model(6)
    with cancel_scope(lambda: len(solves) >= 6), pytest.raises(CancelledError):
        Explainer(fn, SAMPLED_SIDES)(*_duels(40, 12))  # no Progress: the job's cancel scope
    assert len(solves) < 12


def test_side_values_over_the_budget_are_refused_before_embedding(
    monkeypatch: pytest.MonkeyPatch, solves
) -> None:
    # 12 groups are 24 players: ~2,100 sampled coalitions, up to 4,096 side embeddings
    # of (centre rows x 80 queries) each, held together: about a gigabyte (39 distinct duels).
    fn = _model(12, n_items=300, n_centres=200)
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "512M")  # the explainer's own need fits
    options = ExplainOptions(what="sides", cme=CholeskyOptions(), factor_cache_bytes=0)
    start = time.perf_counter()
    with pytest.raises(MemoryBudgetError, match="Side-aware values of 39 duels"):
        Explainer(fn, options)(*_duels(300, 40))
    assert time.perf_counter() - start < 10 and solves == []


# -- interactions -----------------------------------------------------------------------------
def test_interactions_report_progress_per_batch_and_cancel_mid_way(solves) -> None:
    fn = _model(8)
    left, right = _duels(40, 10)
    fractions: list[float] = []
    explain_interactions(fn, left, right, progress=Progress(lambda u: fractions.append(u.fraction)))
    assert len(set(fractions)) >= 200 and fractions == sorted(fractions)  # 254 coalitions
    total = len(solves)
    solves.clear()
    fractions.clear()
    progress = Progress(
        lambda u: fractions.append(u.fraction), should_cancel=lambda: len(fractions) >= 30
    )
    with pytest.raises(CancelledError):
        explain_interactions(fn, left, right, progress=progress)
    assert 0 < len(solves) < total // 2


def test_interactions_over_the_budget_are_refused_before_any_solve(
    monkeypatch: pytest.MonkeyPatch, solves
) -> None:
    # 12 groups: 4,096 coalition values per duel, for 8,000 duels, kept whole (~1.3 GB).
    fn = _model(12, n_items=300, n_centres=30)
    left, right = _duels(300, 8000)
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "1G")
    options = ExplainOptions(what="items", shapley="exact", factor_cache_bytes=0)
    peak, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    with pytest.raises(MemoryBudgetError, match="Interaction values of 8,000 duels"):
        explain_interactions(fn, left, right, explainer=Explainer(fn, options))
    assert time.perf_counter() - start < 10 and solves == []
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024 < 64 * 2**20


def test_a_long_run_gets_an_eta_before_two_percent(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("prefshap_core.progress.time.perf_counter", lambda: clock[0])
    seen = []
    progress = Progress(seen.append)
    progress.update("coalition values", 0.001)
    clock[0] += ETA_AFTER_S + 1
    progress.update("coalition values", 0.002)
    assert seen[0].eta_s is None  # nothing to extrapolate from yet
    assert seen[1].eta_s == pytest.approx((ETA_AFTER_S + 1) * 0.998 / 0.002)


def test_the_kept_classes_of_coalitions_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # 455 kB a coalition on a 2,000-item pool: 2^16 coalitions would keep 29 GB.
    from prefshap_core.compute import Compute
    from prefshap_core.explain.cme import classes
    from prefshap_core.explain.games.items import ItemGame

    fn = _model(10, n_items=300)
    pool = classes.PoolUniverse(ItemGame(fn, Compute(), 0.01).problem, Compute())
    masks = ((np.arange(1, 1024)[:, None] >> np.arange(10)) & 1).astype(bool)
    first = pool.fixed_classes(masks[0])
    monkeypatch.setattr(classes, "MAX_CLASS_CACHE_BYTES", 2 * 2**20)
    for mask in masks:
        pool.fixed_classes(mask)
    assert 10 < len(pool._classes) < len(masks) // 4  # the most recent ones
    assert 2**20 < pool._kept_bytes <= classes.MAX_CLASS_CACHE_BYTES
    assert next(reversed(pool._classes)) == np.packbits(masks[-1]).tobytes()
    again = pool.fixed_classes(masks[0])  # dropped, recomputed: the same classes
    assert again is not first
    np.testing.assert_array_equal(again.labels, first.labels)
    assert again.r == first.r
    assert pool.key_labels(masks[0], again) == pool.key_labels(masks[0], first)
