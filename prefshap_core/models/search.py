"""Choosing the lengthscale scale and the penalty: fits along the penalty path, scored.

``PathFitter`` fits one model kind at given lengthscale scales and utility weights
(the ``w`` of the sum kernel ``k_E + w k_UPM``, see :mod:`kernels.pair`) along a decreasing
penalty path (the logistic solver's Newton path, or warm-started squared-loss fits)
and scores every step on validation duels, so the penalty costs nothing extra to
choose. Two selection protocols use it:

Both choose the best point unless a larger utility weight ties with it (``choose``).

- ``select_on_holdout``: the validation split decides. On large data the scales and
  utility weights are first ranked on a seeded subsample with fewer centres (cheap);
  then (``refine``) each feature group's lengthscales are refined at the winner
  (``models.refine``); only the result is fitted at full size, where the penalty is
  chosen.
- ``cross_validate``: K-fold on train + validation, scored on pooled out-of-fold g,
  for small data where a 10% validation split holds a handful of duels; then a refit
  on all of it at the chosen point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.kernels.operator import (
    BlockedKernelOperator,
    KernelOperator,
    SumOperator,
    dense_operator,
)
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.metrics import log_loss, roc_auc
from prefshap_core.models.ard import refine_column_lengthscales
from prefshap_core.models.hyperparameters import (
    CV_FOLDS,
    SUBSAMPLE_CENTRES,
    SUBSAMPLE_TRAIN_DUELS,
    SUBSAMPLE_VALIDATION_DUELS,
    SearchPoint,
    SearchRecord,
)
from prefshap_core.models.refine import (
    REFINE_MIN_VALIDATION_DUELS,
    refine_group_lengthscales,
    with_factors,
)
from prefshap_core.progress import Progress
from prefshap_core.solvers.falkon import fit_squared
from prefshap_core.solvers.logistic import fit_logistic
from prefshap_core.solvers.options import SolverOptions


@dataclass(frozen=True)
class PathResult:
    point: SearchPoint
    alpha: torch.Tensor
    validation_g: np.ndarray  # g on the validation duels (empty without validation)


@dataclass(frozen=True, eq=False)
class PathFitter:
    kind: str
    loss: str
    data: DuelData
    base_lengthscales: np.ndarray
    context_lengthscales: np.ndarray | None
    compute: Compute
    solver: SolverOptions
    seed: int
    n_centres: int
    iterations: dict[float, int]  # CG iterations of the Newton step at each penalty
    backend: str = "torch"  # or "falkon" (the optional package; no per-step scores)

    @property
    def criterion(self) -> str:
        return "validation_log_loss" if self.loss == "logistic" else "validation_auc"

    def loss_of(self, point: SearchPoint) -> float:
        """What selection minimises: log loss (logistic) or minus AUC (squared loss)."""
        return point.validation_log_loss if self.loss == "logistic" else -point.validation_auc

    def centres(self, n_train: int, n_centres: int | None = None) -> np.ndarray:
        """Positions of the Nyström centres among the training duels (seeded)."""
        rng = np.random.default_rng(self.seed)
        count = min(n_centres or self.n_centres, n_train)
        return np.sort(rng.choice(n_train, count, replace=False))

    def subsample(
        self,
        train: np.ndarray,
        validation: np.ndarray,
        n_train: int,
        n_validation: int,
        stream: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Seeded sorted subsets of at most ``n_train`` / ``n_validation`` duels.

        ``stream`` keeps each stage's draw its own (the grid's ranking: 2; the
        lengthscale refinement: 3).
        """
        rng = np.random.default_rng([self.seed, stream])
        sub_train = np.sort(rng.choice(train, min(len(train), n_train), replace=False))
        n_val = min(len(validation), n_validation)
        return sub_train, np.sort(rng.choice(validation, n_val, replace=False))

    def duel_index(self, duels: np.ndarray) -> DuelIndex:
        data = self.data
        ctx = data.context_index[duels] if self.kind == "cgpm" else None
        return DuelIndex.from_arrays(
            data.left[duels], data.right[duels], ctx, device=self.compute.torch_device
        )

    def fit(
        self,
        train: np.ndarray,
        validation: np.ndarray | None,
        scales: list[float],
        penalties: list[float],
        progress: Progress,
        n_centres: int | None = None,
        utility_weights: list[float] | None = None,
    ) -> list[PathResult]:
        """Fit every (scale, utility weight) along the penalty path; score each step.

        The centres are the same for every point, so the points differ only in the
        hyperparameters. Per scale, the two terms of the sum kernel (GPM bracket and
        utility bracket) are built once and reused for every utility weight.
        """
        weights = [0.0] if self.kind == "upm" else list(utility_weights or [0.0])
        data = self.data
        centres = self.centres(len(train), n_centres)
        train_index = self.duel_index(train)
        val_index = None if validation is None else self.duel_index(validation)
        centre_index = train_index.subset(torch.as_tensor(centres))
        y_train = data.y[train].astype(np.float64)
        y_val = None if validation is None else data.y[validation].astype(np.float64)
        results: list[PathResult] = []
        for k, scale in enumerate(scales):
            part = progress.span(k / len(scales), (k + 1) / len(scales))
            part.update(f"Building the kernel matrix (lengthscale scale {scale:.3g})", 0.0)
            kernel = PairKernel(
                self.kind, data.items, self.base_lengthscales * scale,
                data.contexts if self.kind == "cgpm" else None, self.context_lengthscales,
                self.compute,
            )  # fmt: skip
            terms = self._terms(kernel, weights, train_index, centres, val_index, centre_index)
            for j, weight in enumerate(weights):
                op, k_val = terms(weight)
                label = f"lengthscale scale {scale:.3g}, utility weight {weight:g}"
                step = part.span(j / len(weights), (j + 1) / len(weights))
                step.update(f"Kernel matrix ready ({label})", 0.02)
                results.extend(
                    self._path(op, k_val, y_train, y_val, scale, weight, penalties, step)
                )
                del op, k_val  # the next one is built without this one: one K_nM at a time
            del terms
        return results

    def _terms(self, kernel, weights, train_index, centres, val_index, centre_index):
        """``weight -> (K_nM operator, validation block)`` for one lengthscale scale.

        One weight (or the falkon backend, which needs a single kernel): the sum
        kernel itself, one cached K_nM. Several: each term's K_nM is built once; per
        weight, the cached terms are added into one matrix (one pass per product,
        like the plain GPM's), else (too large to cache) summed by a SumOperator.
        Weight 0 is the first term's own operator: exactly the plain GPM.
        """
        kwargs = self.solver.operator_kwargs()

        def val_block(k: PairKernel) -> KernelOperator | None:
            # An operator, not a dense matrix: cached when it fits the solver's cache
            # budget, else computed in blocks (a 170k-duel validation split against
            # 2000 centres is 2.7 GB dense).
            return None if val_index is None else k.operator(val_index, centre_index, **kwargs)

        if self.kind == "upm" or len(weights) == 1 or self.backend == "falkon":

            def single(weight: float):
                k = kernel if self.kind == "upm" else kernel.with_utility_weight(weight)
                return k.operator(train_index, centres, **kwargs), val_block(k)

            return single
        first, second = kernel.parts()
        op_first = first.operator(train_index, centres, **kwargs)
        val_first, val_second = val_block(first), val_block(second)
        cacheable = (
            isinstance(op_first, BlockedKernelOperator)
            and op_first.cache is not None
            and op_first.cache_dtype == op_first.dtype
        )
        if cacheable:  # gathered by row blocks: no full-size scratch next to the cache
            second_matrix = second.matrix(train_index, centre_index, block_rows=op_first.block_rows)
        else:
            op_second = second.operator(train_index, centres, **kwargs)

        def combined(weight: float):
            if weight == 0:
                return op_first, val_first
            k_val = None
            if val_first is not None and val_second is not None:
                k_val = SumOperator(val_first, val_second, weight)
            if not cacheable:
                return SumOperator(op_first, op_second, weight), k_val
            assert isinstance(op_first, BlockedKernelOperator) and op_first.cache is not None
            # cache + w * second without a second temporary (IEEE addition commutes: bitwise)
            matrix = torch.mul(second_matrix, weight).add_(op_first.cache)
            return dense_operator(matrix, op_first.centre_positions, as_cache=True), k_val

        return combined

    def _path(self, op, k_val, y_train, y_val, scale, weight, penalties, part) -> list[PathResult]:
        """One penalty path on one operator, every step scored on the validation block."""
        iterations = [self.iterations.get(p, max(self.iterations.values())) for p in penalties]
        results: list[PathResult] = []
        tick = time.perf_counter()

        def score(penalty: float, alpha: torch.Tensor) -> None:
            nonlocal tick
            g_val, ll, auc = np.zeros(0), float("nan"), float("nan")
            if k_val is not None and y_val is not None:
                g_val = k_val.mm(alpha).cpu().numpy().astype(np.float64)
                ll, auc = log_loss(y_val, g_val), roc_auc(y_val, g_val)
            now = time.perf_counter()
            point = SearchPoint(scale, penalty, ll, auc, now - tick, utility_weight=weight)
            tick = now
            results.append(PathResult(point, alpha.detach().clone(), g_val))

        if self.backend == "falkon":
            # falkon reports no Newton steps: only the path's end is scored.
            from prefshap_core.solvers import falkon_backend

            if self.loss == "logistic":
                result = falkon_backend.fit_logistic(
                    op, y_train, penalties, self.solver, part, cg_iterations=iterations
                )
                score(penalties[-1], result.alpha)
            else:
                for penalty in penalties:
                    result = falkon_backend.fit_squared(op, y_train, penalty, self.solver)
                    score(penalty, result.alpha)
        elif self.loss == "logistic":
            fit_logistic(
                op, y_train, penalties, self.solver, part,
                callback=lambda step, penalty, alpha: score(penalty, alpha),
                cg_iterations=iterations,
            )  # fmt: skip
        else:
            warm = None
            for j, penalty in enumerate(penalties):
                result = fit_squared(
                    op, y_train, penalty, self.solver,
                    part.span(j / len(penalties), (j + 1) / len(penalties)),
                    warm_start=warm,
                )  # fmt: skip
                warm = result.alpha
                score(penalty, result.alpha)
        return results


