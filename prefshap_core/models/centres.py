"""A game's centres over their distinct rows, with the pool it embeds them over.

Every Pref-SHAP value function (docs/method.md, "Value functions") embeds the model's
centres by a conditional mean embedding over a pool and sums the centres' ``alpha``
per distinct centre row: the item and side games over the distinct items of the
centres' (left, right) pairs and the item pool, the context game over the distinct
centre contexts and the observed contexts (weighted by their counts).
:meth:`PreferenceFunction.item_centres` and :meth:`PreferenceFunction.context_centres`
build this set-up once; a game turns it into its CME problem and contractions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute


@dataclass(frozen=True, eq=False)
class GameCentres:
    """The distinct centre rows of a game, which row each centre uses, and the pool."""

    rows: np.ndarray  # (t, d) distinct centre rows
    index: np.ndarray  # (k, M) row of each centre's k-th row (items: 0 left, 1 right)
    pool: np.ndarray  # (n, d) the rows the CME is fitted on
    pool_weights: np.ndarray | None  # (n,) their multiplicities, None = all 1
    lengthscales: np.ndarray  # (d,)
    column_player: np.ndarray  # (d,) player (feature group) of each column

    def utility(self, alpha: torch.Tensor, weight: float, compute: Compute) -> torch.Tensor:
        """(t,) ``weight * (sum of alpha_j over centres with left row p, minus over those
        with right row p)``: the utility ``f = sum_j alpha_j [k(cl_j, .) - k(cr_j, .)]``
        as coefficients of the distinct rows' kernels (item games)."""
        left, right = self.index
        utility = torch.zeros(len(self.rows), dtype=alpha.dtype, device=alpha.device)
        utility.index_add_(0, compute.index(left), weight * alpha)
        utility.index_add_(0, compute.index(right), -weight * alpha)
        return utility
