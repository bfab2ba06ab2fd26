"""The side-aware value function: each side's feature groups are separate players.

With ``p`` item groups there are ``2p`` players, left's groups (``left:<group>``,
bits ``0 .. p-1`` of a coalition) then right's (``right:<group>``, bits ``p .. 2p-1``).
Under the paper's product reference distribution a coalition ``(S_l, S_r)`` is worth
(docs/method.md, "Side-aware players")

    v(S_l, S_r) = sum_j alpha_j ( G_l(cl_j, x_l) G_r(cr_j, x_r) - G_r(cl_j, x_r) G_l(cr_j, x_l)
                  + c [G_l(cl_j, x_l) - G_l(cr_j, x_l) - G_r(cl_j, x_r) + G_r(cr_j, x_r)] )

with ``G_l = G_{S_l}``, ``G_r = G_{S_r}`` the coalition embeddings of the item game
(C-GPM: the context-averaged alpha), ``c`` the model's utility weight, and for UPM no
product term and ``c = 1``. Over the distinct centre rows (``A[p, p']``: the alpha of
centres ``(p, p')``) this is ``L_a' (A - A') R_b + c (u' L_a - u' R_b)`` with
``L_a = G_{S_l}(centres, x_l)``, ``R_b = G_{S_r}(centres, x_r)`` and ``u = A 1 - A' 1``.
On the diagonal ``S_l = S_r`` it is Prop. 3.2, the item game's value.

The two boundary embeddings are exact by definition: ``G_all(C, x) = K(C, x)`` and
``G_empty(C, x) = (1/n) sum_i k(C, X_i)`` (the same for every x). (The item game
never embeds its boundary coalitions: it fixes ``v(empty) = 0`` and ``v(full) = g``;
here the mixed coalitions ``(all, S)`` and ``(empty, S)`` need them.) ``v(empty,
empty) = 0`` and ``v(all, all) = g`` are fixed like the other games' boundaries.

Each distinct side coalition is embedded once per batch of duels (exact runs: the
``2^p`` embeddings, no new CME solves; sampled runs: one per distinct ``S_l`` or
``S_r`` drawn), then contracted over the ``(S_l, S_r)`` pairs asked for.
"""

from __future__ import annotations

import numpy as np
import torch

from prefshap_core import budget
from prefshap_core.compute import Compute
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.cme.backends import CMEBackend
from prefshap_core.explain.cme.base import EngineStats, maybe_timed, sparse_csr
from prefshap_core.explain.games.base import DuelBatch, OnBatch
from prefshap_core.explain.games.items import ItemGame
from prefshap_core.explain.player_data import player_differences
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import checkpoint

SIDES = ("left", "right")
# Per-side embeddings gathered at the duels, held at once (elements, both sides).
_MAX_GATHERED_ELEMENTS = 1 << 25
# Pairs are contracted as a full (S_l x S_r) grid by batched GEMM when the grid is at
# most this many times the number of pairs asked for (exact runs, and sampled ones with
# few distinct side coalitions), else pair by pair: a gathered product per pair costs
# about as much as 30-40 GEMM entries (measured on CPU, 800 centres).
_GRID_FACTOR = 32
_PAIR_CHUNK_ELEMENTS = 1 << 24


