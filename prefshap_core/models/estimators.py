"""GPM, UPM and C-GPM: kernel logistic regression on duels, scikit-learn style.

``fit`` returns ``self``; parameters are stored as given; learned state ends in ``_``.
The fitted preference function is ``function_`` (a PreferenceFunction: exactly the
model file's arrays), so saving, evaluating and explaining all go through it.

    model = GPM(seed=0).fit(data)          # train / validation split drawn from seed
    g = model.decision_function(data, split.test)
"""

from __future__ import annotations

import inspect
import time
from typing import Any, ClassVar

import numpy as np
import torch

from prefshap_core import __version__
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.errors import DataValidationError, NotFittedError
from prefshap_core.metrics import classification_metrics
from prefshap_core.models.hyperparameters import (
    CG_ITERATIONS,
    CV_MAX_DUELS,
    DEFAULT_CME_LAMBDA,
    DEFAULT_CONTEXT_CME_LAMBDA,
    PENALTY_PATH,
    UPM_CG_ITERATIONS,
    UPM_PENALTY_PATH,
    UTILITY_WEIGHTS,
    median_lengthscales,
    scale_candidates,
)
from prefshap_core.models.path_fitter import PathFitter
from prefshap_core.models.posterior import (
    TrainingSystem,
    uses_training_system,
    with_training_posterior,
)
from prefshap_core.models.posterior_calibration import with_holdout_dispersion
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.models.search import cross_validate, select_on_holdout
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.options import SolverOptions


