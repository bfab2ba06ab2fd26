"""The item value function of Pref-SHAP (Prop. 3.2) over many coalitions at once.

For distinct duels ``(a, b)`` between query items and every proper coalition ``S``:

    GPM / C-GPM items:  v(S) = t(a, b) - t(b, a) + w (f_S(a) - f_S(b)),
                        t(a, b) = sum_j alpha_j G[cl_j, a] G[cr_j, b]
    UPM:                v(S) = f_S(a) - f_S(b),    f_S(x) = sum_j alpha_j (G[cl_j, x] - G[cr_j, x])

(``w``: the utility weight of the sum kernel; by linearity its value function is the
GPM's plus ``w`` times the UPM's, with the same coalition embeddings.)

with ``G = Gamma_S(centres, queries)`` from :mod:`cme` (C-GPM: the context-averaged
``alpha``). Centres are gathered, never re-evaluated, and the bracket of
docs/method.md is one bilinear form: ``t(a, b) - t(b, a) = G[:, a]' B G[:, b]`` with
``B = A - A'`` antisymmetric, ``A[p, p']`` the summed ``alpha`` of the centres on the
pair of centre items ``(p, p')``. So one sparse product ``R = B G`` and one dot per duel
(the two brackets ``t(a, b)``, ``t(b, a)`` took two products and two dots). A duel is
always evaluated as ``(min, max)`` of its query columns and signed: a duel and its swap
are the same float negated, and a duel within one class is exactly 0.

The boundary coalitions (empty, full) are not evaluated here: they are fixed by
definition (0 and the model output, :meth:`ItemGame.boundary`).
"""

from __future__ import annotations

import numpy as np
import torch

from prefshap_core.compute import Compute, transposed
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.cme.backends import CMEBackend, Embedding, make_backend
from prefshap_core.explain.cme.base import (
    CMEProblem,
    EngineStats,
    maybe_timed,
    sparse_csr,
)
from prefshap_core.explain.games.base import DuelBatch, OnBatch
from prefshap_core.explain.options import CholeskyOptions
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import checkpoint

# Elements per temporary (duels x centre rows) in the per-duel contraction: 1 MB, so
# a block's two gathers stay in cache for its product and sum (Pokémon: 1.5x faster
# than 32 MB blocks; each duel's dot product is the same float either way), but at
# least _MIN_CHUNK_ROWS duels, so many centre rows never mean a loop of tiny blocks.
_CHUNK_ELEMENTS = 1 << 17
_MIN_CHUNK_ROWS = 64
# The pairwise table T = G' R (q' x q') beats per-duel dot products when
# q'^2 is below this many times the number of duels (GEMM flops are much cheaper
# than gathered ones).
_TABLE_FACTOR = 16


