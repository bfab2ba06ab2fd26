"""Choosing the lengthscale scale, the utility weight and the penalty: two protocols.

Both fit along the penalty path with a ``PathFitter`` (``models.path_fitter``) and
choose the best point unless a larger utility weight ties with it (``choose``).

- ``select_on_holdout``: the validation split decides. At every size the scales and
  utility weights are first ranked with few centres (``SUBSAMPLE_CENTRES``) on a
  seeded subsample (all the duels on small data): cheap; then (``refine``) each
  feature group's lengthscales are refined at the winner (``models.refine``); only
  the result is fitted at full size, where the penalty is chosen.
- ``cross_validate``: K-fold on train + validation, scored on pooled out-of-fold g,
  for small data where a 10% validation split holds a handful of duels; then a refit
  on all of it at the chosen point.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from prefshap_core.metrics import log_loss, roc_auc
from prefshap_core.models.ard import refine_column_lengthscales
from prefshap_core.models.hyperparameters import (
    CV_FOLDS,
    FINAL_PATH_PATIENCE,
    PATH_PATIENCE,
    SUBSAMPLE_CENTRES,
    SUBSAMPLE_TRAIN_DUELS,
    SUBSAMPLE_VALIDATION_DUELS,
    SearchPoint,
    SearchRecord,
    centre_count,
    search_penalties,
)
from prefshap_core.models.path_fitter import PathFitter, PathResult
from prefshap_core.models.refine import (
    REFINE_MIN_VALIDATION_DUELS,
    refine_group_lengthscales,
    with_factors,
)
from prefshap_core.progress import Progress


def select_on_holdout(
    fitter: PathFitter,
    train: np.ndarray,
    validation: np.ndarray,
    scales: list[float],
    penalties: list[float],
    progress: Progress,
    utility_weights: list[float] | None = None,
    refine: bool = False,
    keep_system: bool = False,
) -> tuple[SearchRecord, PathResult, PathFitter]:
    """Choose on the validation split; returns the record, the chosen fit, the fitter.

    ``keep_system``: the final fit keeps its :class:`TrainingSystem` on the chosen
    result (for its posterior), where it is a fit of its own (not the ranking's).

    With ``refine`` (and enough validation duels) the group lengthscales are refined
    at the chosen scale and utility weight (``models.refine``) before the final fit;
    the returned fitter holds the refined lengthscales.
    """
    record = SearchRecord(criterion=fitter.criterion, selection="holdout")
    fitter = replace(fitter, patience=PATH_PATIENCE)
    weights = [0.0] if fitter.kind == "upm" else list(utility_weights or [0.0])
    refine = refine and len(validation) >= REFINE_MIN_VALIDATION_DUELS
    y_val = fitter.data.y[validation].astype(np.float64)
    searched = search_penalties(penalties)  # the search's stages stop the path earlier
    done = 0.0  # progress fraction used by the stages before the final fit
    full: list[PathResult] | None = None
    if len(scales) * len(weights) > 1:
        # (scale, weight) ranked with few centres (on a subsample of large data); the
        # winner is fitted in full. Where the ranking fit was the full fit itself (all
        # the duels, no fewer centres), it runs the whole path and its winner's path is
        # kept as it is.
        done = 0.3
        best, coarse, same = _rank_on_subsample(
            fitter, train, validation, scales, penalties, searched,
            progress.span(0.0, done), weights,
        )  # fmt: skip
        stage = "full" if same else "subsample"
        record.points.extend(replace(r.point, stage=stage) for r in coarse)
        scales, weights = [best.lengthscale_scale], [best.utility_weight]
        if same:
            full = [r for r in coarse if _same_grid_point(r.point, best)]
    if refine:
        refined = refine_group_lengthscales(
            fitter, train, validation, scales[0], weights[0], searched,
            progress.span(done, done + 0.25),
        )  # fmt: skip
        done += 0.25
        factors = refined.factors
        record.points.extend(refined.points)
        record.item_group_factors = factors.items
        record.context_group_factors = factors.contexts
        if not factors.is_identity():
            fitter, full = with_factors(fitter, factors), None
        penalty = min(refined.points, key=fitter.loss_of).penalty  # the group search's best
        learned = refine_column_lengthscales(
            fitter, train, validation, scales[0], weights[0], searched, penalty,
            progress.span(done, done + 0.1), start_losses=refined.validation_losses,
        )  # fmt: skip
        done += 0.1
        if learned is not None:
            fitter, full = learned, None
    if full is None:
        full = replace(fitter, patience=FINAL_PATH_PATIENCE, keep_system=keep_system).fit(
            train, validation, scales, penalties, progress.span(done, 1.0), utility_weights=weights
        )
        record.points.extend(r.point for r in full)
    best_full = full[_choose_result(fitter, full, y_val)]
    record.chosen = best_full.point
    return record, best_full, fitter


def _choose_result(fitter: PathFitter, results: list[PathResult], y_val: np.ndarray) -> int:
    return choose(fitter, [r.point for r in results], [r.validation_g for r in results], y_val)


def _same_grid_point(a: SearchPoint, b: SearchPoint) -> bool:
    return a.lengthscale_scale == b.lengthscale_scale and a.utility_weight == b.utility_weight


def _rank_on_subsample(fitter, train, validation, scales, penalties, searched, progress, weights):
    """The best (scale, weight) point of a fit with few centres on a seeded subsample.

    Returns that point, every fit, and whether the ranking fit was the full one (all
    the training and validation duels, the full fit's centres): that one runs the
    whole path ``penalties``, a subsample's the search's ``searched``.
    """
    sub_train, sub_val = fitter.subsample(
        train, validation, SUBSAMPLE_TRAIN_DUELS, SUBSAMPLE_VALIDATION_DUELS, stream=2
    )
    n_centres = min(centre_count(fitter.n_centres, len(train)), SUBSAMPLE_CENTRES)
    same = (
        len(sub_train) == len(train)
        and len(sub_val) == len(validation)
        and n_centres == centre_count(fitter.n_centres, len(train))
    )
    if same:  # the full sets, in their order (the centres are positions in train)
        sub_train, sub_val = train, validation
    else:
        fitter = fitter.for_ranking()
    coarse = fitter.fit(
        sub_train, sub_val, scales, penalties if same else searched, progress,
        n_centres=n_centres, utility_weights=weights,
    )  # fmt: skip
    pick = _choose_result(fitter, coarse, fitter.data.y[sub_val].astype(np.float64))
    return coarse[pick].point, coarse, same


def choose(
    fitter: PathFitter, points: list[SearchPoint], g: list[np.ndarray], y: np.ndarray
) -> int:
    """Index of the chosen point: the best, unless a larger utility weight ties with it.

    Tied means within one paired standard error of the best point's validation log
    loss (per-duel losses on the same duels). Among the tied, the largest utility
    weight wins, with its best scale and penalty: the more utility-like model, when
    the data cannot tell them apart. The subsample under-rates the utility part,
    whose value grows with the data (tennis: weights 10 and 100 tied there, 100 won
    by 0.006 log loss at full size), and 106 chameleon duels rank many points by
    noise. The squared loss (ranked by AUC) takes the plain best.
    """
    losses = [fitter.loss_of(p) for p in points]
    best = int(np.argmin(losses))
    if fitter.loss != "logistic" or len(y) < 2:
        return best
    per_duel = [np.logaddexp(0.0, -y * gi) for gi in g]
    tied = []
    for k in range(len(points)):
        diff = per_duel[k] - per_duel[best]
        if diff.mean() <= diff.std(ddof=1) / np.sqrt(len(diff)):
            tied.append(k)
    weight = max(points[k].utility_weight for k in tied)
    return min((k for k in tied if points[k].utility_weight == weight), key=lambda k: losses[k])


def cross_validate(
    fitter: PathFitter,
    duels: np.ndarray,
    scales: list[float],
    penalties: list[float],
    progress: Progress,
    utility_weights: list[float] | None = None,
) -> tuple[SearchRecord, torch.Tensor]:
    """K-fold choice on ``duels``, then a refit on all of them at the chosen point.

    The folds pool every penalty's out-of-fold predictions, so no path stops early;
    the path ends at ``SEARCH_SMALLEST_PENALTY`` as every search stage's does.
    """
    penalties = search_penalties(penalties)
    order = np.random.default_rng([fitter.seed, 1]).permutation(len(duels))
    folds = [duels[np.sort(f)] for f in np.array_split(order, min(CV_FOLDS, len(duels)))]
    Key = tuple[float, float, float]  # (scale, utility weight, penalty)
    pooled: dict[Key, list[np.ndarray]] = {}
    seconds: dict[Key, float] = {}
    for k, fold in enumerate(folds):
        rest = np.setdiff1d(duels, fold)
        part = progress.span(0.8 * k / len(folds), 0.8 * (k + 1) / len(folds))
        fits = fitter.fit(rest, fold, scales, penalties, part, utility_weights=utility_weights)
        for result in fits:
            p = result.point
            key = (p.lengthscale_scale, p.utility_weight, p.penalty)
            pooled.setdefault(key, []).append(result.validation_g)
            seconds[key] = seconds.get(key, 0.0) + p.seconds
    y = fitter.data.y[np.concatenate(folds)].astype(np.float64)
    record = SearchRecord(criterion=fitter.criterion, selection=f"{len(folds)}-fold cv")
    pooled_g = []
    for (scale, weight, penalty), parts in pooled.items():
        g = np.concatenate(parts)
        pooled_g.append(g)
        record.points.append(
            SearchPoint(scale, penalty, log_loss(y, g), roc_auc(y, g),
                        seconds[(scale, weight, penalty)], utility_weight=weight)
        )  # fmt: skip
    chosen = record.points[choose(fitter, record.points, pooled_g, y)]
    record.chosen = chosen
    # The same Newton path up to the chosen penalty, on all the duels.
    upto = penalties[: penalties.index(chosen.penalty) + 1]
    refit = fitter.fit(
        duels, None, [chosen.lengthscale_scale], upto, progress.span(0.8, 1.0),
        utility_weights=[chosen.utility_weight],
    )  # fmt: skip
    return record, refit[-1].alpha
