"""The item value function of Pref-SHAP (Prop. 3.2) over many coalitions at once.

For distinct duels ``(a, b)`` between query items and every proper coalition ``S``:

    GPM / C-GPM items:  v(S) = t(a, b) - t(b, a) + w (f_S(a) - f_S(b)),
                        t(a, b) = sum_j alpha_j G[cl_j, a] G[cr_j, b]
    UPM:                v(S) = f_S(a) - f_S(b),    f_S(x) = sum_j alpha_j (G[cl_j, x] - G[cr_j, x])

(``w``: the utility weight of the sum kernel; by linearity its value function is the
GPM's plus ``w`` times the UPM's, with the same coalition embeddings.)

with ``G = Gamma_S(centres, queries)`` from :mod:`cme` (C-GPM: the context-averaged
``alpha``). ``t(a, b) - t(b, a)`` is the bracket of METHOD.md written so that a duel
and its swap are the same numbers subtracted the other way round. Centres are
gathered, never re-evaluated: ``t(a, b) = sum_p G[p, a] R[p, b]`` over the distinct
centre items ``p`` with ``R[p] = sum_{j: cl_j = p} alpha_j G[cr_j]``.

The boundary coalitions (empty, full) are not evaluated here: they are fixed by
definition (0 and the model output) in :mod:`explainer`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.cme import (
    DEFAULT_CME_LAMBDA,
    CMESolver,
    CoalitionEmbedding,
    EngineStats,
    maybe_timed,
    sparse_csr,
    unique_rows,
)
from prefshap_core.explain.cme_select import CMEPlan
from prefshap_core.models.preference_function import PreferenceFunction

# Elements per temporary (duels x centres) in the per-duel contraction.
_CHUNK_ELEMENTS = 1 << 22
# The pairwise table T = G' R (q' x q') beats per-duel dot products when
# q'^2 is below this many times the number of duels (GEMM flops are much cheaper
# than gathered ones).
_TABLE_FACTOR = 16


def resolve_lambda(value: float | None, default: float) -> float:
    """A usable regulariser: the given one, else the default (also for NaN / <= 0)."""
    if value is None or not np.isfinite(value) or value <= 0:
        return default
    return float(value)


class ItemGame:
    """Values ``v(S)`` of item coalitions for duels between the given query rows."""

    def __init__(
        self,
        fn: PreferenceFunction,
        query_rows: np.ndarray,
        compute: Compute,
        cme_lambda: float | None = None,
        solver: CMESolver | None = None,
        stats: EngineStats | None = None,
        plan: CMEPlan | None = None,
    ) -> None:
        self.kind = fn.kind
        self.compute = compute
        self.stats = stats
        m = fn.n_centres
        centre_rows, centre_index = unique_rows(np.vstack([fn.centres_left, fn.centres_right]))
        left, right = centre_index[:m], centre_index[m:]
        alpha = fn.averaged_alpha(compute)  # the plain alpha unless C-GPM
        n_centre_rows = len(centre_rows)
        self._utility = None
        if self.kind == "upm" or fn.utility_weight != 0:
            weight = 1.0 if self.kind == "upm" else fn.utility_weight
            utility = torch.zeros(n_centre_rows, dtype=alpha.dtype, device=alpha.device)
            utility.index_add_(0, compute.index(left), weight * alpha)
            utility.index_add_(0, compute.index(right), -weight * alpha)
            self._utility = utility
        if self.kind != "upm":
            # Centres repeating the same (left, right) pair share one alpha.
            pairs, pair_index = np.unique(left * n_centre_rows + right, return_inverse=True)
            summed = torch.zeros(len(pairs), dtype=alpha.dtype, device=alpha.device)
            summed.index_add_(0, compute.index(pair_index.reshape(-1)), alpha)
            # A[p, p'] = sum of alpha_j over centres with (cl_j, cr_j) = (p, p')
            self._alpha_matrix = sparse_csr(
                compute,
                pairs // n_centre_rows,
                pairs % n_centre_rows,
                summed,
                (n_centre_rows, n_centre_rows),
            )
        # A CMEPlan (cme_select) swaps in CG or Nyström; without one, exact as before.
        make = CoalitionEmbedding if plan is None else plan.embedding
        self.embedding = make(
            pool=fn.items,
            pool_weights=None,
            centres=centre_rows,
            queries=query_rows,
            lengthscales=fn.lengthscales,
            column_player=fn.item_space.feature_group,
            cme_lambda=resolve_lambda(
                fn.cme_lambda if cme_lambda is None else cme_lambda, DEFAULT_CME_LAMBDA
            ),
            compute=compute,
            solver=solver,
            stats=stats,
        )

    def values(
        self,
        masks: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        batch: int = 1,
        on_batch: Callable[[float], None] | None = None,
        contraction: str = "auto",
    ) -> np.ndarray:
        """(K, D) float64 ``v(S)`` for masks (K, p) and duels given as query indices.

        ``contraction`` ("auto", "gather", "table") picks how ``t(a, b)`` is formed;
        both give the same numbers up to rounding.
        """
        masks = np.asarray(masks, dtype=bool)
        c = self.compute
        # Kept on the device until the end: one transfer, no sync per coalition.
        out = torch.empty((len(masks), len(left)), dtype=torch.float64, device=c.torch_device)
        for start in range(0, len(masks), batch):
            chunk = masks[start : start + batch]
            for k, (gamma, query_column) in enumerate(self.embedding.gammas(chunk)):
                a, b = c.index(query_column[left]), c.index(query_column[right])
                with maybe_timed(self.stats, "contraction"):
                    out[start + k] = self._duel_values(gamma, a, b, contraction)
                    if self._utility is not None and self.kind != "upm":
                        utility = self._utility @ gamma  # + w (f_S(a) - f_S(b))
                        out[start + k] += utility[a] - utility[b]
            if on_batch is not None:
                on_batch(min(1.0, (start + len(chunk)) / max(1, len(masks))))
        return out.cpu().numpy()

    def _duel_values(
        self, gamma: torch.Tensor, a: torch.Tensor, b: torch.Tensor, contraction: str
    ) -> torch.Tensor:
        if self.kind == "upm":
            utility = self._utility @ gamma  # f_S of every query class
            return utility[a] - utility[b]
        r = self._alpha_matrix @ gamma  # R[p] = sum_{j: cl_j = p} alpha_j Gamma[cr_j]
        n_classes = gamma.shape[1]
        use_table = contraction == "table" or (
            contraction == "auto" and n_classes * n_classes < _TABLE_FACTOR * len(a)
        )
        if use_table:
            table = gamma.T @ r  # t(x, y) for every pair of query classes
            return table[a, b] - table[b, a]
        gamma_t, r_t = gamma.T.contiguous(), r.T.contiguous()
        step = max(1, _CHUNK_ELEMENTS // max(1, gamma.shape[0]))
        parts = []
        for s in range(0, len(a), step):
            aa, bb = a[s : s + step], b[s : s + step]
            t_ab = (gamma_t[aa] * r_t[bb]).sum(1)
            t_ba = (gamma_t[bb] * r_t[aa]).sum(1)
            parts.append(t_ab - t_ba)
        if not parts:
            return torch.zeros(0, dtype=gamma.dtype, device=gamma.device)
        return torch.cat(parts)
