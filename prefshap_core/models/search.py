"""Choosing the lengthscale scale and the penalty: fits along the penalty path, scored.

``PathFitter`` fits one model kind at given lengthscale scales along a decreasing
penalty path (the logistic solver's Newton path, or warm-started squared-loss fits)
and scores every step on validation duels, so the penalty costs nothing extra to
choose. Two selection protocols use it:

- ``select_on_holdout``: the validation split decides. On large data the scales are
  first ranked on a seeded subsample with fewer centres (cheap); only the winner is
  fitted at full size, where the penalty is chosen.
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
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.metrics import log_loss, roc_auc
from prefshap_core.models.hyperparameters import (
    CV_FOLDS,
    SUBSAMPLE_CENTRES,
    SUBSAMPLE_TRAIN_DUELS,
    SUBSAMPLE_VALIDATION_DUELS,
    SearchPoint,
    SearchRecord,
)
from prefshap_core.progress import Progress
from prefshap_core.solvers import SolverOptions, fit_logistic, fit_squared


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
    ) -> list[PathResult]:
        """Fit every scale along the penalty path; score each step on ``validation``.

        The centres are the same for every scale, so the points differ only in the
        hyperparameters.
        """
        data = self.data
        centres = self.centres(len(train), n_centres)
        train_index = self.duel_index(train)
        y_train = data.y[train].astype(np.float64)
        y_val = None if validation is None else data.y[validation].astype(np.float64)
        iterations = [self.iterations.get(p, max(self.iterations.values())) for p in penalties]
        results: list[PathResult] = []
        for k, scale in enumerate(scales):
            part = progress.span(k / len(scales), (k + 1) / len(scales))
            part.update(f"Building the kernel matrix (lengthscale scale {scale:.3g})", 0.0)
            kernel = PairKernel(
                self.kind, data.items, self.base_lengthscales * scale,
                data.contexts if self.kind == "cgpm" else None, self.context_lengthscales,
                self.compute,
            )  # fmt: skip
            op = kernel.operator(train_index, centres, **self.solver.operator_kwargs())
            k_val = None
            if validation is not None:
                # An operator, not a dense matrix: cached when it fits the solver's cache
                # budget, else computed in blocks (a 170k-duel validation split against
                # 2000 centres is 2.7 GB dense).
                centre_index = train_index.subset(torch.as_tensor(centres))
                k_val = kernel.operator(
                    self.duel_index(validation), centre_index, **self.solver.operator_kwargs()
                )
            part.update(f"Kernel matrix ready (lengthscale scale {scale:.3g})", 0.02)
            tick = time.perf_counter()

            def score(penalty: float, alpha: torch.Tensor, scale=scale, k_val=k_val) -> None:
                nonlocal tick
                g_val, ll, auc = np.zeros(0), float("nan"), float("nan")
                if k_val is not None and y_val is not None:
                    g_val = k_val.mm(alpha).cpu().numpy().astype(np.float64)
                    ll, auc = log_loss(y_val, g_val), roc_auc(y_val, g_val)
                now = time.perf_counter()
                point = SearchPoint(scale, penalty, ll, auc, now - tick)
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
) -> tuple[SearchRecord, torch.Tensor]:
    """Choose on the validation split; returns the record and the chosen alpha."""
    record = SearchRecord(criterion=fitter.criterion, selection="holdout")
    if len(scales) > 1 and len(train) > SUBSAMPLE_TRAIN_DUELS:
        rng = np.random.default_rng([fitter.seed, 2])
        sub_train = np.sort(rng.choice(train, SUBSAMPLE_TRAIN_DUELS, replace=False))
        n_val = min(len(validation), SUBSAMPLE_VALIDATION_DUELS)
        sub_val = np.sort(rng.choice(validation, n_val, replace=False))
        coarse = fitter.fit(
            sub_train, sub_val, scales, penalties, progress.span(0.0, 0.3),
            n_centres=min(fitter.n_centres, SUBSAMPLE_CENTRES),
        )  # fmt: skip
        record.points.extend(replace(r.point, stage="subsample") for r in coarse)
        scales = [min(coarse, key=lambda r: fitter.loss_of(r.point)).point.lengthscale_scale]
        progress = progress.span(0.3, 1.0)
    full = fitter.fit(train, validation, scales, penalties, progress)
    record.points.extend(r.point for r in full)
    best = min(full, key=lambda r: fitter.loss_of(r.point))
    record.chosen = best.point
    return record, best.alpha


def cross_validate(
    fitter: PathFitter,
    duels: np.ndarray,
    scales: list[float],
    penalties: list[float],
    progress: Progress,
) -> tuple[SearchRecord, torch.Tensor]:
    """K-fold choice on ``duels``, then a refit on all of them at the chosen point."""
    order = np.random.default_rng([fitter.seed, 1]).permutation(len(duels))
    folds = [duels[np.sort(f)] for f in np.array_split(order, min(CV_FOLDS, len(duels)))]
    pooled: dict[tuple[float, float], list[np.ndarray]] = {}
    seconds: dict[tuple[float, float], float] = {}
    for k, fold in enumerate(folds):
        rest = np.setdiff1d(duels, fold)
        part = progress.span(0.8 * k / len(folds), 0.8 * (k + 1) / len(folds))
        for result in fitter.fit(rest, fold, scales, penalties, part):
            key = (result.point.lengthscale_scale, result.point.penalty)
            pooled.setdefault(key, []).append(result.validation_g)
            seconds[key] = seconds.get(key, 0.0) + result.point.seconds
    y = fitter.data.y[np.concatenate(folds)].astype(np.float64)
    record = SearchRecord(criterion=fitter.criterion, selection=f"{len(folds)}-fold cv")
    for (scale, penalty), parts in pooled.items():
        g = np.concatenate(parts)
        record.points.append(SearchPoint(scale, penalty, log_loss(y, g), roc_auc(y, g),
                                         seconds[(scale, penalty)]))  # fmt: skip
    chosen = min(record.points, key=fitter.loss_of)
    record.chosen = chosen
    # The same Newton path up to the chosen penalty, on all the duels.
    upto = penalties[: penalties.index(chosen.penalty) + 1]
    refit = fitter.fit(duels, None, [chosen.lengthscale_scale], upto, progress.span(0.8, 1.0))
    return record, refit[-1].alpha
