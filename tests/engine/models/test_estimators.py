"""GPM / UPM / C-GPM estimators: contract, learning, overrides, persistence."""

from dataclasses import replace

import numpy as np
import pytest

from prefshap_core.data.build import load_directory
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.errors import DataValidationError, NotFittedError
from prefshap_core.explain import (
    DEFAULT_CME_LAMBDA,
    DEFAULT_CONTEXT_CME_LAMBDA,
    LambdaSearch,
    choose_cme_lambda,
)
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.metrics import log_loss, roc_auc
from prefshap_core.models.estimators import CGPM, GPM, UPM
from prefshap_core.models.hyperparameters import SCALE_FACTORS, UTILITY_WEIGHTS, SearchPoint
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.models.search import PathFitter, choose
from prefshap_core.paths import repo_root
from prefshap_core.solvers.logistic import fit_logistic
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import choose_cme_regularisers, train

FAST = dict(n_centres=300, penalty_path=(1e-3, 1e-5, 1e-7), cg_iterations=(10, 15, 20))


@pytest.fixture(scope="module")
def clusters():
    data = synthetic_clusters(n_items=200, n_duels=4000, seed=1)
    return data, split_duels(data.n_duels, 1)


@pytest.fixture(scope="module")
def fitted_gpm(clusters):
    data, split = clusters
    return GPM(seed=1, lengthscale_scale=2.0, **FAST).fit(data, split.train, split.validation)


def test_fit_returns_self_with_learned_attributes(clusters, fitted_gpm):
    data, split = clusters
    model = fitted_gpm
    assert model.lengthscale_scale == 2.0  # parameters kept as given
    assert model.lengthscale_scale_ == 2.0
    assert model.penalty is None and model.penalty_ in FAST["penalty_path"]
    assert model.function_.kind == "gpm" and len(model.function_.alpha) == 300
    # Fitting needs no explainer: the CME regulariser is chosen by the workflow.
    assert model.cme_lambda_ == DEFAULT_CME_LAMBDA
    assert model.search_.selection == "holdout"
    # one per penalty of the path and utility weight of the grid
    assert len(model.search_.points) == 3 * len(UTILITY_WEIGHTS)
    assert model.utility_weight_ in UTILITY_WEIGHTS
    assert model.function_.utility_weight == model.utility_weight_
    g = model.decision_function(data, split.test)
    np.testing.assert_allclose(model.predict_proba(data, split.test), 1 / (1 + np.exp(-g)))


def test_gpm_is_exactly_antisymmetric(clusters, fitted_gpm):
    data, split = clusters
    fn = fitted_gpm.function_
    left, right = data.left[split.test], data.right[split.test]
    forward = fn.decision_on_pool(data.items, left, right)
    both = fn.decision_on_pool(
        data.items, np.concatenate([left, right]), np.concatenate([right, left])
    )
    assert np.array_equal(both[: len(left)], forward)
    assert np.array_equal(both[len(left) :], -forward)


def test_gpm_learns_the_unrankable_clusters_game_upm_cannot(clusters, fitted_gpm):
    data, split = clusters
    upm = UPM(seed=1, lengthscale_scale=2.0, **FAST).fit(data, split.train, split.validation)
    gpm_auc = roc_auc(data.y[split.test], fitted_gpm.decision_function(data, split.test))
    upm_auc = roc_auc(data.y[split.test], upm.decision_function(data, split.test))
    assert gpm_auc > 0.93
    assert gpm_auc > upm_auc + 0.1


def test_upm_is_a_utility_difference(clusters):
    data, split = clusters
    upm = UPM(seed=0, lengthscale_scale=2.0, penalty=1e-5, n_centres=100).fit(
        data, split.train, split.validation
    )
    fn = upm.function_
    # g(a, c) = g(a, b) + g(b, c) for a utility model
    a, b, c = np.array([0, 5, 9]), np.array([1, 6, 10]), np.array([2, 7, 11])
    lhs = fn.decision_on_pool(data.items, a, c)
    rhs = fn.decision_on_pool(data.items, a, b) + fn.decision_on_pool(data.items, b, c)
    np.testing.assert_allclose(lhs, rhs, atol=1e-10)


