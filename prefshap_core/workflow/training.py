"""Train and evaluate: fit the chosen model (and a UPM baseline) on the seeded split.

Scores it on validation and test duels (K-fold CV when the test split is small),
measures rankability and chooses the explanations' CME regularisers.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from prefshap_core import budget
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData, Split, group_folds, group_holdout, split_duels
from prefshap_core.data.reserved_names import check_dataset_names
from prefshap_core.explain.cme.regulariser import LambdaSearch, choose_cme_lambda
from prefshap_core.metrics import rankability_in_background
from prefshap_core.models.estimators import PreferenceModel
from prefshap_core.models.hyperparameters import (
    CV_FOLDS,
    CV_MAX_DUELS,
    DEFAULT_CONTEXT_CME_LAMBDA,
    SUBSAMPLE_CENTRES,
    SUBSAMPLE_TRAIN_DUELS,
    UTILITY_WEIGHTS,
    centre_count,
)
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.workflow.model_choice import (
    AUTO,
    SHARED_SEARCH,
    Candidate,
    candidate_kinds,
    choose_candidate,
    fitting_order,
    model_choice,
)
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.settings import TrainSettings

LARGE_DUELS = 500_000  # from here on, say before training that it will take a while


def expected_training_minutes(n_duels: int) -> float:
    """A rough training time on a small CPU: measured ~2.5 min per million duels (2 cores,
    benchmarks/bench_large_upload.py); enough to warn, not a promise."""
    return 2.5 * n_duels / 1_000_000


SMALL_TEST = 200  # fewer test duels than this: ROC AUC also as K-fold CV over all duels


def cross_validated_auc(
    data: DuelData, settings: TrainSettings, progress: Progress | None = None
) -> dict[str, Any]:
    """ROC AUC of each of K seeded folds of all duels, from a model fit on the others.

    Each fold's model is trained on the other folds only, so no fold's score has seen
    its duels in training; ``settings`` should fix the hyperparameters (``train``
    passes the ones it chose), else each fold tunes its own on its training part.
    Ties are left out of each fold's AUC; a fold without both outcomes is skipped.
    """
    start = time.perf_counter()
    progress = ensure_progress(progress)
    order = np.random.default_rng([settings.seed, 3]).permutation(data.n_duels)
    folds = [np.sort(f) for f in np.array_split(order, min(CV_FOLDS, data.n_duels))]
    if data.duel_groups is not None:  # a count row's duels stay in one fold
        folds = group_folds(data.duel_groups, [settings.seed, 3], CV_FOLDS)
    aucs = []
    for k, fold in enumerate(folds):
        rest = np.setdiff1d(order, fold)
        inner = np.random.default_rng([settings.seed, 4, k]).permutation(rest)
        n_val = max(1, len(rest) // 9)
        fit_on, tune_on = np.sort(inner[n_val:]), np.sort(inner[:n_val])
        if data.duel_groups is not None:
            fit_on, tune_on = group_holdout(data.duel_groups, rest, [settings.seed, 4, k])
        model = settings.model().fit(
            data, fit_on, tune_on, progress.span(k / len(folds), (k + 1) / len(folds))
        )
        auc = model.score(data, fold)["roc_auc"]
        if np.isfinite(auc):
            aucs.append(float(auc))
    return {
        "roc_auc_mean": float(np.mean(aucs)) if aucs else float("nan"),
        "roc_auc_sd": float(np.std(aucs, ddof=1)) if len(aucs) > 1 else float("nan"),
        "folds": len(aucs),
        "fold_roc_auc": aucs,
        "n_duels": data.n_duels,
        "seconds": time.perf_counter() - start,
    }


def train(
    data: DuelData, settings: TrainSettings, progress: Progress | None = None
) -> TrainingResult:
    """Fit the chosen model (and a UPM baseline) on the seeded 80/10/10 split.

    ``settings.kind == "auto"``: every candidate that fits the data is fitted and the
    best by held-out log loss is kept (``workflow.model_choice``); the UPM candidate
    is the baseline. When the test split is small (< ``SMALL_TEST`` duels), the ROC
    AUC is also estimated by K-fold cross-validation over all duels
    (``TrainingResult.cv``, and the baseline's ``baseline_cv``).
    """
    start = time.perf_counter()
    progress = ensure_progress(progress)
    check_dataset_names(data.item_space, data.context_space)  # export columns stay unique
    split = split_duels(data.n_duels, settings.seed, groups=data.duel_groups)
    with_baseline = settings.baseline and settings.kind not in ("upm", AUTO)
    main_share = 0.7 if with_baseline else 0.95
    sizes, shapes = training_sizes(data, settings, split)
    cache = budget.kernel_cache_allowance(*sizes, **shapes)  # K_nM beyond it is chunked
    need = budget.training_bytes(*sizes, kernel_cache_bytes=cache, **shapes)
    with budget.reserve(
        need,
        f"Training with {settings.n_centres:,} centres on {len(split.train):,} duels",
        budget.TRAIN_REDUCE,
    ):
        return _train_within_budget(
            data, settings, progress, split, with_baseline, main_share, start, cache
        )


def training_sizes(
    data: DuelData, settings: TrainSettings, split: Split
) -> tuple[tuple[int, int, int, int], dict[str, Any]]:
    """The sizes :func:`budget.training_bytes` takes for this training: positional
    (duels, centres, features, itemsize) and keyword (validation duels, items, whether
    a grid of utility weights runs at full size: the search ranks it with
    ``SUBSAMPLE_CENTRES`` centres on at most ``SUBSAMPLE_TRAIN_DUELS`` duels)."""
    n_features = data.item_space.n_features + (
        data.context_space.n_features if data.context_space is not None else 0
    )
    itemsize = 4 if settings.dtype == "float32" else 8
    n_weights = (
        1
        if settings.utility_weight is not None
        else len(settings.utility_weights or UTILITY_WEIGHTS)
    )
    # The grid is ranked with SUBSAMPLE_CENTRES centres on at most SUBSAMPLE_TRAIN_DUELS
    # duels; it runs at full size only where that is the full size.
    weight_grid = (
        settings.kind != "upm"
        and settings.backend != "falkon"
        and n_weights > 1
        and len(split.train) <= SUBSAMPLE_TRAIN_DUELS
        and centre_count(settings.n_centres, len(split.train)) <= SUBSAMPLE_CENTRES
    )
    shapes = {
        "n_validation": len(split.validation),
        "n_items": len(data.items),
        "weight_grid": weight_grid,
    }
    # The centres the fits use: on small data the cap (half the fitted duels: train +
    # validation under K-fold selection) binds before the asked number.
    n_fitted = len(split.train) + len(split.validation)
    if n_fitted > CV_MAX_DUELS:
        n_fitted = len(split.train)
    n_centres = centre_count(settings.n_centres, n_fitted)
    return (len(split.train), n_centres, n_features, itemsize), shapes


def _train_within_budget(
    data: DuelData,
    settings: TrainSettings,
    progress: Progress,
    split: Split,
    with_baseline: bool,
    main_share: float,
    start: float,
    kernel_cache_bytes: int,
) -> TrainingResult:
    solver = SolverOptions(cache_budget_bytes=kernel_cache_bytes)
    decided = data.decided(split.train)  # ties have no winner: not in the dominance graph
    rankability = rankability_in_background(
        data.winners()[decided], data.losers()[decided], data.n_items
    )
    small = len(split.test) < SMALL_TEST
    outer = progress
    if small:  # the CV fits are K more small fits: they get the second half of the bar
        progress, cv_progress = outer.span(0.0, 0.5), outer.span(0.5, 0.95)
    kinds = candidate_kinds(settings.kind, data.has_context)
    auto = settings.kind == AUTO
    # Every candidate is chosen on the same criterion: K-fold for all, or holdout for all.
    n_tuning = len(split.train) + len(split.validation)
    selection = "cv" if n_tuning <= CV_MAX_DUELS else "holdout"
    share = main_share / len(kinds)
    fitted_kinds: dict[str, Candidate] = {}
    for k, kind in enumerate(fitting_order(kinds)):
        estimator = settings.model(kind, solver)
        source = None
        if auto:
            estimator.set_params(selection=selection)
            source = fitted_kinds.get(SHARED_SEARCH.get(kind, ""))
            if source is not None:
                estimator.set_params(**shared_hyperparameters(source.model))
        fitted = estimator.fit(
            data, split.train, split.validation, progress.span(k * share, (k + 1) * share),
            posterior=not auto,
        )  # fmt: skip
        if source is not None:
            fitted.function_.metadata["search_shared_with"] = source.kind
        fitted_kinds[kind] = Candidate(
            kind, fitted, fitted.score(data, split.test), fitted.fit_seconds_
        )
    candidates = [fitted_kinds[kind] for kind in kinds]
    chosen_index = choose_candidate(candidates)
    main = candidates[chosen_index]
    model = main.model.add_posterior(data)
    chosen = model.search_.chosen
    assert chosen is not None
    # Under cross-validation the validation duels were trained on: report the
    # pooled out-of-fold scores the choice was made on instead.
    validation: dict[str, Any] = (
        model.score(data, split.validation)
        if model.search_.selection == "holdout"
        else {"roc_auc": chosen.validation_auc, "log_loss": chosen.validation_log_loss}
    )
    validation["selection"] = model.search_.selection
    metrics = {"validation": validation, "test": main.test}
    baseline: Candidate | None = None
    if auto:  # the UPM candidate is the baseline: nothing more is fitted
        baseline = candidates[kinds.index("upm")]
        if settings.baseline:  # kept beside the model (the dashboard's): as complete
            baseline.model.add_posterior(data)
    elif with_baseline:
        upm = settings.model("upm", solver).fit(
            data, split.train, split.validation, progress.span(main_share, 0.95)
        )
        baseline = Candidate("upm", upm, upm.score(data, split.test), upm.fit_seconds_)
    if small:
        # K-fold CV AUC of every candidate (and of the baseline: "vs UPM" compares the
        # same metric), each at its own chosen hyperparameters.
        scored = list(candidates) + ([baseline] if baseline and baseline not in candidates else [])
        for k, candidate in enumerate(scored):
            part = cv_progress.span(k / len(scored), (k + 1) / len(scored))
            candidate.cv = cross_validated_auc(data, _fixed(settings, candidate), part)
            candidate.seconds += candidate.cv.get("seconds", 0.0)
    outer.update("Rankability (SpecR)", 0.96)
    specr, specr_items = rankability.result()
    outer.update("Choosing the CME regularisers", 0.97)
    function = choose_cme_regularisers(model.function_, settings)
    baseline_metrics = None if baseline is None else baseline.test
    function.metadata.update(
        cme_lambda=function.cme_lambda,
        test_metrics=metrics["test"],
        upm_test_metrics=baseline_metrics,
        specr=specr,
        model_choice=model_choice(settings.kind, candidates, chosen_index, model.search_.selection),
    )
    outer.update("Done", 1.0)
    fit_seconds = sum(c.model.fit_seconds_ for c in candidates)
    return TrainingResult(
        data_name=data.name,
        settings=settings,
        function=function,
        split=split,
        metrics=metrics,
        baseline_metrics=baseline_metrics,
        rankability=specr,
        rankability_items=specr_items,
        cv=main.cv,
        seconds={
            "fit": fit_seconds,
            "baseline": 0.0 if baseline is None or auto else baseline.model.fit_seconds_,
            "total": time.perf_counter() - start,
        },
        baseline_function=None if baseline is None else baseline.model.function_,
        baseline_cv=None if baseline is None else baseline.cv,
    )


def shared_hyperparameters(model: PreferenceModel) -> dict[str, Any]:
    """The item hyperparameters ``model`` chose, as fixed parameters of another kind's
    estimator (``SHARED_SEARCH``): lengthscales as they are (not searched or refined
    again) and the utility weight. The penalty is chosen again, along ``model``'s own
    path down to the penalty it chose (``model_choice.SHARED_SEARCH``)."""
    chosen = model.search_.chosen
    assert chosen is not None
    path, iterations = model.path()
    upto = [k for k, penalty in enumerate(path) if penalty >= chosen.penalty]
    return {
        "lengthscales": tuple(model.lengthscales_),
        "lengthscale_scale": None,
        "lengthscale_scales": None,
        "utility_weight": chosen.utility_weight,
        # A fixed penalty (chosen.penalty is then it) overrides any path.
        "penalty_path": tuple(path[k] for k in upto) or None,
        "cg_iterations": tuple(iterations[k] for k in upto) or None,
    }


def _fixed(settings: TrainSettings, candidate: Candidate) -> TrainSettings:
    """``settings`` for ``candidate``'s kind at the hyperparameters it chose (the chosen
    lengthscales themselves, refined groups included, as fixed ones)."""
    model = candidate.model
    chosen = model.search_.chosen
    assert chosen is not None
    context_ls = model.context_lengthscales_
    return settings.replace(
        kind=candidate.kind,
        lengthscales=tuple(model.lengthscales_),
        lengthscale_scale=None,
        lengthscale_scales=None,
        context_lengthscales=None if context_ls is None else tuple(context_ls),
        penalty=chosen.penalty,
        utility_weight=None if candidate.kind == "upm" else chosen.utility_weight,
        baseline=False,
    )


def choose_cme_regularisers(fn: PreferenceFunction, settings: TrainSettings) -> PreferenceFunction:
    """``fn`` with its explanations' CME regularisers chosen by held-out CME error.

    Values the user set in ``settings`` are kept; the model file stores the result.
    """
    search = LambdaSearch(seed=settings.seed)
    changes: dict[str, float] = {}
    if settings.cme_lambda is None:
        compute = Compute(device=settings.device, dtype=settings.dtype)
        changes["cme_lambda"] = choose_cme_lambda(
            fn.items, fn.lengthscales, fn.item_space.feature_group, search=search, compute=compute
        )
    if fn.kind == "cgpm" and settings.context_cme_lambda is None:
        assert fn.contexts is not None and fn.context_space is not None
        assert fn.context_lengthscales is not None
        changes["context_cme_lambda"] = choose_cme_lambda(
            fn.contexts,
            fn.context_lengthscales,
            fn.context_space.feature_group,
            weights=fn.context_weights,
            search=search,
            fallback=DEFAULT_CONTEXT_CME_LAMBDA,
        )
    return replace(fn, **changes) if changes else fn
