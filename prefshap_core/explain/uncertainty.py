"""Posterior standard deviations of exact Pref-SHAP values (docs/method.md, "Uncertainty").

Every coalition value is linear in the coefficients: ``v_S(d) = beta_S(d) @ alpha``
with ``beta_S(d)`` (M,) each centre's bracket under the coalition's embeddings, and
so is every exact Shapley value: ``phi_i(d) = Phi_i(d) @ alpha`` with
``Phi_i(d) = sum_S A[i, S] beta_S(d)`` (``A``: :func:`exact_shapley_matrix`). Under
the posterior ``alpha ~ N(alpha_hat, F F^T)``

    sd(phi_i(d)) = || Phi_i(d) @ F ||,   sd(g(d)) = || b(d) @ F ||,

exactly, with ``b`` the model's centre brackets (the full coalition). The
embeddings ``Gamma_S`` are the game's own (its CME backend), so ``Phi`` is built
from the same numbers as the values; ``Phi`` is accumulated for groups of duels
(p x M x duels at most ``_MAX_PHI_ELEMENTS``), coalitions in batches by one GEMM.

Brackets are laid out centre-major, ``(coalitions, M, duels)``: the item game's
come from column gathers of its small ``Gamma`` at the duels' classes followed by
row gathers at the centres, with no transposing pass (2x faster on Pokémon than
duel-major tables, and the side and context games build them that way round).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute, transposed
from prefshap_core.explain.games.base import DuelBatch
from prefshap_core.explain.shapley.coalitions import bits_from_masks, masks_from_bits
from prefshap_core.explain.shapley.exact import exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import SampledCoalitions
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.kernels.rows import unique_rows
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import checkpoint

MAX_PHI_ELEMENTS = 1 << 25  # (p, M, duels) float64 held at once: 256 MB
_MAX_BRACKET_ELEMENTS = 1 << 24  # (coalitions, M, duels) brackets per GEMM: 128 MB
_BRACKET_BLOCK_ELEMENTS = 1 << 16  # (centres, duels) gathered per block: 512 kB, in cache
_MIN_BRACKET_BLOCK_ROWS = 16  # but never tiny blocks (many duels)


@dataclass(frozen=True)
class ValueSD:
    values: np.ndarray  # (D, p) sd of each Shapley value
    outputs: np.ndarray  # (D,) sd of v(full), the model output
    base_values: np.ndarray  # (D,) sd of v(empty) (0 for items)


def exact_value_sd(
    game,
    batch: DuelBatch,
    masks: np.ndarray,
    compute: Compute,
    linear_map: np.ndarray | None = None,
) -> ValueSD:
    """sd of exact values of the item or context ``game`` for ``batch``'s duels.

    ``masks``: all ``2^p`` coalitions in bit order (an exact ``CoalitionSet``);
    ``linear_map``: (k, 2^p) from coalition values to the values asked for (default
    the Shapley values' :func:`exact_shapley_matrix`; interactions: theirs).
    """
    fn: PreferenceFunction = game.fn
    factor = compute.tensor(fn.require_posterior())
    brackets = BRACKETS[game.what](game, batch)
    n_duels, m = batch.n_duels, fn.n_centres
    if linear_map is None:
        linear_map = exact_shapley_matrix(masks.shape[1])
    matrix = compute.tensor(np.array(linear_map))  # a copy: the interactions' is read-only
    p, n_players = matrix.shape[0], masks.shape[1]
    sizes = masks.sum(1)
    per_duel = p * m + getattr(brackets, "elements_per_duel", 0)
    group = max(1, MAX_PHI_ELEMENTS // max(1, per_duel))
    sd = np.zeros((n_duels, p))
    for lo in range(0, n_duels, group):
        rows = np.arange(lo, min(lo + group, n_duels))
        empty, full = brackets.boundary(rows)  # (r, M) each
        phi = torch.zeros((p, m * len(rows)), dtype=compute.torch_dtype, device=factor.device)
        step = max(1, _MAX_BRACKET_ELEMENTS // max(1, len(rows) * m))
        for start in range(0, len(masks), step):
            checkpoint()
            chunk = np.arange(start, min(start + step, len(masks)))
            stack = torch.empty((len(chunk), m, len(rows)), dtype=phi.dtype, device=phi.device)
            proper = (sizes[chunk] > 0) & (sizes[chunk] < n_players)
            stack[sizes[chunk] == 0] = empty.T
            stack[sizes[chunk] == n_players] = full.T
            if proper.any():
                stack[torch.as_tensor(proper)] = brackets.coalitions(masks[chunk[proper]], rows)
            phi += matrix[:, chunk] @ stack.reshape(len(chunk), -1)
        sd[rows] = value_sd_of(phi.reshape(p, m, len(rows)), factor)
    empty, full = brackets.boundary(np.arange(n_duels))
    return ValueSD(sd, output_sd_of(full, factor), output_sd_of(empty, factor))


def value_sd_of(phi: torch.Tensor, factor: torch.Tensor) -> np.ndarray:
    """(duels, p) ``||Phi_i(d) @ F||`` of centre-major ``phi`` (p, M, duels)."""
    return torch.linalg.vector_norm(factor.T @ phi, dim=1).T.cpu().numpy()


def sampled_shapley_map(coalitions: SampledCoalitions) -> tuple[np.ndarray, np.ndarray]:
    """(masks, linear map) of sampled Shapley values as :func:`exact_value_sd` takes them.

    The sampled estimate is linear in the coalition values too (its kernel WLS has
    fixed weights given the design), ``phi = L @ [v_S..., v_empty, v_full]``: ``L`` is
    read off the estimator itself, applied to unit values. So ``||Phi F||`` is the
    posterior sd of the *sampled* value exactly; its sampling error ``se`` is a
    separate, independent error (``combined_sd``).
    """
    estimator = SampledShapley(coalitions)
    k, p = coalitions.n_coalitions, coalitions.n_players
    # k + 2 unit "duels": one per coalition value, then v_empty, then v_full.
    values = np.hstack([np.eye(k), np.zeros((k, 2))])
    v_empty, v_full = np.eye(k + 2)[k], np.eye(k + 2)[k + 1]
    first = estimator.partial_statistics(values, np.arange(k), v_empty, v_full)
    linear_map = estimator.solve(first, v_empty, v_full).T  # (p, k + 2)
    masks = np.vstack([coalitions.masks, np.zeros((1, p), bool), np.ones((1, p), bool)])
    return masks, linear_map


def combined_sd(se: np.ndarray | None, sd: np.ndarray) -> np.ndarray:
    """``sqrt(se^2 + sd^2)``: the sampling error of a sampled value (``se``) and the
    model's posterior sd (``sd``) are independent (one is over the coalition draw, the
    other over the coefficients), so their variances add. ``se`` None: exact values
    (sd alone); an exact value's se is 0; a NaN se (unidentified design) stays NaN."""
    sd = np.asarray(sd, dtype=np.float64)
    if se is None:
        return sd
    return np.sqrt(np.asarray(se, dtype=np.float64) ** 2 + sd**2)