@pytest.mark.slow
def test_search_picks_scale_and_penalty_by_validation_log_loss(clusters):
    data, split = clusters
    model = GPM(seed=0, **FAST).fit(data, split.train, split.validation)
    points = model.search_.points
    assert len({p.lengthscale_scale for p in points}) == len(SCALE_FACTORS)
    assert {p.utility_weight for p in points} == set(UTILITY_WEIGHTS)
    best = min(points, key=lambda p: p.validation_log_loss)
    chosen = model.search_.chosen
    assert (model.lengthscale_scale_, model.utility_weight_, model.penalty_) == (
        chosen.lengthscale_scale, chosen.utility_weight, chosen.penalty,
    )  # fmt: skip
    # the best, or a larger utility weight tied with it (search.choose)
    assert chosen == best or chosen.utility_weight > best.utility_weight


def test_small_data_uses_cross_validation():
    data = synthetic_clusters(n_items=40, n_duels=300, seed=2)
    split = split_duels(data.n_duels, 2)
    model = GPM(seed=2, lengthscale_scale=2.0, **FAST).fit(data, split.train, split.validation)
    assert model.search_.selection == "5-fold cv"
    # refit on train + validation
    assert len(model.train_duels_) == len(split.train) + len(split.validation)
    best = min(model.search_.points, key=lambda p: p.validation_log_loss)
    assert model.search_.chosen == best or model.utility_weight_ > best.utility_weight


def test_squared_loss_and_fixed_hyperparameters(clusters):
    data, split = clusters
    model = GPM(
        seed=0, loss="squared", lengthscale_scale=2.0, penalty=1e-5, n_centres=200,
        utility_weight=0.0,
    )  # fmt: skip
    model.fit(data, split.train, split.validation)
    points = [(p.lengthscale_scale, p.utility_weight, p.penalty) for p in model.search_.points]
    assert points == [(2.0, 0.0, 1e-5)]
    assert roc_auc(data.y[split.test], model.decision_function(data, split.test)) > 0.9


def test_errors_before_fit_and_for_bad_parameters(clusters):
    data, split = clusters
    with pytest.raises(NotFittedError):
        GPM().decision_function(data)
    with pytest.raises(ValueError, match="loss must be"):
        GPM(loss="hinge").fit(data, split.train, split.validation)
    with pytest.raises(DataValidationError, match="C-GPM needs context"):
        CGPM().fit(data, split.train, split.validation)
    with pytest.raises(ValueError, match="lengthscales must be"):
        GPM(lengthscales=np.ones(2)).fit(data, split.train, split.validation)


def test_cgpm_on_sample_data_round_trips_through_the_model_file(tmp_path):
    data = load_directory(repo_root() / "sample_data")
    assert data.has_context
    split = split_duels(data.n_duels, 0)
    model = CGPM(seed=0, lengthscale_scale=2.0, **FAST).fit(data, split.train, split.validation)
    fn = model.function_
    assert fn.kind == "cgpm" and np.all(fn.context_weights > 0)
    assert fn.context_weights.sum() == len(model.train_duels_)
    back = load_model(save_model(fn, tmp_path / "m.npz"))
    u = data.contexts[data.context_index[split.test]]
    left, right = data.items[data.left[split.test]], data.items[data.right[split.test]]
    assert np.array_equal(fn.decision(left, right, u), back.decision(left, right, u))
    np.testing.assert_allclose(
        model.decision_function(data, split.test), fn.decision(left, right, u), atol=1e-12
    )