class PreferenceModel:
    """Shared machinery of the three models; use GPM, UPM or CGPM."""

    kind: ClassVar[str]

    def __init__(
        self,
        *,
        n_centres: int = 2000,
        loss: str = "logistic",
        lengthscales: np.ndarray | tuple[float, ...] | None = None,
        lengthscale_scale: float | None = None,
        lengthscale_scales: tuple[float, ...] | None = None,
        context_lengthscales: np.ndarray | tuple[float, ...] | None = None,
        penalty: float | None = None,
        penalty_path: tuple[float, ...] | None = None,  # None: the kind's (see path())
        cg_iterations: tuple[int, ...] | None = None,
        utility_weight: float | None = None,
        utility_weights: tuple[float, ...] | None = None,  # None: UTILITY_WEIGHTS
        refine_lengthscales: bool = True,
        cme_lambda: float | None = None,
        context_cme_lambda: float | None = None,
        selection: str = "auto",
        backend: str = "torch",
        seed: int = 0,
        compute: Compute | None = None,
        solver: SolverOptions | None = None,
    ) -> None:
        self.n_centres = n_centres
        self.loss = loss
        self.lengthscales = lengthscales
        self.lengthscale_scale = lengthscale_scale
        self.lengthscale_scales = lengthscale_scales
        self.context_lengthscales = context_lengthscales
        self.penalty = penalty
        self.penalty_path = penalty_path
        self.cg_iterations = cg_iterations
        self.utility_weight = utility_weight
        self.utility_weights = utility_weights
        self.refine_lengthscales = refine_lengthscales
        self.cme_lambda = cme_lambda
        self.context_cme_lambda = context_cme_lambda
        self.selection = selection
        self.backend = backend
        self.seed = seed
        self.compute = compute
        self.solver = solver

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The parameters: the keyword-only arguments of ``__init__`` (scikit-learn style)."""
        signature = inspect.signature(cls.__init__).parameters.values()
        return tuple(p.name for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY)

    def get_params(self) -> dict[str, Any]:
        """The parameters as given to ``__init__`` (or ``set_params``)."""
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: Any) -> PreferenceModel:
        """Change parameters (a refit uses them); an unknown name is a ValueError."""
        unknown = sorted(set(params) - set(self.param_names()))
        if unknown:
            raise ValueError(f"unknown parameter(s) of {type(self).__name__}: {', '.join(unknown)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    # -- fitting -------------------------------------------------------------------
    def fit(
        self,
        data: DuelData,
        train: np.ndarray | None = None,
        validation: np.ndarray | None = None,
        progress: Progress | None = None,
        *,
        posterior: bool = True,
    ) -> PreferenceModel:
        """Fit on ``train`` duels, choosing what is not fixed on ``validation`` duels.

        Without ``train``/``validation``, the seeded 80/10/10 split of ``data`` is used
        (its test part is left untouched). ``posterior=False`` leaves the training
        posterior out (a candidate that may not be kept: ``add_posterior`` adds it).
        """
        start = time.perf_counter()
        self._check_params(data)
        progress = ensure_progress(progress)
        progress.update("Preparing: lengthscales from the median heuristic", 0.0)
        compute = self.compute or Compute()
        if train is None or validation is None:
            split = split_duels(data.n_duels, self.seed, groups=data.duel_groups)
            train = split.train if train is None else train
            validation = split.validation if validation is None else validation
        train, validation = np.asarray(train), np.asarray(validation)
        if len(train) < 2 or len(validation) < 1:
            raise DataValidationError("too few duels to train: need at least 2 to train on")

        base_ls = self._base_lengthscales(data)
        context_ls = self._context_lengthscales(data)
        if self.lengthscale_scale is not None:
            scales = [float(self.lengthscale_scale)]
        elif self.lengthscale_scales is not None:
            scales = [float(s) for s in self.lengthscale_scales]
        elif self.lengthscales is not None:
            scales = [1.0]  # lengthscales given as they are meant: no search over a scale
        else:
            scales = scale_candidates(data.item_space.n_groups)
        path, cg_iterations = self.path()
        penalties = [float(self.penalty)] if self.penalty is not None else list(path)
        weights = self._utility_weights()
        fitter = PathFitter(
            kind=self.kind,
            loss=self.loss,
            data=data,
            base_lengthscales=base_ls,
            context_lengthscales=context_ls,
            compute=compute,
            solver=self.solver or SolverOptions(),
            seed=self.seed,
            n_centres=self.n_centres,
            iterations=dict(zip(path, cg_iterations, strict=True)),
            backend=self.backend,
        )
        use_cv = self.selection == "cv" or (
            self.selection == "auto"
            and len(train) + len(validation) <= CV_MAX_DUELS
            and len(scales) * len(penalties) * len(weights) > 1
        )
        search = progress.span(0, 0.97)
        system = None  # the chosen fit's K_nM and factors, for its posterior
        if use_cv:
            train = np.concatenate([train, validation])
            record, alpha = cross_validate(fitter, train, scales, penalties, search, weights)
        else:
            # Lengthscales given by the user are meant as they are: not refined.
            refine = self.refine_lengthscales and self.lengthscales is None
            keep = (
                posterior
                and self.loss == "logistic"
                and uses_training_system(self.kind, len(train))
            )
            record, chosen_fit, fitter = select_on_holdout(
                fitter, train, validation, scales, penalties, search, weights, refine=refine,
                keep_system=keep,
            )  # fmt: skip
            alpha, system = chosen_fit.alpha, chosen_fit.system
            del chosen_fit
        chosen = record.chosen
        assert chosen is not None
        centres = fitter.centres(len(train))  # the positions the search's fits used
        positions = None if system is None else system.centre_positions
        if positions is not None and not np.array_equal(positions.cpu(), centres):
            system = None  # (not the final fit's centres: never the case today)

        self.lengthscale_scale_ = chosen.lengthscale_scale
        # The fitter's lengthscales include the refined group factors (if any).
        self.lengthscales_ = fitter.base_lengthscales * chosen.lengthscale_scale
        self.context_lengthscales_ = fitter.context_lengthscales
        self.lengthscale_factors_ = dict(record.item_group_factors)
        self.context_lengthscale_factors_ = dict(record.context_group_factors)
        self.penalty_ = chosen.penalty
        self.utility_weight_ = chosen.utility_weight
        self.search_ = record
        self.train_duels_ = train
        self.validation_duels_ = validation
        centre_duels = train[centres]
        # The explanations' regulariser is chosen by the workflow (held-out CME error),
        # not here: fitting a preference function needs no explainer.
        self.cme_lambda_ = DEFAULT_CME_LAMBDA if self.cme_lambda is None else float(self.cme_lambda)
        self.function_ = self._function(data, centre_duels, alpha, train)
        self.solver_, self.compute_ = fitter.solver, compute
        # K-fold refits on every duel: none is held out to calibrate the posterior on.
        self.calibration_duels_ = np.empty(0, dtype=np.int64) if use_cv else validation
        if posterior:
            self._add_posterior(data, system)
        del system
        self.fit_seconds_ = time.perf_counter() - start
        self.function_.metadata.update(self._metadata(data))
        progress.update("Done", 1.0)
        return self

    def add_posterior(self, data: DuelData) -> PreferenceModel:
        """Add the training posterior to the fitted function (if not there yet).

        The squared loss has no likelihood to read one from: nothing is added then.
        """
        return self._add_posterior(data, None)

    def _add_posterior(self, data: DuelData, system: TrainingSystem | None) -> PreferenceModel:
        fn = self._fitted()
        if self.loss == "logistic" and fn.posterior_factor is None:
            fn = with_training_posterior(
                fn, data, self.train_duels_, self.penalty_, self.solver_, self.compute_,
                self.seed, system,
            )  # fmt: skip
            rows = None if system is None else system.validation_rows
            self.function_ = with_holdout_dispersion(
                fn, data, self.calibration_duels_, self.compute_, rows
            )
        return self

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
        if self.backend not in ("torch", "falkon"):
            raise ValueError(f"backend must be 'torch' or 'falkon', got {self.backend!r}")
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
        path, cg_iterations = self.path()
        if len(cg_iterations) != len(path):
            raise ValueError("cg_iterations needs one entry per penalty of penalty_path")
        self._utility_weights()  # checks them
        if self.lengthscale_scales is not None and (
            not len(self.lengthscale_scales) or min(self.lengthscale_scales) <= 0
        ):
            raise ValueError("lengthscale_scales must be one or more positive numbers")

    def path(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """The penalty path and its CG iterations per step: as given, else the kind's
        default (``UPM_PENALTY_PATH`` for a UPM, ``PENALTY_PATH`` otherwise)."""
        if self.kind == "upm":
            default_path, default_iterations = UPM_PENALTY_PATH, UPM_CG_ITERATIONS
        else:
            default_path, default_iterations = PENALTY_PATH, CG_ITERATIONS
        path = self.penalty_path or default_path
        # A path given without iterations takes the default's first ones.
        iterations = self.cg_iterations or default_iterations[: len(path)]
        return tuple(path), tuple(iterations)

    def _utility_weights(self) -> list[float]:
        """The utility weights to search: the fixed one, else the grid (UPM: none)."""
        if self.kind == "upm":
            return [0.0]  # all utility already: the weight is ignored
        if self.utility_weight is not None:
            given: Any = [self.utility_weight]
        else:
            given = UTILITY_WEIGHTS if self.utility_weights is None else self.utility_weights
        weights = [float(w) for w in given]
        if not weights or not all(np.isfinite(w) and w >= 0 for w in weights):
            raise ValueError("utility weights must be one or more finite numbers >= 0")
        return weights

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
                context_lambda = DEFAULT_CONTEXT_CME_LAMBDA
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
            utility_weight=self.utility_weight_,
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
            "utility_weight": self.utility_weight_,
            "lengthscale_factors": self.lengthscale_factors_,
            "context_lengthscale_factors": self.context_lengthscale_factors_,
            "cme_lambda": self.cme_lambda_,
            "validation_log_loss": chosen.validation_log_loss,
            "validation_auc": chosen.validation_auc,
            "search": self.search_.as_rows(),
            "search_criterion": self.search_.criterion,
            "selection": self.search_.selection,
            "fit_seconds": self.fit_seconds_,
        }


class GPM(PreferenceModel):
    """Generalised preference model: skew-symmetric g on pairs (no rankability assumed).

    Its kernel is ``k_E + w k_UPM``: ``utility_weight`` ``w`` is searched on
    ``utility_weights`` unless given (``utility_weight=0``: the plain GPM).
    """

    kind = "gpm"


class UPM(PreferenceModel):
    """Utility model (kernel Bradley-Terry): g(a, b) = f(a) - f(b)."""

    kind = "upm"


class CGPM(PreferenceModel):
    """Context-specific GPM: k_U(u, u') [k_E(...) + w k_UPM(...)]; needs context columns."""

    kind = "cgpm"


MODELS: dict[str, type[PreferenceModel]] = {"gpm": GPM, "upm": UPM, "cgpm": CGPM}


def make_model(kind: str, **params: Any) -> PreferenceModel:
    if kind not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {kind!r}")
    return MODELS[kind](**params)
