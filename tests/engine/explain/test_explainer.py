"""The Explainer object: options, kept factorizations, what-if rows, the value table, executors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from prefshap_core.errors import DataValidationError
from prefshap_core.explain import (
    AutoOptions,
    CGOptions,
    CholeskyOptions,
    Explainer,
    ExplainOptions,
    LocalExecutor,
    NystromOptions,
    Shapley,
    cme_options,
)
from prefshap_core.explain.reference import item_shapley, random_preference_function
from prefshap_core.explain.shapley.coalitions import all_coalitions
from prefshap_core.explain.shapley.exact import ExactShapley

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]


def model(kind: str = "gpm", seed: int = 3):
    return random_preference_function(
        kind, n_items=14, n_centres=12, groups=GROUPS, seed=seed, levels=2
    )


def duels(n: int, seed: int, n_items: int = 14):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_items, n), rng.integers(0, n_items, n)


# -- options -------------------------------------------------------------------------
def test_options_are_frozen_validated_and_keyed() -> None:
    base = ExplainOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.seed = 3  # type: ignore[misc]
    for bad in (
        {"what": "nope"},
        {"shapley": "sampled:1"},
        {"shapley": "exact:100"},
        {"shapley": "some"},
        {"cme_lambda": 0.0},
        {"coalition_batch": 0},
        {"cme": "cholesky"},
    ):
        with pytest.raises(ValueError):
            ExplainOptions(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        CGOptions(tol=2.0)
    with pytest.raises(ValueError):
        NystromOptions(landmarks="kmeans")
    assert base.key() == ExplainOptions().key()
    # every numeric choice changes the key; where the work runs does not
    changed = [
        ExplainOptions(seed=1),
        ExplainOptions(shapley="auto:100"),
        ExplainOptions(what="context"),
        ExplainOptions(cme=CholeskyOptions()),
        ExplainOptions(cme=CGOptions(tol=1e-6)),
        ExplainOptions(cme=AutoOptions(nystrom=NystromOptions(n_landmarks=64))),
        ExplainOptions(cme_lambda=0.1),
    ]
    assert len({o.key() for o in changed} | {base.key()}) == len(changed) + 1
    assert ExplainOptions(executor=LocalExecutor()).key() == base.key()
    assert cme_options("cg", tol=1e-7) == CGOptions(tol=1e-7)
    with pytest.raises(ValueError, match="CME method"):
        cme_options("lu")


# -- the explainer -------------------------------------------------------------------
def test_kept_factorizations_give_the_numbers_of_a_fresh_explainer() -> None:
    fn = model()
    explainer = Explainer(fn)
    left, right = duels(12, seed=1)
    explainer(left, right)
    first = explainer.cache_report["factor_cache"]
    assert first["entries"] > 0 and first["hits"] == 0
    new_left, new_right = np.array([0, 5, 13]), np.array([7, 2, 9])
    kept = explainer(new_left, new_right)
    assert explainer.cache_report["factor_cache"]["hits"] == first["entries"]
    fresh = Explainer(fn)(new_left, new_right)
    np.testing.assert_allclose(kept.values, fresh.values, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(kept.outputs, fresh.outputs)
    # and both are the slow reference's
    for i, (a, b) in enumerate(zip(new_left, new_right, strict=True)):
        phi, _, _ = item_shapley(fn, fn.items[a], fn.items[b], fn.cme_lambda)
        np.testing.assert_allclose(kept.values[i], phi, rtol=0, atol=1e-8)


def test_no_cache_when_its_budget_is_zero() -> None:
    explainer = Explainer(model(), ExplainOptions(factor_cache_bytes=0))
    explainer(*duels(5, seed=2))
    assert explainer.cache_report["factor_cache"]["entries"] == 0


def test_covariate_rows_are_items_outside_the_pool() -> None:
    fn = model("gpm", seed=5)
    left, right = duels(6, seed=3)
    by_id = Explainer(fn)(fn.item_ids[left], fn.item_ids[right])
    by_rows = Explainer(fn)(fn.items[left], fn.items[right])
    np.testing.assert_array_equal(by_id.values, by_rows.values)
    assert by_rows.left_ids[0] == "custom-1"
    # a hypothetical item (an edited row) against the slow reference
    x = fn.items[left].copy()
    x[:, 0] += 0.37
    what_if = Explainer(fn)(x, fn.items[right])
    assert what_if.efficiency_gap() < 1e-10
    for i in range(len(x)):
        phi, _, out = item_shapley(fn, x[i], fn.items[right[i]], fn.cme_lambda)
        np.testing.assert_allclose(what_if.values[i], phi, rtol=0, atol=1e-8)
        assert what_if.outputs[i] == pytest.approx(out, abs=1e-10)
    with pytest.raises(DataValidationError, match="model space"):
        Explainer(fn)(np.zeros((2, 3)), fn.items[:2])
    with pytest.raises(DataValidationError, match="finite"):
        Explainer(fn)(np.full((1, fn.items.shape[1]), np.nan), fn.items[:1])


def test_coalition_table_is_what_the_exact_values_come_from() -> None:
    fn = model("cgpm", seed=4)
    left, right = duels(7, seed=4)
    explainer = Explainer(fn)
    table = explainer.coalition_values(left, right)
    expl = explainer(left, right)
    p = fn.item_space.n_groups
    assert table.values.shape == (2**p, 7) and table.player_names == expl.player_names
    np.testing.assert_array_equal(table.values[0], 0.0)
    np.testing.assert_array_equal(table.values[-1], expl.outputs)
    phi, _ = ExactShapley(all_coalitions(p))(table.values)
    np.testing.assert_allclose(phi, expl.values, rtol=0, atol=1e-13)
    swapped = explainer.coalition_values(right, left)  # a later call: kept factorizations
    np.testing.assert_allclose(swapped.values, -table.values, rtol=1e-13, atol=1e-15)
    both = explainer.coalition_values(np.r_[left, right], np.r_[right, left])  # one call
    np.testing.assert_array_equal(both.values[:, 7:], -both.values[:, :7])


class RecordingExecutor(LocalExecutor):
    def __init__(self) -> None:
        self.calls: list[list[slice]] = []

    def map(self, work, batches, on_done=None):
        self.calls.append(list(batches))
        return super().map(work, batches, on_done)


@pytest.mark.parametrize("sampled", [False, True])
def test_any_partition_into_tasks_gives_the_same_values(sampled: bool) -> None:
    fn = model("gpm", seed=6)
    left, right = duels(9, seed=5)
    extra = {"shapley": Shapley("sampled", 10), "seed": 2} if sampled else {}
    whole = Explainer(fn, ExplainOptions(**extra))(left, right)
    recorder = RecordingExecutor()
    options = ExplainOptions(task_coalitions=2 if sampled else 4, executor=recorder, **extra)
    parts = Explainer(fn, options)(left, right)
    # sampled values take two passes over the same slices (the errors need phi)
    assert len(recorder.calls) == (2 if sampled else 1)
    for batches in recorder.calls:
        assert len(batches) > 2 and all((b.stop - b.start) % 2 == 0 for b in batches[:-1])
        covered = np.concatenate([np.arange(b.start, b.stop) for b in batches])
        np.testing.assert_array_equal(covered, np.arange(whole.meta["n_coalitions"]))
    if sampled:
        np.testing.assert_allclose(parts.standard_errors, whole.standard_errors, rtol=0, atol=1e-13)
    np.testing.assert_allclose(parts.values, whole.values, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(parts.outputs, whole.outputs)


def test_estimators_and_options_reported_in_meta() -> None:
    fn = model()
    e = Explainer(fn, ExplainOptions(cme=CGOptions(tol=1e-11)))(*duels(4, seed=6))
    assert e.meta["shapley"] == "exact" and e.meta["cme"]["method"] == "cg"
    assert e.meta["options"] == ExplainOptions(cme=CGOptions(tol=1e-11)).key()
    with pytest.raises(ValueError, match="C-GPM"):
        Explainer(fn, ExplainOptions(what="context"))


@pytest.mark.parametrize("what", ["items", "sides"])
def test_no_negative_zero_reaches_the_explanation_or_its_views(what: str) -> None:
    # The items' base value is 0 and an item equal to itself on a group gives that
    # group exactly 0; a duel evaluated the other way round used to carry -0.0 there,
    # which exports printed as "-0".
    fn = model("gpm", seed=5)
    left, right = np.array([0, 3, 5, 2, 7]), np.array([3, 0, 2, 5, 7])
    expl = Explainer(fn, ExplainOptions(what=what))(left, right)
    assert np.all(expl.base_values == 0.0) and (expl.left_ids != expl.right_ids).any()
    for view in (expl, expl.oriented_to_winner(), expl.reoriented(-np.ones(5), "right")):
        arrays = (view.values, view.base_values, view.outputs, view.data)
        zeros = np.concatenate([a[a == 0.0].ravel() for a in arrays])
        assert zeros.size >= 5 and not np.signbit(zeros).any()
    # the views still negate everything else
    flipped = expl.reoriented(-np.ones(5), "right")
    np.testing.assert_array_equal(flipped.outputs, -expl.outputs)
    if what == "items":  # the coalition table: v(empty) = 0 for every duel
        table = Explainer(fn, ExplainOptions(what=what)).coalition_values(left, right)
        empty = table.values[~table.masks.any(1)]
        assert (empty == 0.0).all() and not np.signbit(empty).any()
