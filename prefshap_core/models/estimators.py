"""GPM, UPM and C-GPM: kernel logistic regression on duels, scikit-learn style.

``fit`` returns ``self``; parameters are stored as given; learned state ends in ``_``.
The fitted preference function is ``function_`` (a PreferenceFunction: exactly the
model file's arrays), so saving, evaluating and explaining all go through it.

    model = GPM(seed=0).fit(data)          # train / validation split drawn from seed
    g = model.decision_function(data, split.test)
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
import torch

from prefshap_core import __version__
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.errors import DataValidationError, NotFittedError
from prefshap_core.explain.cme import DEFAULT_CONTEXT_CME_LAMBDA, choose_cme_lambda
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.metrics import classification_metrics, log_loss, roc_auc
from prefshap_core.models.hyperparameters import (
    CG_ITERATIONS,
    CV_FOLDS,
    CV_MAX_DUELS,
    PENALTY_PATH,
    SUBSAMPLE_CENTRES,
    SUBSAMPLE_TRAIN_DUELS,
    SUBSAMPLE_VALIDATION_DUELS,
    SearchPoint,
    SearchRecord,
    median_lengthscales,
    scale_candidates,
)
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers import SolverOptions, fit_logistic, fit_squared


class PreferenceModel:
    """Shared machinery of the three models; use GPM, UPM or CGPM."""

    kind: ClassVar[str]

    def __init__(
        self,
        *,
        n_centres: int = 2000,
        loss: str = "logistic",
        lengthscales: np.ndarray | None = None,
        lengthscale_scale: float | None = None,
        context_lengthscales: np.ndarray | None = None,
        penalty: float | None = None,
        penalty_path: tuple[float, ...] = PENALTY_PATH,
        cg_iterations: tuple[int, ...] = CG_ITERATIONS,
        cme_lambda: float | None = None,
        context_cme_lambda: float | None = None,
        selection: str = "auto",
        seed: int = 0,
        compute: Compute | None = None,
        solver: SolverOptions | None = None,
    ) -> None:
        self.n_centres = n_centres
        self.loss = loss
        self.lengthscales = lengthscales
        self.lengthscale_scale = lengthscale_scale
        self.context_lengthscales = context_lengthscales
        self.penalty = penalty
        self.penalty_path = penalty_path
        self.cg_iterations = cg_iterations
        self.cme_lambda = cme_lambda
        self.context_cme_lambda = context_cme_lambda
        self.selection = selection
        self.seed = seed
        self.compute = compute
        self.solver = solver

    def get_params(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in (
                "n_centres", "loss", "lengthscales", "lengthscale_scale",
                "context_lengthscales", "penalty", "penalty_path", "cg_iterations",
                "cme_lambda", "context_cme_lambda", "selection", "seed", "compute", "solver",
            )
        }  # fmt: skip

    # -- fitting -------------------------------------------------------------------
    def fit(
        self,
        data: DuelData,
        train: np.ndarray | None = None,
        validation: np.ndarray | None = None,
        progress: Progress | None = None,
    ) -> PreferenceModel:
        """Fit on ``train`` duels, choosing what is not fixed on ``validation`` duels.

        Without ``train``/``validation``, the seeded 80/10/10 split of ``data`` is used
        (its test part is left untouched).
        """
        start = time.perf_counter()
        self._check_params(data)
        progress = ensure_progress(progress)
        compute = self.compute or Compute()
        if train is None or validation is None:
            split = split_duels(data.n_duels, self.seed)
            train = split.train if train is None else train
            validation = split.validation if validation is None else validation
        train, validation = np.asarray(train), np.asarray(validation)
        if len(train) < 2 or len(validation) < 1:
            raise DataValidationError("too few duels to train: need at least 2 to train on")

        base_ls = self._base_lengthscales(data)
        context_ls = self._context_lengthscales(data)
        scales = (
            [float(self.lengthscale_scale)]
            if self.lengthscale_scale is not None
            else scale_candidates(data.item_space.n_groups)
        )
        penalties = [float(self.penalty)] if self.penalty is not None else list(self.penalty_path)
        use_cv = self.selection == "cv" or (
            self.selection == "auto"
            and len(train) + len(validation) <= CV_MAX_DUELS
            and (len(scales) > 1 or len(penalties) > 1)
        )
        fit_on = np.concatenate([train, validation]) if use_cv else train
        search = progress.span(0.0, 0.8 if use_cv else 0.97)
        if use_cv:
            record = self._cross_validate(data, fit_on, scales, penalties, base_ls, context_ls,
                                          compute, search)  # fmt: skip
            chosen = record.chosen
            assert chosen is not None
            upto = penalties[: penalties.index(chosen.penalty) + 1]
            (_, alpha, _), *_ = reversed(
                self._search(data, fit_on, None, [chosen.lengthscale_scale], upto, base_ls,
                             context_ls, compute, progress.span(0.8, 0.97))
            )  # fmt: skip
        else:
            record = SearchRecord(criterion=self._criterion(), selection="holdout")
            if len(scales) > 1 and len(train) > SUBSAMPLE_TRAIN_DUELS:
                # Rank the scales on a subsample with fewer centres (cheap), then fit the
                # full path only at the best one; the penalty is chosen there.
                rng = np.random.default_rng([self.seed, 2])
                sub_train = np.sort(rng.choice(train, SUBSAMPLE_TRAIN_DUELS, replace=False))
                sub_val = np.sort(
                    rng.choice(validation, min(len(validation), SUBSAMPLE_VALIDATION_DUELS),
                               replace=False)
                )  # fmt: skip
                coarse = self._search(
                    data, sub_train, sub_val, scales, penalties, base_ls, context_ls, compute,
                    search.span(0.0, 0.3), n_centres=min(self.n_centres, SUBSAMPLE_CENTRES),
                )  # fmt: skip
                record.points.extend(replace(p, stage="subsample") for p, _, _ in coarse)
                scales = [min(coarse, key=lambda r: self._loss_of(r[0]))[0].lengthscale_scale]
                search = search.span(0.3, 1.0)
            best: tuple[float, SearchPoint, torch.Tensor] | None = None
            for point, alpha_k, _ in self._search(
                data, train, validation, scales, penalties, base_ls, context_ls, compute, search
            ):
                record.points.append(point)
                if best is None or self._loss_of(point) < best[0]:
                    best = (self._loss_of(point), point, alpha_k)
            assert best is not None
            _, chosen, alpha = best
            record.chosen = chosen
        train = fit_on
        rng = np.random.default_rng(self.seed)
        centres = np.sort(rng.choice(len(train), min(self.n_centres, len(train)), replace=False))

        self.lengthscale_scale_ = chosen.lengthscale_scale
        self.lengthscales_ = base_ls * chosen.lengthscale_scale
        self.context_lengthscales_ = context_ls
        self.penalty_ = chosen.penalty
        self.search_ = record
        self.train_duels_ = train
        self.validation_duels_ = validation
        centre_duels = train[centres]
        progress.update("Choosing the CME regulariser", 0.99)
        self.cme_lambda_ = (
            choose_cme_lambda(data.items, self.lengthscales_, data.item_space.feature_group,
                              seed=self.seed, compute=compute)
            if self.cme_lambda is None
            else float(self.cme_lambda)
        )  # fmt: skip
        self.function_ = self._function(data, centre_duels, alpha, train)
        self.fit_seconds_ = time.perf_counter() - start
        self.function_.metadata.update(self._metadata(data))
        progress.update("Done", 1.0)
        return self

    def _criterion(self) -> str:
        return "validation_log_loss" if self.loss == "logistic" else "validation_auc"

    def _loss_of(self, point: SearchPoint) -> float:
        return point.validation_log_loss if self.loss == "logistic" else -point.validation_auc

    def _search(
        self,
        data: DuelData,
        train: np.ndarray,
        validation: np.ndarray | None,
        scales: list[float],
        penalties: list[float],
        base_ls: np.ndarray,
        context_ls: np.ndarray | None,
        compute: Compute,
        progress: Progress,
        n_centres: int | None = None,
    ) -> list[tuple[SearchPoint, torch.Tensor, np.ndarray]]:
        """Fit every scale along the penalty path; score each step on ``validation``.

        The Nyström centres are a seeded sample of ``train`` (the same for every scale),
        so the points differ only in the hyperparameters.
        """
        rng = np.random.default_rng(self.seed)
        n_centres = min(n_centres or self.n_centres, len(train))
        centres = np.sort(rng.choice(len(train), n_centres, replace=False))
        train_index = self._duel_index(data, train, compute)
        y_train = data.y[train].astype(np.float64)
        y_val = None if validation is None else data.y[validation].astype(np.float64)
        options = self.solver or SolverOptions()
        path_iterations = dict(zip(self.penalty_path, self.cg_iterations, strict=True))
        iterations = [path_iterations.get(p, max(self.cg_iterations)) for p in penalties]
        results: list[tuple[SearchPoint, torch.Tensor, np.ndarray]] = []
        for k, scale in enumerate(scales):
            part = progress.span(k / len(scales), (k + 1) / len(scales))
            kernel = PairKernel(
                self.kind, data.items, base_ls * scale,
                data.contexts if self.kind == "cgpm" else None, context_ls, compute,
            )  # fmt: skip
            op = kernel.operator(train_index, centres, **options.operator_kwargs())
            k_val = None
            if validation is not None:
                val_index = self._duel_index(data, validation, compute)
                k_val = kernel.matrix(val_index, train_index.subset(torch.as_tensor(centres)))
            tick = time.perf_counter()

            def score(
                penalty: float, alpha: torch.Tensor, scale: float = scale, k_val=k_val
            ) -> None:
                nonlocal tick
                g_val = np.zeros(0)
                ll = auc = float("nan")
                if k_val is not None and y_val is not None:
                    g_val = (k_val @ alpha).cpu().numpy().astype(np.float64)
                    ll, auc = log_loss(y_val, g_val), roc_auc(y_val, g_val)
                now = time.perf_counter()
                point = SearchPoint(scale, penalty, ll, auc, now - tick)
                tick = now
                results.append((point, alpha.detach().clone(), g_val))

            if self.loss == "logistic":
                fit_logistic(
                    op, y_train, penalties, options, part,
                    callback=lambda step, penalty, alpha: score(penalty, alpha),
                    cg_iterations=iterations,
                )  # fmt: skip
            else:
                warm = None
                for j, penalty in enumerate(penalties):
                    result = fit_squared(
                        op, y_train, penalty, options,
                        part.span(j / len(penalties), (j + 1) / len(penalties)),
                        warm_start=warm,
                    )  # fmt: skip
                    warm = result.alpha
                    score(penalty, result.alpha)
        return results

    def _cross_validate(
        self,
        data: DuelData,
        duels: np.ndarray,
        scales: list[float],
        penalties: list[float],
        base_ls: np.ndarray,
        context_ls: np.ndarray | None,
        compute: Compute,
        progress: Progress,
    ) -> SearchRecord:
        """K-fold choice of (scale, penalty) on small data, scored on pooled out-of-fold g.

        With a few hundred duels a 10% validation split holds a handful of duels, and
        choosing on it is mostly noise; every duel is scored once out of fold instead.
        """
        order = np.random.default_rng([self.seed, 1]).permutation(len(duels))
        folds = [duels[np.sort(f)] for f in np.array_split(order, min(CV_FOLDS, len(duels)))]
        pooled: dict[tuple[float, float], list[np.ndarray]] = {}
        seconds: dict[tuple[float, float], float] = {}
        for k, fold in enumerate(folds):
            rest = np.setdiff1d(duels, fold)
            part = progress.span(k / len(folds), (k + 1) / len(folds))
            for point, _, g_val in self._search(
                data, rest, fold, scales, penalties, base_ls, context_ls, compute, part
            ):
                key = (point.lengthscale_scale, point.penalty)
                pooled.setdefault(key, []).append(g_val)
                seconds[key] = seconds.get(key, 0.0) + point.seconds
        y = data.y[np.concatenate(folds)].astype(np.float64)
        record = SearchRecord(criterion=self._criterion(), selection=f"{len(folds)}-fold cv")
        for (scale, penalty), parts in pooled.items():
            g = np.concatenate(parts)
            record.points.append(
                SearchPoint(
                    scale, penalty, log_loss(y, g), roc_auc(y, g), seconds[(scale, penalty)]
                )
            )
        record.chosen = min(record.points, key=self._loss_of)
        return record

    # -- prediction ----------------------------------------------------------------
    def decision_function(self, data: DuelData, duels: np.ndarray | None = None) -> np.ndarray:
        """g(left, right[, context]) for the given duels of ``data`` (default all)."""
        fn = self._fitted()
        idx = np.arange(data.n_duels) if duels is None else np.asarray(duels)
        if self.kind == "cgpm":
            return fn.decision_on_pool(
                data.items, data.left[idx], data.right[idx],
                data.contexts, data.context_index[idx], compute=self.compute,
            )  # fmt: skip
        return fn.decision_on_pool(
            data.items, data.left[idx], data.right[idx], compute=self.compute
        )

    def predict_proba(self, data: DuelData, duels: np.ndarray | None = None) -> np.ndarray:
        """P(left item wins) = sigmoid(g)."""
        return 1.0 / (1.0 + np.exp(-self.decision_function(data, duels)))

    def score(self, data: DuelData, duels: np.ndarray | None = None) -> dict[str, float]:
        """ROC AUC, accuracy, balanced accuracy and log loss on the given duels."""
        idx = np.arange(data.n_duels) if duels is None else np.asarray(duels)
        return classification_metrics(data.y[idx], self.decision_function(data, idx))

    # -- helpers -------------------------------------------------------------------
    def _fitted(self) -> PreferenceFunction:
        if not hasattr(self, "function_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit")
        return self.function_

    def _check_params(self, data: DuelData) -> None:
        if self.selection not in ("auto", "holdout", "cv"):
            raise ValueError(f"selection must be auto, holdout or cv, got {self.selection!r}")
        if self.loss not in ("logistic", "squared"):
            raise ValueError(f"loss must be 'logistic' or 'squared', got {self.loss!r}")
        if self.n_centres < 1:
            raise ValueError("n_centres must be at least 1")
        if self.kind == "cgpm" and not data.has_context:
            raise DataValidationError(
                "a C-GPM needs context columns in the duels table; this data has none"
            )
        if len(self.cg_iterations) != len(self.penalty_path):
            raise ValueError("cg_iterations needs one entry per penalty of penalty_path")

    def _base_lengthscales(self, data: DuelData) -> np.ndarray:
        if self.lengthscales is None:
            return median_lengthscales(data.items, seed=self.seed)
        ls = np.asarray(self.lengthscales, dtype=np.float64)
        if ls.shape != (data.item_space.n_features,) or np.any(ls <= 0):
            raise ValueError(f"lengthscales must be {data.item_space.n_features} positive numbers")
        return ls

    def _context_lengthscales(self, data: DuelData) -> np.ndarray | None:
        if self.kind != "cgpm":
            return None
        assert data.contexts is not None and data.context_space is not None
        if self.context_lengthscales is not None:
            ls = np.asarray(self.context_lengthscales, dtype=np.float64)
            if ls.shape != (data.context_space.n_features,) or np.any(ls <= 0):
                raise ValueError(
                    f"context_lengthscales must be {data.context_space.n_features} positive numbers"
                )
            return ls
        # Heuristic on the duels' contexts (weighted by use), scaled like the items'.
        used = data.contexts[data.context_index]
        return median_lengthscales(used, seed=self.seed) * np.sqrt(data.context_space.n_groups)

    def _duel_index(self, data: DuelData, duels: np.ndarray, compute: Compute) -> DuelIndex:
        ctx = data.context_index[duels] if self.kind == "cgpm" else None
        return DuelIndex.from_arrays(
            data.left[duels], data.right[duels], ctx, device=compute.torch_device
        )

    def _function(
        self, data: DuelData, centre_duels: np.ndarray, alpha: torch.Tensor, train: np.ndarray
    ) -> PreferenceFunction:
        extra: dict[str, Any] = {}
        if self.kind == "cgpm":
            assert data.contexts is not None and data.context_index is not None
            weights = data.context_weights(train)
            seen = weights > 0
            context_lambda = self.context_cme_lambda
            if context_lambda is None:
                assert data.context_space is not None and self.context_lengthscales_ is not None
                context_lambda = choose_cme_lambda(
                    data.contexts[seen], self.context_lengthscales_,
                    data.context_space.feature_group, weights=weights[seen],
                    seed=self.seed, fallback=DEFAULT_CONTEXT_CME_LAMBDA,
                )  # fmt: skip
            self.context_cme_lambda_ = float(context_lambda)
            extra = dict(
                context_space=data.context_space,
                contexts=data.contexts[seen],
                context_weights=weights[seen],
                context_lengthscales=self.context_lengthscales_,
                centres_context=data.contexts[data.context_index[centre_duels]],
                context_cme_lambda=self.context_cme_lambda_,
            )
        return PreferenceFunction(
            kind=self.kind,
            item_space=data.item_space,
            item_ids=np.asarray(data.item_ids).astype(str),
            items=data.items,
            lengthscales=self.lengthscales_,
            centres_left=data.items[data.left[centre_duels]],
            centres_right=data.items[data.right[centre_duels]],
            alpha=alpha.cpu().numpy().astype(np.float64),
            cme_lambda=self.cme_lambda_,
            metadata={},
            **extra,
        )

    def _metadata(self, data: DuelData) -> dict[str, Any]:
        chosen = self.search_.chosen
        assert chosen is not None
        return {
            "prefshap_version": __version__,
            "dataset": data.name,
            "kind": self.kind,
            "loss": self.loss,
            "seed": self.seed,
            "n_centres": len(self.function_.alpha),
            "n_train_duels": len(self.train_duels_),
            "n_validation_duels": len(self.validation_duels_),
            "lengthscale_scale": self.lengthscale_scale_,
            "penalty": self.penalty_,
            "cme_lambda": self.cme_lambda_,
            "validation_log_loss": chosen.validation_log_loss,
            "validation_auc": chosen.validation_auc,
            "search": self.search_.as_rows(),
            "search_criterion": self.search_.criterion,
            "selection": self.search_.selection,
            "fit_seconds": self.fit_seconds_,
        }


class GPM(PreferenceModel):
    """Generalised preference model: skew-symmetric g on pairs (no rankability assumed)."""

    kind = "gpm"


class UPM(PreferenceModel):
    """Utility model (kernel Bradley-Terry): g(a, b) = f(a) - f(b)."""

    kind = "upm"


class CGPM(PreferenceModel):
    """Context-specific GPM: k_U(u, u') k_E(...); needs context columns."""

    kind = "cgpm"


MODELS: dict[str, type[PreferenceModel]] = {"gpm": GPM, "upm": UPM, "cgpm": CGPM}


def make_model(kind: str, **params: Any) -> PreferenceModel:
    if kind not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {kind!r}")
    return MODELS[kind](**params)
