"""What to train: the settings of one training run, and the model they make.

Both clients (CLI flags, dashboard form) fill a ``TrainSettings``; its fingerprint
(``workflow.fingerprints``) keys the model cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.models.estimators import PreferenceModel, make_model
from prefshap_core.solvers.options import SolverOptions


@dataclass(frozen=True)
class TrainSettings:
    """What to train; ``None`` hyperparameters are chosen automatically."""

    kind: str = "gpm"
    seed: int = 0
    n_centres: int = 2000
    lengthscales: tuple[float, ...] | None = None  # one per item column (model space)
    lengthscale_scale: float | None = None
    lengthscale_scales: tuple[float, ...] | None = None  # the scales to search (else automatic)
    utility_weight: float | None = None  # GPM / C-GPM sum kernel weight (0: plain GPM)
    utility_weights: tuple[float, ...] | None = None  # the weights to search (else automatic)
    refine_lengthscales: bool = True  # per-group lengthscale search (models.refine)
    context_lengthscales: tuple[float, ...] | None = None  # one per context column
    penalty: float | None = None
    loss: str = "logistic"
    cme_lambda: float | None = None
    context_cme_lambda: float | None = None
    dtype: str = "float64"
    device: str = "cpu"
    backend: str = "torch"  # "falkon": the optional falkon package, if installed
    baseline: bool = True  # also fit a UPM on the same split, for comparison

    def model(
        self, kind: str | None = None, solver: SolverOptions | None = None
    ) -> PreferenceModel:
        grid = {} if self.utility_weights is None else {"utility_weights": self.utility_weights}
        return make_model(
            kind or self.kind,
            **grid,
            lengthscale_scales=self.lengthscale_scales,
            utility_weight=None if (kind or self.kind) == "upm" else self.utility_weight,
            refine_lengthscales=self.refine_lengthscales,
            n_centres=self.n_centres,
            lengthscales=None if self.lengthscales is None else np.asarray(self.lengthscales),
            lengthscale_scale=self.lengthscale_scale,
            context_lengthscales=(
                None if self.context_lengthscales is None else np.asarray(self.context_lengthscales)
            ),
            penalty=self.penalty,
            loss=self.loss,
            cme_lambda=self.cme_lambda,
            context_cme_lambda=self.context_cme_lambda,
            seed=self.seed,
            backend=self.backend,
            compute=Compute(device=self.device, dtype=self.dtype),
            solver=solver,
        )
