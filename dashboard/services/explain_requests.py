"""What a page asks the engine to explain: the duels (capped), the precision, the key."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dashboard import state
from dashboard.services.explainers import cluster_executor
from prefshap_core.cache import explanation_key
from prefshap_core.explain import ExplainOptions
from prefshap_core.workflow.selections import sample_duels

# Explanations of large subsets are capped (sampled, seeded) unless the user raises it.
DEFAULT_EXPLAIN_CAP = 1000


@dataclass(frozen=True)
class Precision:
    """How coalitions are chosen: the engine's default (exact up to its player limit,
    sampled beyond), always exact, or ``n_samples`` sampled coalitions."""

    mode: str = "auto"  # "auto" | "exact" | "sampled"
    n_samples: int = 512

    def options(self, what: str) -> ExplainOptions:
        """The engine's options for explaining ``what`` ("items" | "context") so."""
        if self.mode == "exact":
            return ExplainOptions(what=what, max_exact_players=10**9)  # type: ignore[arg-type]
        if self.mode == "sampled":
            return ExplainOptions(what=what, max_exact_players=0, n_samples=int(self.n_samples))  # type: ignore[arg-type]
        return ExplainOptions(what=what)  # type: ignore[arg-type]


def session_precision() -> Precision:
    """The session's choice (the precision control on the explaining pages)."""
    mode, n_samples = state.precision()
    return Precision(mode, n_samples)


@dataclass(frozen=True, eq=False)
class ExplainRequest:
    """Which duels to explain, after capping: what a page asks the engine for."""

    options: ExplainOptions  # what is explained and how
    duels: np.ndarray  # duel indices of the dataset (sorted)
    n_available: int  # how many the subset had before capping
    key: str

    @property
    def what(self) -> str:
        return self.options.what

    @property
    def sampled(self) -> bool:
        return len(self.duels) < self.n_available


def request(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duels: np.ndarray,
    what: str = "items",
    *,
    cap: int | None = DEFAULT_EXPLAIN_CAP,
    seed: int = 0,
    precision: Precision | None = None,
) -> ExplainRequest:
    """Cap ``duels`` to a seeded random sample of ``cap`` and key the explanation.

    ``precision``: default the session's choice (:func:`session_precision`)."""
    n_available = len(np.unique(duels))
    duels = sample_duels(duels, cap, seed)
    options = replace((precision or session_precision()).options(what), executor=cluster_executor())
    dtype = model.result.settings.dtype
    key = explanation_key(
        loaded.fingerprint, model.settings_fp, duels, options, dtype, cap_seed=seed
    )
    return ExplainRequest(options, duels, n_available, key)
