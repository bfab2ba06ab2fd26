"""The context value function of Pref-SHAP for C-GPM (Prop. 3.3), over many coalitions.

For a duel ``(u, x_l, x_r)`` and a coalition ``S'`` of context players:

    v(S') = sum_j alpha_j GammaU[cu_j, u] Xi_j,
    Xi_j = k_E((cl_j, cr_j), (x_l, x_r)) + w k_UPM((cl_j, cr_j), (x_l, x_r))

with ``GammaU = Gamma_S'(centre contexts, query contexts)`` from :mod:`cme`, solved
over the model's *unique* contexts weighted by their counts (exact; the regulariser
multiplies the total count ``m``). The centres are summed per distinct centre
context once per duel, ``Z[p, d] = sum_{j: cu_j = p} alpha_j Xi_j(d)``, so each
coalition costs one gather and one reduction per duel. ``Xi`` is antisymmetric in
``(x_l, x_r)``, hence so is ``v``. The boundary coalitions are fixed by definition:
``v(empty) = g_bar`` (the context-averaged model) and ``v(full) = g(u, x_l, x_r)``.
"""

from __future__ import annotations

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.cme.backends import CMEBackend, Embedding
from prefshap_core.explain.cme.base import CMEProblem, EngineStats, maybe_timed
from prefshap_core.explain.games.base import DuelBatch, OnBatch
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import checkpoint

_CHUNK_ELEMENTS = 1 << 22


class ContextGame:
    """Values ``v(S')`` of context coalitions for duels (item a, item b, context c)."""

    what = "context"

    def __init__(
        self,
        fn: PreferenceFunction,
        compute: Compute,
        cme_lambda: float,
        stats: EngineStats | None = None,
    ) -> None:
        if fn.kind != "cgpm" or fn.context_space is None or fn.contexts is None:
            raise ValueError(f"context explanations need a C-GPM, not a {fn.kind!r} model")
        self.fn = fn
        self.compute = compute
        self.stats = stats
        centres = fn.context_centres()
        self._centre_context = compute.index(centres.index[0])
        self._n_centre_contexts = len(centres.rows)
        self._alpha = compute.tensor(fn.alpha)
        self._utility_weight = float(fn.utility_weight)
        self.problem = CMEProblem.of(centres, cme_lambda)
        self.embedding: Embedding | None = None

    @property
    def space(self) -> FeatureSpace:
        assert self.fn.context_space is not None
        return self.fn.context_space

    def use(self, backend: CMEBackend) -> None:
        self.embedding = backend.embedding(self.problem, self.compute, self.stats)

    def boundary(self, batch: DuelBatch) -> tuple[np.ndarray, np.ndarray]:
        """``v(empty) = g_bar(x_l, x_r)`` and ``v(full) = g(u, x_l, x_r)`` per duel."""
        fn, c = self.fn, self.compute
        empty = fn.decision_on_pool(batch.items, batch.left, batch.right, None, None, c)
        full = fn.decision_on_pool(
            batch.items, batch.left, batch.right, batch.contexts, batch.context, c
        )
        return empty, full

    def bind(self, batch: DuelBatch) -> _BoundContextGame:
        if self.embedding is None:
            raise RuntimeError("ContextGame.use(backend) must come before bind()")
        if batch.contexts is None or batch.context is None:
            raise ValueError("context explanations need one context per duel")
        return _BoundContextGame(self, batch)


class _BoundContextGame:
    def __init__(self, game: ContextGame, batch: DuelBatch) -> None:
        fn, c = game.fn, game.compute
        assert game.embedding is not None and batch.context is not None
        self.game, self.batch = game, batch
        self.universe = game.embedding.bind(np.asarray(batch.contexts))
        lengthscales = c.tensor(fn.lengthscales)
        queries = c.tensor(batch.items)
        self._k_left = rbf_gram(c.tensor(fn.centres_left), queries, lengthscales)
        self._k_right = rbf_gram(c.tensor(fn.centres_right), queries, lengthscales)

    def _centre_sums(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Z (distinct centre contexts, duels): alpha * Xi summed per centre context."""
        game = self.game
        kl, kr = self._k_left, self._k_right
        xi = kl[:, a] * kr[:, b] - kl[:, b] * kr[:, a]  # (M, D)
        if game._utility_weight != 0:  # + w [(kl - kr)[a] - (kl - kr)[b]], antisymmetric too
            w = game._utility_weight
            xi = xi + w * ((kl[:, a] - kr[:, a]) - (kl[:, b] - kr[:, b]))
        z = torch.zeros((game._n_centre_contexts, len(a)), dtype=xi.dtype, device=xi.device)
        return z.index_add_(0, game._centre_context, game._alpha[:, None] * xi)

    def values(
        self, masks: np.ndarray, coalition_batch: int = 8, on_batch: OnBatch | None = None
    ) -> np.ndarray:
        """(K, D) float64 ``v(S')`` for masks (K, p) over the context players."""
        game, batch = self.game, self.batch
        assert game.embedding is not None and batch.context is not None
        masks = np.asarray(masks, dtype=bool)
        gammas = []
        for start in range(0, len(masks), coalition_batch):
            checkpoint()  # a cancel stops between coalition batches
            chunk = masks[start : start + coalition_batch]
            gammas.extend(game.embedding.gammas(chunk, self.universe))
            if on_batch is not None:
                on_batch(0.9 * min(1.0, (start + len(chunk)) / max(1, len(masks))))
        c = game.compute
        left, right, context = batch.left, batch.right, batch.context
        out = torch.empty((len(masks), len(left)), dtype=torch.float64, device=c.torch_device)
        step = max(1, _CHUNK_ELEMENTS // max(1, self._k_left.shape[0]))
        for s in range(0, len(left), step):
            a, b = c.index(left[s : s + step]), c.index(right[s : s + step])
            ctx = context[s : s + step]
            with maybe_timed(game.stats, "contraction"):
                z = self._centre_sums(a, b)
                for k, (gamma, query_column) in enumerate(gammas):
                    out[k, s : s + step] = (gamma[:, c.index(query_column[ctx])] * z).sum(0)
        if on_batch is not None:
            on_batch(1.0)
        return out.cpu().numpy()
