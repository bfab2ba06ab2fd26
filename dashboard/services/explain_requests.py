"""What a page asks the engine to explain: an explicit request, and its cache key.

Everything that decides the numbers is in the request (the model, the duels of the
dataset or inline rows, what is explained, the precision) and so in its key; where
the work runs (the executor) is in it too but not in the key, because it never
changes a number. Pages pass the precision (from their precision control) and the
executor (:func:`dashboard.services.cluster.cluster_executor`, read once per run).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from dashboard import state
from prefshap_core.cache import entry_key, explanation_key
from prefshap_core.explain import ENGINE_VERSION, Executor, ExplainOptions
from prefshap_core.workflow.selections import sample_duels

# Explanations of large subsets are capped (sampled, seeded) unless the user raises it.
DEFAULT_EXPLAIN_CAP = 1000


@dataclass(frozen=True, eq=False)
class InlineDuels:
    """Duels given by their rows instead of dataset indices (Head-to-head, what-if):
    item ids or model-space rows per side, and model-space contexts for ``"context"``."""

    left: np.ndarray
    right: np.ndarray
    contexts: np.ndarray | None = None

    def digest(self) -> str:
        """Of every byte, dtype and shape: an edit of one covariate is another duel."""
        h = hashlib.sha256()
        for part in (self.left, self.right, self.contexts):
            if part is not None:
                h.update(f"{part.dtype}:{part.shape}|".encode())
                h.update(np.ascontiguousarray(part).tobytes())
        return h.hexdigest()


@dataclass(frozen=True, eq=False)
class ExplainRequest:
    """One explanation: of a model on a dataset's ``duels`` or on ``inline`` rows.

    ``options`` holds what is explained, the precision and the executor; ``key`` is the
    cache key of the result (:class:`dashboard.services.explanation_cache.ExplanationCache`).
    """

    loaded: state.LoadedData
    model: state.TrainedModel
    options: ExplainOptions
    key: str
    duels: np.ndarray | None = None  # duel indices of the dataset (sorted), after capping
    inline: InlineDuels | None = None
    n_available: int = 1  # how many duels the subset had before capping

    @property
    def what(self) -> str:
        return self.options.what

    @property
    def sampled(self) -> bool:
        """Were the duels capped (a seeded sample of the subset)?"""
        return self.duels is not None and len(self.duels) < self.n_available

    @property
    def n_duels(self) -> int:
        return len(self.duels) if self.duels is not None else 1

    @property
    def owner(self) -> tuple[str, str, str] | None:
        """Which model explained what, so that one duel can be cut from any explanation
        of it (never from one with other options); None for inline duels."""
        if self.inline is not None:
            return None
        return (self.loaded.fingerprint, self.model.settings_fp, self.options.key())


def _options(
    what: str, precision: state.Precision, executor: Executor | None, uncertainty: bool = False
) -> ExplainOptions:
    return ExplainOptions(what=what, shapley=precision.shapley, executor=executor,  # type: ignore[arg-type]
                          uncertainty=uncertainty)  # fmt: skip


def request(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duels: np.ndarray,
    what: str = "items",
    *,
    precision: state.Precision,
    executor: Executor | None,
    cap: int | None = DEFAULT_EXPLAIN_CAP,
    seed: int = 0,
    uncertainty: bool = False,
) -> ExplainRequest:
    """Explain the dataset's ``duels``, capped to a seeded random sample of ``cap``
    (``uncertainty``: with the posterior sds, for a model that has a posterior)."""
    n_available = len(np.unique(duels))
    duels = sample_duels(duels, cap, seed)
    uncertainty = uncertainty and model.function.posterior_factor is not None
    options = _options(what, precision, executor, uncertainty)
    dtype = model.settings.dtype
    key = explanation_key(
        loaded.fingerprint, model.settings_fp, duels, options, dtype, cap_seed=seed
    )
    return ExplainRequest(loaded, model, options, key, duels=duels, n_available=n_available)


def inline_request(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    left: np.ndarray,
    right: np.ndarray,
    what: str = "items",
    *,
    precision: state.Precision,
    executor: Executor | None,
    contexts: np.ndarray | None = None,
) -> ExplainRequest:
    """Explain one duel given by its rows: item ids, or model-space rows (what-if edits)."""
    inline = InlineDuels(np.asarray(left), np.asarray(right), contexts)
    options = _options(what, precision, executor)
    dtype = model.settings.dtype
    key = entry_key(
        "inline-explanation", loaded.fingerprint, model.settings_fp, ENGINE_VERSION,
        options.key(), dtype, rows=inline.digest(),
    )  # fmt: skip
    return ExplainRequest(loaded, model, options, key, inline=inline)