class ItemGame:
    """Values ``v(S)`` of item coalitions for duels between query item rows."""

    what = "items"
    contraction = "auto"  # "auto" | "gather" | "table": the same numbers; tests force each

    def __init__(
        self,
        fn: PreferenceFunction,
        compute: Compute,
        cme_lambda: float,
        stats: EngineStats | None = None,
    ) -> None:
        self.fn = fn
        self.kind = fn.kind
        self.compute = compute
        self.stats = stats
        # The side game starts from this set-up too (its diagonal is this game).
        self.centres = fn.item_centres()
        self.alpha = fn.averaged_alpha(compute)  # the plain alpha unless C-GPM
        left, right = self.centres.index
        alpha, n_centre_rows = self.alpha, len(self.centres.rows)
        self._utility = None
        if self.kind == "upm" or fn.utility_weight != 0:
            weight = 1.0 if self.kind == "upm" else fn.utility_weight
            self._utility = self.centres.utility(alpha, weight, compute)
        if self.kind != "upm":
            # B = A - A' (A[p, p']: the summed alpha of the centres on (p, p')); building
            # the sparse matrix sums the centres that share a pair.
            self._antisymmetric_alpha = sparse_csr(
                compute,
                np.concatenate([left, right]),
                np.concatenate([right, left]),
                torch.cat([alpha, -alpha]),
                (n_centre_rows, n_centre_rows),
            )
        self.problem = CMEProblem.of(self.centres, cme_lambda)
        self.embedding: Embedding | None = None

    @property
    def space(self) -> FeatureSpace:
        return self.fn.item_space

    def use(self, backend: CMEBackend) -> None:
        self.embedding = backend.embedding(self.problem, self.compute, self.stats)

    def boundary(self, batch: DuelBatch) -> tuple[np.ndarray, np.ndarray]:
        """``v(empty) = 0`` and ``v(full) = g`` (C-GPM: context-averaged) per duel."""
        full = self.fn.decision_on_pool(
            batch.items, batch.left, batch.right, None, None, self.compute
        )
        return np.zeros(batch.n_duels), full

    def bind(self, batch: DuelBatch) -> _BoundItemGame:
        if self.embedding is None:
            raise RuntimeError("ItemGame.use(backend) must come before bind()")
        return _BoundItemGame(self, self.embedding.bind(batch.items), batch)

    def _duel_values(
        self, gamma: torch.Tensor, a: torch.Tensor, b: torch.Tensor, contraction: str
    ) -> torch.Tensor:
        if self.kind == "upm":
            utility = self._utility @ gamma  # f_S of every query class
            return utility[a] - utility[b]
        # Each duel as (lo, hi) of its query columns, signed: see the module docstring.
        lo, hi = torch.minimum(a, b), torch.maximum(a, b)
        sign = torch.sign(b - a).to(gamma.dtype)
        r = self._antisymmetric_alpha @ gamma  # R = B G
        n_classes = gamma.shape[1]
        use_table = contraction == "table" or (
            contraction == "auto" and n_classes * n_classes < _TABLE_FACTOR * len(a)
        )
        if use_table:
            table = gamma.T @ r  # the bracket for every pair of query classes
            return sign * table[lo, hi]
        gamma_t, r_t = transposed(gamma), transposed(r)
        step = max(_MIN_CHUNK_ROWS, _CHUNK_ELEMENTS // max(1, gamma.shape[0]))
        out = torch.empty(len(a), dtype=gamma.dtype, device=gamma.device)
        for s in range(0, len(a), step):
            # Row gathers by index_select: ~20 % faster on the CPU than indexing.
            rows = gamma_t.index_select(0, lo[s : s + step])
            rows.mul_(r_t.index_select(0, hi[s : s + step]))
            out[s : s + step] = rows.sum(1)
        return out.mul_(sign)


class _BoundItemGame:
    def __init__(self, game: ItemGame, universe: object, batch: DuelBatch) -> None:
        self.game, self.universe = game, universe
        self.left, self.right = batch.left, batch.right

    def values(
        self, masks: np.ndarray, coalition_batch: int = 1, on_batch: OnBatch | None = None
    ) -> np.ndarray:
        """(K, D) float64 ``v(S)`` for masks (K, p)."""
        game = self.game
        assert game.embedding is not None
        masks = np.asarray(masks, dtype=bool)
        c = game.compute
        # Kept on the device until the end: one transfer, no sync per coalition.
        out = torch.empty((len(masks), len(self.left)), dtype=torch.float64, device=c.torch_device)
        for start in range(0, len(masks), coalition_batch):
            checkpoint()  # a cancel stops between coalition batches
            chunk = masks[start : start + coalition_batch]
            for k, (gamma, query_column) in enumerate(game.embedding.gammas(chunk, self.universe)):
                a, b = c.index(query_column[self.left]), c.index(query_column[self.right])
                with maybe_timed(game.stats, "contraction"):
                    out[start + k] = game._duel_values(gamma, a, b, game.contraction)
                    if game._utility is not None and game.kind != "upm":
                        utility = game._utility @ gamma  # + w (f_S(a) - f_S(b))
                        out[start + k] += utility[a] - utility[b]
            if on_batch is not None:
                on_batch(min(1.0, (start + len(chunk)) / max(1, len(masks))))
        return out.cpu().numpy()


def item_coalition_values(
    fn: PreferenceFunction,
    masks: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    compute: Compute | None = None,
) -> np.ndarray:
    """(K, D) ``v(S)`` of proper coalitions ``masks`` for duels of pool rows, exact Cholesky.

    The game alone, for tests and benchmarks that build their own Shapley estimates.
    """

    compute = compute or Compute()
    game = ItemGame(fn, compute, fn.cme_lambda)
    game.use(make_backend(CholeskyOptions(), game.problem, len(fn.items), len(masks), compute, 0))
    batch = DuelBatch(np.asarray(fn.items), np.asarray(left), np.asarray(right))
    return game.bind(batch).values(np.asarray(masks, dtype=bool), coalition_batch=1)