def side_player_names(group_names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``left:<group>`` for every group, then ``right:<group>``."""
    return tuple(f"{side}:{g}" for side in SIDES for g in group_names)


def side_space(space: FeatureSpace) -> FeatureSpace:
    """The 2p players as groups of the joined row ``[x_l, x_r]`` (left's columns first)."""
    p = space.n_groups
    return FeatureSpace(
        feature_names=tuple(f"{side}:{f}" for side in SIDES for f in space.feature_names),
        group_names=side_player_names(space.group_names),
        feature_group=np.concatenate([space.feature_group, space.feature_group + p]),
        offset=np.concatenate([space.offset, space.offset]),
        scale=np.concatenate([space.scale, space.scale]),
    )


def side_swap(n_groups: int) -> np.ndarray:
    """The player permutation of a side swap: ``left:<g>`` <-> ``right:<g>``."""
    return np.concatenate([np.arange(n_groups, 2 * n_groups), np.arange(n_groups)])


def side_player_data(
    space: FeatureSpace, x_left: np.ndarray, x_right: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' players show the duel's difference ``x_left - x_right`` and its label.

    So a view that swaps a duel's sides negates the data and exchanges the two
    columns of a group, exactly as it does the values.
    """
    data, labels = player_differences(space, x_left, x_right)
    return np.hstack([data, data]), np.hstack([labels, labels])


def utility_weight(fn: PreferenceFunction) -> float:
    """``c`` of the value function: 1 for UPM, the model's utility weight otherwise."""
    if fn.kind == "upm":
        return 1.0
    return float(getattr(fn, "utility_weight", 0.0) or 0.0)


class SidesGame:
    """Values ``v(S_l, S_r)`` of side-aware coalitions (2p players) for duels."""

    what = "sides"

    def __init__(
        self,
        fn: PreferenceFunction,
        compute: Compute,
        cme_lambda: float,
        stats: EngineStats | None = None,
    ) -> None:
        self.fn = fn
        self.compute = compute
        self.stats = stats
        # The item game's CME problem: on the diagonal the two games share embeddings.
        self.items = ItemGame(fn, compute, cme_lambda, stats)
        self.problem = self.items.problem
        self.n_groups = fn.item_space.n_groups
        self.space = side_space(fn.item_space)
        self.side_swap = side_swap(self.n_groups)
        self.c = utility_weight(fn)
        self.centres, alpha = self.items.centres, self.items.alpha  # set up once, there
        left, right = self.centres.index
        n_rows = len(self.centres.rows)
        self._product = fn.kind != "upm"
        if self._product:
            # B = A - A': the product term is L_a' B R_b.
            self._b = sparse_csr(
                compute,
                np.concatenate([left, right]),
                np.concatenate([right, left]),
                torch.cat([alpha, -alpha]),
                (n_rows, n_rows),
            )
        self._u = self.centres.utility(alpha, 1.0, compute)  # times c in the contraction
        pool_kernel = rbf_gram(
            compute.tensor(self.centres.rows),
            compute.tensor(self.centres.pool),
            compute.tensor(fn.lengthscales),
        )
        self._mean_embedding = pool_kernel.mean(1)  # G_empty(C, .): (n_rows,)

    def use(self, backend: CMEBackend) -> None:
        self.items.use(backend)

    def n_embeddings(self, n_coalitions: int) -> int:
        """Side coalitions embedded for ``n_coalitions`` coalitions of the 2p players (what
        the CME backend solves): two per coalition at most, and at most the 2^p there are."""
        return min(2**self.n_groups, 2 * int(n_coalitions))

    def boundary(self, batch: DuelBatch) -> tuple[np.ndarray, np.ndarray]:
        """``v(empty, empty) = 0`` and ``v(all, all) = g`` (C-GPM: context-averaged)."""
        return self.items.boundary(batch)

    def bind(self, batch: DuelBatch) -> _BoundSidesGame:
        if self.items.embedding is None:
            raise RuntimeError("SidesGame.use(backend) must come before bind()")
        return _BoundSidesGame(self, batch)


class _BoundSidesGame:
    def __init__(self, game: SidesGame, batch: DuelBatch) -> None:
        assert game.items.embedding is not None
        c = game.compute
        self.game, self.batch = game, batch
        self.on_embedded: OnBatch | None = None  # progress of the embeddings (values() sets it)
        self.universe = game.items.embedding.bind(batch.items)
        # G_all(C, x) = K(C, x) for the batch's query rows.
        self._full = rbf_gram(
            c.tensor(game.centres.rows), c.tensor(batch.items), c.tensor(game.fn.lengthscales)
        )

    def _embeddings(
        self, side_masks: np.ndarray, coalition_batch: int
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Per side mask: Gamma (n_rows, columns) and each query's column; boundaries by
        definition. ``self.on_embedded(f)``, if set: the share done, after each batch."""
        game = self.game
        p, n_queries = game.n_groups, len(self.batch.items)
        sizes = side_masks.sum(1)
        out: list[tuple[torch.Tensor, np.ndarray] | None] = [None] * len(side_masks)
        for k in np.flatnonzero(sizes == 0):
            out[k] = (game._mean_embedding[:, None], np.zeros(n_queries, dtype=np.int64))
        for k in np.flatnonzero(sizes == p):
            out[k] = (self._full, np.arange(n_queries))
        proper = np.flatnonzero((sizes > 0) & (sizes < p))
        embedding = game.items.embedding
        assert embedding is not None
        for s in range(0, len(proper), max(1, coalition_batch)):
            checkpoint()  # a cancel stops between batches of CME solves
            rows = proper[s : s + max(1, coalition_batch)]
            for k, found in zip(
                rows, embedding.gammas(side_masks[rows], self.universe), strict=True
            ):
                out[k] = found
            if self.on_embedded is not None:
                self.on_embedded((s + len(rows)) / len(proper))
        return [e for e in out if e is not None]

    def values(
        self, masks: np.ndarray, coalition_batch: int = 1, on_batch: OnBatch | None = None
    ) -> np.ndarray:
        """(K, D) float64 ``v(S_l, S_r)`` for masks (K, 2p): left's groups, then right's."""
        game, c = self.game, self.game.compute
        p = game.n_groups
        masks = np.asarray(masks, dtype=bool)
        codes, inverse = np.unique(
            np.vstack([masks[:, :p], masks[:, p:]]), axis=0, return_inverse=True
        )
        inverse = inverse.reshape(-1)
        left_code, right_code = inverse[: len(masks)], inverse[len(masks) :]
        n_duels = self.batch.n_duels
        budget.check(  # the embeddings are held together: refused before they are made
            budget.side_values_bytes(
                len(codes), len(game.centres.rows), len(self.batch.items), len(masks), n_duels
            ),
            f"Side-aware values of {n_duels:,} duels",
            budget.EXPLAIN_REDUCE,
        )
        self.on_embedded = None if on_batch is None else (lambda f: on_batch(0.5 * f))
        embeddings = self._embeddings(codes, coalition_batch)
        if on_batch is not None:
            on_batch(0.5)
        out = torch.empty((len(masks), n_duels), dtype=torch.float64, device=c.torch_device)
        n_rows = len(game.centres.rows)
        # Duels per contraction: the gathered embeddings and the grid stay bounded.
        per_duel = max(2 * len(codes) * n_rows, len(codes) ** 2, 1)
        step = max(1, _MAX_GATHERED_ELEMENTS // per_duel)
        for s in range(0, n_duels, step):
            checkpoint()
            duels = slice(s, min(s + step, n_duels))
            with maybe_timed(game.stats, "contraction"):
                out[:, duels] = self._contract(embeddings, left_code, right_code, duels)
            if on_batch is not None:
                on_batch(0.5 + 0.5 * min(1.0, (s + step) / max(1, n_duels)))
        return out.cpu().numpy()

    def _contract(
        self,
        embeddings: list[tuple[torch.Tensor, np.ndarray]],
        left_code: np.ndarray,
        right_code: np.ndarray,
        duels: slice,
    ) -> torch.Tensor:
        """(K, duels) values of the pairs ``(left_code[k], right_code[k])``."""
        game, c = self.game, self.game.compute
        a, b = self.batch.left[duels], self.batch.right[duels]
        # L[code] = G(centres, x_l), R[code] = G(centres, x_r): (codes, n_rows, duels)
        left = torch.stack([g[:, c.index(col[a])] for g, col in embeddings])
        right = torch.stack([g[:, c.index(col[b])] for g, col in embeddings])
        lc, rc = c.index(left_code), c.index(right_code)
        u = game._u[None, :, None]
        values = game.c * ((u * left).sum(1)[lc] - (u * right).sum(1)[rc])  # (K, duels)
        if not game._product:
            return values
        # Only the codes each side uses: B R_b for the right ones, (rows, codes * duels).
        used_left, li = np.unique(left_code, return_inverse=True)
        used_right, ri = np.unique(right_code, return_inverse=True)
        li, ri = c.index(li.reshape(-1)), c.index(ri.reshape(-1))
        rights = right[c.index(used_right)]
        n_codes, n_rows, n_duels = rights.shape
        b_right = (game._b @ rights.permute(1, 0, 2).reshape(n_rows, -1)).reshape(
            n_rows, n_codes, n_duels
        )
        b_right = b_right.permute(1, 0, 2)  # (right codes, n_rows, duels)
        lefts = left[c.index(used_left)]
        if len(used_left) * len(used_right) <= _GRID_FACTOR * len(left_code):
            # grid[d, l, r] = L_l(d)' B R_r(d) by one batched GEMM over the duels
            grid = torch.bmm(lefts.permute(2, 0, 1), b_right.permute(2, 1, 0))
            return values + grid[:, li, ri].T
        step = max(1, _PAIR_CHUNK_ELEMENTS // max(1, n_rows * n_duels))
        for s in range(0, len(li), step):
            rows = slice(s, s + step)
            values[rows] += (lefts[li[rows]] * b_right[ri[rows]]).sum(1)
        return values