def select_on_holdout(
    fitter: PathFitter,
    train: np.ndarray,
    validation: np.ndarray,
    scales: list[float],
    penalties: list[float],
    progress: Progress,
    utility_weights: list[float] | None = None,
    refine: bool = False,
) -> tuple[SearchRecord, torch.Tensor, PathFitter]:
    """Choose on the validation split; returns the record, the chosen alpha, the fitter.

    With ``refine`` (and enough validation duels) the group lengthscales are refined
    at the chosen scale and utility weight (``models.refine``) before the final fit;
    the returned fitter holds the refined lengthscales.
    """
    record = SearchRecord(criterion=fitter.criterion, selection="holdout")
    weights = [0.0] if fitter.kind == "upm" else list(utility_weights or [0.0])
    refine = refine and len(validation) >= REFINE_MIN_VALIDATION_DUELS
    y_val = fitter.data.y[validation].astype(np.float64)
    done = 0.0  # progress fraction used by the stages before the final fit
    full: list[PathResult] | None = None
    if len(scales) * len(weights) > 1 and len(train) > SUBSAMPLE_TRAIN_DUELS:
        # Large data: (scale, weight) ranked on a subsample, the winner fitted in full.
        done = 0.3
        best, coarse = _rank_on_subsample(
            fitter, train, validation, scales, penalties, progress.span(0.0, done), weights
        )
        record.points.extend(replace(p, stage="subsample") for p in coarse)
        scales, weights = [best.lengthscale_scale], [best.utility_weight]
    elif refine:
        # The grid at full size; its best point is the final model unless refined.
        done = 0.4
        full = fitter.fit(
            train, validation, scales, penalties, progress.span(0.0, done), utility_weights=weights
        )
        record.points.extend(r.point for r in full)
        best = full[_choose_result(fitter, full, y_val)].point
        scales, weights = [best.lengthscale_scale], [best.utility_weight]
    if refine:
        factors, tried = refine_group_lengthscales(
            fitter, train, validation, scales[0], weights[0], penalties,
            progress.span(done, done + 0.25),
        )  # fmt: skip
        done += 0.25
        record.points.extend(tried)
        record.item_group_factors = factors.items
        record.context_group_factors = factors.contexts
        if not factors.is_identity():
            fitter, full = with_factors(fitter, factors), None
        penalty = min(tried, key=fitter.loss_of).penalty  # the group search's best
        learned = refine_column_lengthscales(
            fitter, train, validation, scales[0], weights[0], penalties, penalty,
            progress.span(done, done + 0.1),
        )  # fmt: skip
        done += 0.1
        if learned is not None:
            fitter, full = learned, None
    if full is None:
        full = fitter.fit(
            train, validation, scales, penalties, progress.span(done, 1.0), utility_weights=weights
        )
        record.points.extend(r.point for r in full)
    best_full = full[_choose_result(fitter, full, y_val)]
    record.chosen = best_full.point
    return record, best_full.alpha, fitter


def _choose_result(fitter: PathFitter, results: list[PathResult], y_val: np.ndarray) -> int:
    return choose(fitter, [r.point for r in results], [r.validation_g for r in results], y_val)


def _rank_on_subsample(fitter, train, validation, scales, penalties, progress, weights):
    """The best (scale, weight) point of a fit on a seeded subsample with fewer centres."""
    sub_train, sub_val = fitter.subsample(
        train, validation, SUBSAMPLE_TRAIN_DUELS, SUBSAMPLE_VALIDATION_DUELS, stream=2
    )
    coarse = fitter.fit(
        sub_train, sub_val, scales, penalties, progress,
        n_centres=min(fitter.n_centres, SUBSAMPLE_CENTRES), utility_weights=weights,
    )  # fmt: skip
    pick = _choose_result(fitter, coarse, fitter.data.y[sub_val].astype(np.float64))
    return coarse[pick].point, [r.point for r in coarse]


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
    """K-fold choice on ``duels``, then a refit on all of them at the chosen point."""
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