def test_train_workflow_reports_metrics_baseline_and_rankability(clusters):
    data, _ = clusters
    result = train(data, TrainSettings(kind="gpm", seed=3, n_centres=200, lengthscale_scale=2.0))
    assert set(result.metrics) == {"validation", "test"}
    assert result.metrics["test"]["roc_auc"] > result.baseline_metrics["roc_auc"]
    assert 0.0 <= result.rankability <= 1.0 and result.rankability_items == data.n_items
    report = result.to_json()
    assert report["model"] == "gpm" and report["n_test"] == len(result.split.test)
    assert report["seconds"]["total"] >= report["seconds"]["fit"]
    # The explanations' regulariser: the held-out choice, written into the model.
    fn = result.function
    held_out = choose_cme_lambda(
        fn.items, fn.lengthscales, fn.item_space.feature_group, search=LambdaSearch(seed=3)
    )
    assert fn.cme_lambda == held_out and fn.metadata["cme_lambda"] == held_out


def test_workflow_chooses_context_regulariser_and_keeps_the_users():
    fn = random_preference_function("cgpm", n_items=20, n_contexts=9, seed=4)
    chosen = choose_cme_regularisers(fn, TrainSettings(kind="cgpm", seed=5))
    assert chosen.context_cme_lambda == choose_cme_lambda(
        fn.contexts,
        fn.context_lengthscales,
        fn.context_space.feature_group,
        weights=fn.context_weights,
        search=LambdaSearch(seed=5),
        fallback=DEFAULT_CONTEXT_CME_LAMBDA,
    )
    assert chosen.context_cme_lambda in LambdaSearch().candidates  # scored, not the fallback
    users = TrainSettings(kind="cgpm", cme_lambda=0.3, context_cme_lambda=0.2)
    kept = choose_cme_regularisers(fn, users)
    assert (kept.cme_lambda, kept.context_cme_lambda) == (fn.cme_lambda, fn.context_cme_lambda)


def test_falkon_backend_is_optional_and_says_so(clusters):
    data, split = clusters
    try:
        import falkon  # noqa: F401
    except ImportError:
        from prefshap_core.solvers.falkon_backend import BackendUnavailableError

        with pytest.raises(BackendUnavailableError, match="not on PyPI"):
            GPM(backend="falkon", n_centres=50, penalty=1e-5, lengthscale_scale=2.0).fit(
                data, split.train, split.validation
            )
    with pytest.raises(ValueError, match="backend must be"):
        GPM(backend="sklearn").fit(data, split.train, split.validation)


def test_utility_weight_0_is_the_plain_gpm_bitwise(clusters):
    """c = 0 runs exactly the GPM pipeline: the pair kernel's operator and the solver."""
    data, split = clusters
    model = GPM(seed=1, lengthscale_scale=2.0, utility_weight=0.0, **FAST)
    model.fit(data, split.train, split.validation)
    train = split.train
    rng = np.random.default_rng(1)
    centres = np.sort(rng.choice(len(train), 300, replace=False))
    kernel = PairKernel("gpm", data.items, model.lengthscales_)
    rows = DuelIndex.from_arrays(data.left[train], data.right[train])
    upto = FAST["penalty_path"][: FAST["penalty_path"].index(model.penalty_) + 1]
    direct = fit_logistic(
        kernel.operator(rows, centres), data.y[train].astype(float), upto, SolverOptions(),
        cg_iterations=FAST["cg_iterations"][: len(upto)],
    )  # fmt: skip
    assert np.array_equal(model.function_.alpha, direct.alpha.numpy())
    # and inside a grid, the w = 0 points are exactly the plain GPM's
    grid = GPM(seed=1, lengthscale_scale=2.0, utility_weights=(0.0, 10.0), **FAST)
    grid.fit(data, split.train, split.validation)
    plain = [p.validation_log_loss for p in model.search_.points]
    at_zero = [p.validation_log_loss for p in grid.search_.points if p.utility_weight == 0]
    assert plain == at_zero


