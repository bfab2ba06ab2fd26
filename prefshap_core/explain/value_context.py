"""The context value function of Pref-SHAP for C-GPM (Prop. 3.3), over many coalitions.

For a duel ``(u, x_l, x_r)`` and a coalition ``S'`` of context players:

    v(S') = sum_j alpha_j GammaU[cu_j, u] Xi_j,
    Xi_j = k_E((cl_j, cr_j), (x_l, x_r)) + w k_UPM((cl_j, cr_j), (x_l, x_r))

with ``GammaU = Gamma_S'(centre contexts, query contexts)`` from :mod:`cme`, solved
over the model's *unique* contexts weighted by their counts (exact; the regulariser
multiplies the total count ``m``). The centres are summed per distinct centre
context once per duel, ``Z[p, d] = sum_{j: cu_j = p} alpha_j Xi_j(d)``, so each
coalition costs one gather and one reduction per duel. ``Xi`` is antisymmetric in
``(x_l, x_r)``, hence so is ``v``. Boundary coalitions are fixed in :mod:`explainer`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.cme import (
    DEFAULT_CONTEXT_CME_LAMBDA,
    CMESolver,
    CoalitionEmbedding,
    EngineStats,
    maybe_timed,
    unique_rows,
)
from prefshap_core.explain.cme_select import CMEPlan
from prefshap_core.explain.value_items import resolve_lambda
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.models.preference_function import PreferenceFunction

_CHUNK_ELEMENTS = 1 << 22


class ContextGame:
    """Values ``v(S')`` of context coalitions for duels (item a, item b, context c)."""

    def __init__(
        self,
        fn: PreferenceFunction,
        query_items: np.ndarray,
        query_contexts: np.ndarray,
        compute: Compute,
        context_cme_lambda: float | None = None,
        solver: CMESolver | None = None,
        stats: EngineStats | None = None,
        plan: CMEPlan | None = None,
    ) -> None:
        if fn.kind != "cgpm":
            raise ValueError("context explanations need a C-GPM")
        assert fn.context_space is not None and fn.contexts is not None
        self.compute = compute
        self.stats = stats
        centre_contexts, centre_index = unique_rows(np.asarray(fn.centres_context))
        self._centre_context = compute.index(centre_index)
        self._n_centre_contexts = len(centre_contexts)
        self._alpha = compute.tensor(fn.alpha)
        self._utility_weight = float(fn.utility_weight)
        lengthscales = compute.tensor(fn.lengthscales)
        queries = compute.tensor(query_items)
        self._k_left = rbf_gram(compute.tensor(fn.centres_left), queries, lengthscales)
        self._k_right = rbf_gram(compute.tensor(fn.centres_right), queries, lengthscales)
        lam = fn.context_cme_lambda if context_cme_lambda is None else context_cme_lambda
        # A CMEPlan (cme_select) swaps in CG or Nyström; without one, exact as before.
        make = CoalitionEmbedding if plan is None else plan.embedding
        self.embedding = make(
            pool=fn.contexts,
            pool_weights=fn.context_weights,
            centres=centre_contexts,
            queries=query_contexts,
            lengthscales=fn.context_lengthscales,
            column_player=fn.context_space.feature_group,
            cme_lambda=resolve_lambda(lam, DEFAULT_CONTEXT_CME_LAMBDA),
            compute=compute,
            solver=solver,
            stats=stats,
        )

    def _centre_sums(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Z (distinct centre contexts, duels): alpha * Xi summed per centre context."""
        kl, kr = self._k_left, self._k_right
        xi = kl[:, a] * kr[:, b] - kl[:, b] * kr[:, a]  # (M, D)
        if self._utility_weight != 0:  # + w [(kl - kr)[a] - (kl - kr)[b]], antisymmetric too
            xi = xi + self._utility_weight * ((kl[:, a] - kr[:, a]) - (kl[:, b] - kr[:, b]))
        z = torch.zeros((self._n_centre_contexts, len(a)), dtype=xi.dtype, device=xi.device)
        return z.index_add_(0, self._centre_context, self._alpha[:, None] * xi)

    def values(
        self,
        masks: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context: np.ndarray,
        batch: int = 8,
        on_batch: Callable[[float], None] | None = None,
    ) -> np.ndarray:
        """(K, D) float64 ``v(S')``; duels as indices into query items and query contexts."""
        masks = np.asarray(masks, dtype=bool)
        gammas: list[tuple[torch.Tensor, np.ndarray]] = []
        for start in range(0, len(masks), batch):
            gammas.extend(self.embedding.gammas(masks[start : start + batch]))
            if on_batch is not None:
                on_batch(0.9 * min(1.0, (start + batch) / max(1, len(masks))))
        c = self.compute
        out = torch.empty((len(masks), len(left)), dtype=torch.float64, device=c.torch_device)
        step = max(1, _CHUNK_ELEMENTS // max(1, self._k_left.shape[0]))
        for s in range(0, len(left), step):
            a, b = c.index(left[s : s + step]), c.index(right[s : s + step])
            ctx = context[s : s + step]
            with maybe_timed(self.stats, "contraction"):
                z = self._centre_sums(a, b)
                for k, (gamma, query_column) in enumerate(gammas):
                    v = (gamma[:, c.index(query_column[ctx])] * z).sum(0)
                    out[k, s : s + step] = v
        if on_batch is not None:
            on_batch(1.0)
        return out.cpu().numpy()