def output_sd_of(brackets: torch.Tensor, factor: torch.Tensor) -> np.ndarray:
    """(duels,) ``||b(d) @ F||`` of a boundary's brackets (duels, M): its posterior sd."""
    return torch.linalg.vector_norm(brackets @ factor, dim=1).cpu().numpy()


class _ItemBrackets:
    """beta_S(d) of the item game: its value function with alpha left out (C-GPM: averaged)."""

    def __init__(self, game, batch: DuelBatch) -> None:
        fn, c = game.fn, game.compute
        self.fn, self.compute, self.batch = fn, c, batch
        m = fn.n_centres
        _, index = unique_rows(np.vstack([fn.centres_left, fn.centres_right]))
        self.cl, self.cr = c.index(index[:m]), c.index(index[m:])
        self.kappa = _context_average(fn, c)
        self.embedding, self._universe = game.embedding, None

    @property
    def universe(self):
        if self._universe is None:  # bound only when this pass solves its own embeddings
            self._universe = self.embedding.bind(self.batch.items)
        return self._universe

    def boundary(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        b, fn = self.batch, self.fn
        full = fn.centre_brackets_on_pool(b.items, b.left[rows], b.right[rows], None, None,
                                          self.compute)  # fmt: skip
        return torch.zeros_like(full), full

    def coalitions(self, masks: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        return self.from_gammas(self.embedding.gammas(masks, self.universe), rows)

    def from_gammas(
        self, gammas, rows: np.ndarray, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(K, M, r) brackets from the coalitions' (Gamma, query column) pairs (into ``out``).

        ``Gamma``'s columns at the duels' left and right classes first, ``GA`` and
        ``GB`` (centre rows x duels, the utility weight added), then per centre
        ``GA(cl_j) GB(cr_j) - GB(cl_j) GA(cr_j)``: the value function's products with
        alpha left out, by row gathers of contiguous duel rows. The centres go in
        blocks of ``_BRACKET_BLOCK_ELEMENTS`` per gathered block, so the gathers stay
        in cache between the products.
        """
        fn, c = self.fn, self.compute
        m = fn.n_centres
        if out is None:
            out = torch.empty((len(gammas), m, len(rows)), dtype=c.torch_dtype,
                              device=c.torch_device)  # fmt: skip
        w = fn.utility_weight if fn.kind != "upm" else 0.0
        step = max(_MIN_BRACKET_BLOCK_ROWS, _BRACKET_BLOCK_ELEMENTS // max(1, len(rows)))
        for k, (gamma, query_column) in enumerate(gammas):
            a = c.index(query_column[self.batch.left[rows]])
            b = c.index(query_column[self.batch.right[rows]])
            # (centre rows, r); indexing gathers columns 2x faster than index_select(1, .)
            at_a, at_b = gamma[:, a], gamma[:, b]
            pair = out[k]
            if fn.kind == "upm":
                diff = at_a.sub_(at_b)  # G(., a) - G(., b)
                torch.sub(diff.index_select(0, self.cl), diff.index_select(0, self.cr), out=pair)
            else:
                # l(a) r(b) - l(b) r(a) + w (l(a) - r(a) - l(b) + r(b)) is
                # (l(a) + w)(r(b) + w) - (l(b) + w)(r(a) + w): the utility part folded
                # into the gathered columns, two products per element.
                if w != 0:
                    at_a.add_(w)
                    at_b.add_(w)
                for lo in range(0, m, step):
                    cl, cr = self.cl[lo : lo + step], self.cr[lo : lo + step]
                    p_s = pair[lo : lo + step]
                    torch.mul(at_a.index_select(0, cl), at_b.index_select(0, cr), out=p_s)
                    p_s.addcmul_(at_b.index_select(0, cl), at_a.index_select(0, cr), value=-1.0)
                # Sides equal on the coalition's columns: 0 exactly (a fused multiply-add
                # leaves the rounding of l(a) r(a) behind).
                same = a == b
                if bool(same.any()):
                    pair[:, same] = 0.0
            if self.kappa is not None:
                pair *= self.kappa[:, None]
        return out


class _SidesBrackets:
    """beta_(S_l, S_r)(d) of the side game: its value function with alpha left out.

    ``L = G_{S_l}(centres, x_l)``, ``R = G_{S_r}(centres, x_r)`` (boundary side
    coalitions by definition: the mean embedding and ``K``), and per centre
    ``kappa_j [L(cl_j) R(cr_j) - R(cl_j) L(cr_j) + c (L(cl_j) - L(cr_j) - R(cl_j) + R(cr_j))]``
    (UPM: no product term, c = 1). Every side coalition's embedding is gathered at the
    group's duels once.
    """

    def __init__(self, game, batch: DuelBatch) -> None:
        fn, c = game.fn, game.compute
        self.game, self.fn, self.compute, self.batch = game, fn, c, batch
        m = fn.n_centres
        centre_rows, index = unique_rows(np.vstack([fn.centres_left, fn.centres_right]))
        self.cl, self.cr = c.index(index[:m]), c.index(index[m:])
        self.kappa = _context_average(fn, c)
        self.n_groups = game.n_groups
        self.embedding = game.items.embedding
        self.universe = self.embedding.bind(batch.items)
        self.full = rbf_gram(
            c.tensor(centre_rows), c.tensor(batch.items), c.tensor(fn.lengthscales)
        )
        self.elements_per_duel = 2 * 2**self.n_groups * len(centre_rows)
        self._gathered: tuple[int, torch.Tensor, torch.Tensor] | None = None

    def boundary(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        b, fn = self.batch, self.fn
        full = fn.centre_brackets_on_pool(b.items, b.left[rows], b.right[rows], None, None,
                                          self.compute)  # fmt: skip
        return torch.zeros_like(full), full

    def _sides(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(2^p, n_rows, r) every side coalition's embedding at the left / right items."""
        if self._gathered is not None and self._gathered[0] == int(rows[0]):
            return self._gathered[1], self._gathered[2]
        c, p = self.compute, self.n_groups
        a, b = c.index(self.batch.left[rows]), c.index(self.batch.right[rows])
        masks = masks_from_bits(np.arange(2**p), p)
        left, right = [], []
        proper = iter(self.embedding.gammas(masks[1:-1], self.universe)) if p > 1 else iter(())
        for code in range(2**p):
            if code == 0:
                mean = self.game._mean_embedding[:, None]
                left.append(mean.expand(-1, len(rows)))
                right.append(mean.expand(-1, len(rows)))
                continue
            if code == 2**p - 1:
                gamma, column = self.full, np.arange(len(self.batch.items))
            else:
                gamma, column = next(proper)
            col = c.index(column)
            left.append(gamma[:, col[a]])
            right.append(gamma[:, col[b]])
        self._gathered = (int(rows[0]), torch.stack(left), torch.stack(right))
        return self._gathered[1], self._gathered[2]

    def coalitions(self, masks: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        fn, p = self.fn, self.n_groups
        left_all, right_all = self._sides(rows)
        weight = 1.0 if fn.kind == "upm" else float(fn.utility_weight)
        out = []
        for code_l, code_r in zip(bits_from_masks(masks[:, :p]), bits_from_masks(masks[:, p:]),
                                  strict=True):  # fmt: skip
            big_l, big_r = left_all[int(code_l)], right_all[int(code_r)]
            ll, lr = big_l[self.cl], big_l[self.cr]  # L(cl_j), L(cr_j): (M, r)
            rl, rr = big_r[self.cl], big_r[self.cr]
            pair = weight * ((ll - lr) - (rl - rr))
            if fn.kind != "upm":
                pair = ll * rr - rl * lr + pair
            if self.kappa is not None:
                pair = pair * self.kappa[:, None]
            out.append(pair)
        return torch.stack(out)


class _ContextBrackets:
    """beta_S(d) of the context game: ``GammaU[cu_j, u_d] Xi_j(d)``."""

    def __init__(self, game, batch: DuelBatch) -> None:
        fn, c = game.fn, game.compute
        self.fn, self.compute, self.batch = fn, c, batch
        _, index = unique_rows(np.asarray(fn.centres_context))
        self.cu = c.index(index)
        self.embedding, self._universe = game.embedding, None
        self.xi = transposed(
            fn.centre_brackets_on_pool(
                batch.items, batch.left, batch.right, None, None, c, context_factor=False
            )
        )  # (M, D)

    def boundary(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        b, fn, c = self.batch, self.fn, self.compute
        empty = fn.centre_brackets_on_pool(b.items, b.left[rows], b.right[rows], None, None, c)
        full = fn.centre_brackets_on_pool(
            b.items, b.left[rows], b.right[rows], b.contexts, b.context[rows], c
        )
        return empty, full

    @property
    def universe(self):
        if self._universe is None:
            self._universe = self.embedding.bind(np.asarray(self.batch.contexts))
        return self._universe

    def coalitions(self, masks: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        return self.from_gammas(self.embedding.gammas(masks, self.universe), rows)

    def from_gammas(
        self, gammas, rows: np.ndarray, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(K, M, r) ``GammaU[cu_j, u_d] Xi_j(d)`` (into ``out``)."""
        c = self.compute
        xi = self.xi[:, c.index(rows)]
        if out is None:
            out = torch.empty((len(gammas), *xi.shape), dtype=xi.dtype, device=xi.device)
        for k, (gamma, query_column) in enumerate(gammas):
            u = c.index(query_column[self.batch.context[rows]])
            torch.mul(gamma[:, u].index_select(0, self.cu), xi, out=out[k])
        return out


BRACKETS = {"items": _ItemBrackets, "context": _ContextBrackets, "sides": _SidesBrackets}


def _context_average(fn: PreferenceFunction, compute: Compute) -> torch.Tensor | None:
    """A C-GPM's per-centre context average ``mean_u k_U(u, cu_j)`` (None otherwise)."""
    if fn.kind != "cgpm":
        return None
    assert fn.contexts is not None and fn.context_weights is not None
    ku = fn.context_kernel_to_centres(fn.contexts, compute)
    w = compute.tensor(fn.context_weights)
    return (ku @ w) / w.sum()


def interaction_sd(explainer, left: np.ndarray, right: np.ndarray) -> ValueSD:
    """sd of the exact pairwise interactions (and of g) for duels given as the explainer's.

    ``explainer``: an item :class:`Explainer`; values in input order (sds have no sign).
    """
    from prefshap_core.explain.duels import canonical_duels, resolve_side
    from prefshap_core.explain.interactions import exact_interaction_matrix
    from prefshap_core.explain.shapley.coalitions import all_coalitions

    fn = explainer.function
    with explainer._lock:
        rows_l = resolve_side(fn, left, "left").rows
        rows_r = resolve_side(fn, right, "right").rows
        canon = canonical_duels(rows_l, rows_r, None)
        game = explainer._ensure_game(canon)
        p = game.space.n_groups
        sd = exact_value_sd(game, canon.batch, all_coalitions(p).masks, explainer.compute,
                            exact_interaction_matrix(p))  # fmt: skip
    inverse = canon.inverse
    return ValueSD(sd.values[inverse], sd.outputs[inverse], sd.base_values[inverse])