def test_sum_kernel_model_evaluates_its_training_kernel(clusters):
    """g of the fitted function = K_sum(duels, centres) @ alpha, the kernel it was fitted with."""
    data, split = clusters
    model = GPM(seed=0, lengthscale_scale=2.0, utility_weight=7.0, penalty=1e-5, n_centres=150)
    model.fit(data, split.train, split.validation)
    fn = model.function_
    assert fn.utility_weight == 7.0 and model.search_.chosen.utility_weight == 7.0
    kernel = PairKernel("gpm", data.items, model.lengthscales_, utility_weight=7.0)
    test = split.test[:200]
    rows = DuelIndex.from_arrays(data.left[test], data.right[test])
    rng = np.random.default_rng(0)
    centre_duels = split.train[np.sort(rng.choice(len(split.train), 150, replace=False))]
    cols = DuelIndex.from_arrays(data.left[centre_duels], data.right[centre_duels])
    expected = kernel.matrix(rows, cols).numpy() @ fn.alpha
    np.testing.assert_allclose(model.decision_function(data, test), expected, atol=1e-9)


def test_a_large_utility_weight_learns_a_rankable_game_as_well_as_the_upm():
    """On a utility game the searched GPM keeps up with the UPM (the plain GPM need not)."""
    rng = np.random.default_rng(4)
    data = synthetic_clusters(n_items=200, n_duels=3000, seed=4)
    utility = np.sin(2 * data.items[:, 0]) + data.items[:, 1]
    margin = 3 * (utility[data.left] - utility[data.right])
    y = np.where(rng.uniform(size=data.n_duels) < 1 / (1 + np.exp(-margin)), 1, -1)
    data = replace(data, y=y.astype(data.y.dtype))
    split = split_duels(data.n_duels, 4)
    fast = dict(n_centres=300, lengthscale_scale=2.0, seed=4)
    gpm = GPM(**fast).fit(data, split.train, split.validation)
    upm = UPM(**fast).fit(data, split.train, split.validation)
    auc = lambda m: roc_auc(data.y[split.test], m.decision_function(data, split.test))  # noqa: E731
    assert gpm.utility_weight_ > 0
    assert auc(gpm) >= auc(upm) - 0.01


def test_bad_utility_weights_are_refused(clusters):
    data, split = clusters
    with pytest.raises(ValueError, match="utility weights"):
        GPM(utility_weight=-1.0).fit(data, split.train, split.validation)
    with pytest.raises(ValueError, match="utility weights"):
        GPM(utility_weights=()).fit(data, split.train, split.validation)
    with pytest.raises(ValueError, match="lengthscale_scales"):
        GPM(lengthscale_scales=(0.0,)).fit(data, split.train, split.validation)


def test_choose_prefers_a_larger_utility_weight_only_when_tied():
    """One paired standard error of the best per-duel log loss decides what is tied."""
    rng = np.random.default_rng(0)
    y = np.where(rng.uniform(size=400) < 0.5, 1.0, -1.0)
    good = 2.0 * y + rng.normal(0, 1, 400)

    def point(weight, penalty):
        return SearchPoint(1.0, penalty, 0.0, 0.0, 0.0, utility_weight=weight)

    def fitter(loss="logistic"):
        return PathFitter("gpm", loss, None, None, None, None, None, 0, 10, {})

    def choose_among(gs, weights, loss="logistic"):
        points = [
            replace(point(w, 10.0**-k), validation_log_loss=log_loss(y, g),
                    validation_auc=roc_auc(y, g))
            for k, (g, w) in enumerate(zip(gs, weights, strict=True))
        ]  # fmt: skip
        return choose(fitter(loss), points, gs, y)

    tied = good + rng.normal(0, 1e-3, 400)  # the same up to noise
    worse = 0.3 * good  # clearly worse
    assert choose_among([good, tied], [0.0, 10.0]) == 1
    assert choose_among([good, worse], [0.0, 10.0]) == 0
    # among the tied, the largest weight's best point
    assert choose_among([good, tied, tied * 0.999, worse], [0.0, 10.0, 10.0, 100.0]) in (1, 2)
    assert choose_among([good, tied], [0.0, 10.0], loss="squared") in (0, 1)
    squared = choose_among([good, worse], [0.0, 10.0], loss="squared")
    assert squared == 0
