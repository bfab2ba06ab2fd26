"""The Laplace posterior's data term: the training duels' bracket rows against the
centres, whitened and summed (docs/method.md, "Uncertainty" and "Cost").

:func:`prefshap_core.models.posterior.laplace_posterior` sums ``Z^T Z``, ``Z = W^1/2
K_nM L^-T``, from the row sources here: the duels' kernel rows, block by block
(:func:`bracket_kernel`), a seeded curvature sample of them above a size
(:func:`sampled_rows`), the duels that are centres from ``L^-1`` without a solve
(:func:`add_centre_rows`), or a UPM's rows as differences of item rows
(:func:`add_utility_data_term`). :func:`decision_and_sd` gives g and its posterior sd
per duel from the same rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.kernels.operator import DifferenceOperator
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.kernels.rows import unique_rows
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.solvers.gram import add_lower_gram
from prefshap_core.solvers.triangular import lower_inverse

BLOCK_DUELS = 2048  # rows per kernel block of the data term (33 MB at M = 2,000)
# Columns per panel of the data term's lower triangle (add_lower_gram).
PANEL = 256
# Candidates per sampled duel: the uniform first stage of the sample (sampled_rows).
_CANDIDATES = 3


def sampled_rows(
    fn: PreferenceFunction,
    pool: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    context_pool: np.ndarray | None,
    context_index: np.ndarray | None,
    compute: Compute,
    size: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``size`` of the duels and their weights in the data term's unbiased estimate
    ``sum_S weight_i z_i z_i^T`` (``z_i`` the whitened bracket, unweighted).

    Two stages, both unbiased: a seeded uniform sample of ``_CANDIDATES`` x ``size``
    duels, whose curvatures ``p (1 - p)`` their g gives (bounded work at any n), then
    :func:`curvature_sample` from those.
    """
    n = len(left)
    rng = np.random.default_rng([seed, 7])
    candidates = np.sort(rng.choice(n, min(n, _CANDIDATES * size), replace=False))
    ctx = None if context_index is None else np.asarray(context_index)[candidates]
    g, _ = decision_and_sd(fn, pool, left[candidates], right[candidates], context_pool,
                            ctx, compute, with_sd=False)  # fmt: skip
    p = torch.sigmoid(torch.from_numpy(g)).numpy()
    picked, weights = curvature_sample(p * (1.0 - p), size, seed)
    return candidates[picked], weights * (n / len(candidates))


def curvature_sample(curvature: np.ndarray, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``size`` rows (sorted), row i drawn with probability ``pi_i = min(1, c w_i)``
    (``sum pi = size``), and their weights ``w_i / pi_i``.

    ``sum_S (w_i / pi_i) z_i z_i^T`` is then unbiased for the data term, and the duels
    that carry most of it (curvature near 1/4, not the confidently predicted ones) are
    the ones kept: uncapped rows all weigh ``1 / c``. Systematic sampling in a seeded
    random order draws exactly ``size`` rows with exactly those probabilities.
    """
    w = np.clip(np.asarray(curvature, dtype=np.float64), 0.0, None)
    size = min(size, int(np.count_nonzero(w)))
    if size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    descending = np.sort(w)[::-1]
    rest = np.cumsum(descending[::-1])[::-1]  # rest[k]: the sum of all but the k largest
    capped = 0  # rows with pi = 1: the largest, while c w would exceed 1
    while capped < size - 1 and (size - capped) * descending[capped] > rest[capped]:
        capped += 1
    pi = np.minimum(1.0, w * ((size - capped) / rest[capped]))
    pi[np.argsort(-w, kind="stable")[:capped]] = 1.0
    rng = np.random.default_rng([seed, 8])
    order = rng.permutation(np.flatnonzero(pi > 0))
    edges = np.cumsum(pi[order])
    points = rng.random() + np.arange(size)
    # (the clip: a last point past the rounded total belongs to the last interval)
    picked = order[np.minimum(np.searchsorted(edges, points, side="right"), len(order) - 1)]
    rows = np.sort(picked)
    return rows, w[rows] / pi[rows]


def add_centre_rows(
    out: torch.Tensor,
    centres: torch.Tensor,
    lower: torch.Tensor,
    jitter: float,
    alpha: torch.Tensor,
    position: np.ndarray,
    row_weights: torch.Tensor | None,
) -> tuple[np.ndarray, torch.Tensor | None, torch.Tensor | None]:
    """The lower triangle of ``out += Z_C^T Z_C`` over the duels that are centres
    (``position``: per duel, its centre or -1), when they are many; returns the other
    duels' positions, their weights and ``L^-1`` (None where it was not formed; the
    factor reuses it, :func:`posterior._full_factor`).

    The Nyström centres are training duels, so ``M`` of the rows are rows of ``K_MM``,
    and ``K_MM L^-T = (L L^T - j I) L^-T = L - j L^-T``: their whitened rows need no
    solve, only ``L^-1`` (``M^3 / 3`` flops against ``M^3`` for solving ``M`` rows:
    0.08 s against 0.16 s at M = 2,000, two cores). Exact, not an approximation: the
    jitter's part is kept. Below ``M / 2`` such rows (a sample of a large set) the
    inverse would cost more than the solves it saves.
    """
    matched = np.flatnonzero(position >= 0)
    if 2 * len(matched) < len(alpha):
        return np.arange(len(position)), row_weights, None
    which = torch.as_tensor(position[matched], device=lower.device)
    if row_weights is None:
        p = torch.sigmoid(centres @ alpha)  # b(x) of a duel equal to centre c: K_MM[c]
        weights = (p * (1.0 - p))[which]
    else:
        weights = row_weights[torch.as_tensor(matched, device=lower.device)]
    # Each duel equal to centre c adds w z_c z_c^T: one row per centre, its duels'
    # weights summed (the Gram does not depend on the rows' order).
    centre_weights = torch.zeros_like(alpha).index_add_(0, which, weights)
    inverse = lower_inverse(lower)
    whitened = torch.add(lower, inverse.T, alpha=-jitter).mul_(centre_weights.sqrt()[:, None])
    add_lower_gram(out, whitened, panel=PANEL)
    del whitened
    rest = np.flatnonzero(position < 0)
    rest_weights = None
    if row_weights is not None:
        rest_weights = row_weights[torch.as_tensor(rest, device=lower.device)]
    return rest, rest_weights, inverse


def gathered_blocks(
    rows: torch.Tensor, positions: np.ndarray
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(lo, hi, rows[positions[lo:hi]])`` block by block, gathered into one reused
    buffer (as :meth:`PairKernel.row_blocks`: the caller may overwrite each block)."""
    index = torch.as_tensor(positions, device=rows.device)
    buffer = rows.new_empty((min(BLOCK_DUELS, len(positions)), rows.shape[1]))
    for lo in range(0, len(positions), BLOCK_DUELS):
        hi = min(lo + BLOCK_DUELS, len(positions))
        block = buffer[: hi - lo]
        torch.index_select(rows, 0, index[lo:hi], out=block)
        yield lo, hi, block


def centre_positions(duels: DuelIndex, centres: DuelIndex) -> np.ndarray:
    """Per duel row, the position of a centre with the same items (and context) in the
    same order, or -1."""

    def keys(index: DuelIndex) -> np.ndarray:
        parts = [index.left, index.right] + ([] if index.context is None else [index.context])
        return np.stack([part.cpu().numpy() for part in parts], axis=1)

    m = len(centres)
    _, inverse = np.unique(np.vstack([keys(centres), keys(duels)]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    centre_of_key = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    centre_of_key[inverse[:m]] = np.arange(m)  # equal centres have equal rows: any will do
    return centre_of_key[inverse[m:]]


def item_operator(
    fn: PreferenceFunction, kernel: PairKernel, duels: DuelIndex, centres: DuelIndex
) -> DifferenceOperator | None:
    """A UPM's brackets as differences of item rows, where products over its items are
    the cheaper (:func:`item_rows_pay`); else None (the duels' rows are used)."""
    if fn.kind != "upm":
        return None
    operator = kernel.operator(duels, centres)
    return (
        operator if isinstance(operator, DifferenceOperator) and item_rows_pay(operator) else None
    )


def on_distinct_items(
    operator: DifferenceOperator, pool: np.ndarray, left: np.ndarray, right: np.ndarray
) -> DifferenceOperator:
    """``operator`` (a UPM's training operator on these duels) over its items' distinct
    feature rows: its factor has a row per item id (tennis: 3,245 players, 1,985
    distinct feature rows among them), and the data term whitens every row (0.20 s
    against 0.12 s there). Its rows are the duels' item ids in sorted order
    (``PairKernel``'s factors); where they are not, it is kept as it is (exact, slower).
    """
    ids = np.unique(np.concatenate([left, right]))
    left_rows = np.searchsorted(ids, left)
    if len(ids) != operator.factor.shape[0] or not np.array_equal(
        left_rows, operator.left.cpu().numpy()
    ):
        return operator
    _, distinct = unique_rows(np.asarray(pool)[ids])
    if distinct.max() + 1 == len(ids):
        return operator
    first = np.empty(distinct.max() + 1, dtype=np.int64)
    first[distinct[::-1]] = np.arange(len(ids))[::-1]  # an item of each feature row
    device = operator.factor.device
    to_distinct = torch.as_tensor(distinct, device=device)
    return DifferenceOperator(
        operator.factor.index_select(0, torch.as_tensor(first, device=device)),
        to_distinct[operator.left], to_distinct[operator.right], operator.centre_gram,
    )  # fmt: skip


def item_rows_pay(operator: DifferenceOperator) -> bool:
    """Whether the UPM's data term is cheaper over its items than over its duels: at
    most as many distinct items as duels (the items' Gram is a full GEMM's panels, the
    duels' a solve and a Gram)."""
    return operator.factor.shape[0] <= operator.n_rows


def add_utility_data_term(
    out: torch.Tensor, operator: DifferenceOperator, lower: torch.Tensor, w: torch.Tensor
) -> None:
    """The lower triangle of ``out += Z^T Z`` for a UPM, whose rows ``D[l] - D[r]`` are
    differences of item rows (:class:`DifferenceOperator`).

    With ``E = D L^-T`` (each distinct item whitened once, not each duel),
    ``Z^T Z = E^T C E`` for the comparison graph's weighted Laplacian
    ``C = sum_i w_i (e_l - e_r)(e_l - e_r)^T`` (``e_a``: the unit vector of item a): a
    sparse product and an items x M^2 Gram instead of two n x M^2 passes (tennis: 77,000
    duels between ~1,600 players), whose cost barely grows with the duels, so they are
    not sampled. ``E``'s rows are bounded (``e_a`` is item
    a's feature projected on the centre duels' span, ``|e_a|^2 <= k(a, a) = 1``), so C's
    cancellations cost ~eps, far below ``n lam``. ``w``: each duel's weight (its
    curvature, or its weight in the sample).
    """
    left, right = operator.left, operator.right
    items = operator.factor.shape[0]
    index = torch.stack(
        [torch.cat([left, right, left, right]), torch.cat([left, right, right, left])]
    )
    with warnings.catch_warnings():  # torch flags its sparse support as beta
        warnings.simplefilter("ignore")
        laplacian = torch.sparse_coo_tensor(index, torch.cat([w, w, -w, -w]), (items, items))
        laplacian = laplacian.coalesce().to_sparse_csr()
    whitened = torch.linalg.solve_triangular(lower, operator.factor.T, upper=False).T
    add_lower_gram(out, whitened, torch.sparse.mm(laplacian, whitened), panel=PANEL)


def bracket_kernel(
    fn: PreferenceFunction,
    pool: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    context_pool: np.ndarray | None,
    context_index: np.ndarray | None,
    compute: Compute,
) -> tuple[PairKernel, DuelIndex, DuelIndex]:
    """``fn``'s kernel as a :class:`PairKernel` over the distinct rows among the duels'
    items and the centres' (and their contexts), with the duels and the centres as its
    rows: ``K(duels, centres)`` is ``b(x)`` row by row, gathered block by block into
    reused memory (a fresh multi-megabyte block per duel chunk cost 2-3x the gathers
    in page faults). The centres' items are the pool's own rows: deduplicated, K_MM's
    item Gram is (distinct items)^2, not (2 M)^2 (0.10 of a 0.6 s posterior at
    M = 2,000 on 300 items)."""
    m = fn.n_centres
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    used, sides = np.unique(np.concatenate([left, right]), return_inverse=True)
    items, index = unique_rows(np.vstack([pool[used], fn.centres_left, fn.centres_right]))
    duel_items, centre_items = index[: len(used)][sides.reshape(-1)], index[len(used) :]
    contexts = context_lengthscales = duel_context = centre_context = None
    if fn.kind == "cgpm":
        assert fn.centres_context is not None and context_pool is not None
        ctx_used, ctx_rows = np.unique(np.asarray(context_index, dtype=np.int64),
                                       return_inverse=True)  # fmt: skip
        contexts, ctx_index = unique_rows(
            np.vstack([np.asarray(context_pool)[ctx_used], fn.centres_context])
        )
        duel_context = ctx_index[: len(ctx_used)][ctx_rows.reshape(-1)]
        centre_context = ctx_index[len(ctx_used) :]
        context_lengthscales = fn.context_lengthscales
    kernel = PairKernel(
        fn.kind, items, fn.lengthscales, contexts, context_lengthscales, compute,
        utility_weight=0.0 if fn.kind == "upm" else fn.utility_weight,
    )  # fmt: skip
    device = compute.torch_device
    n = len(left)
    duels = DuelIndex.from_arrays(duel_items[:n], duel_items[n:], duel_context, device=device)
    centres = DuelIndex.from_arrays(centre_items[:m], centre_items[m:], centre_context,
                                    device=device)  # fmt: skip
    return kernel, duels, centres


def decision_and_sd(
    fn: PreferenceFunction,
    pool: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    context_pool: np.ndarray | None,
    context_index: np.ndarray | None,
    compute: Compute,
    with_sd: bool = True,
    rows: torch.Tensor | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """g and its posterior sd per duel (contexts given for a C-GPM; ``with_sd=False``:
    g alone, sd None), from one pass over the duels' brackets (:func:`bracket_kernel`'s
    rows, in one reused buffer: 3x faster than ``decision_on_pool`` on 18,000 Pokémon
    duels, which forms every pool item's kernel to the centres). ``rows``: the duels'
    brackets, if at hand (a fit's validation block): no kernel is formed."""
    alpha = compute.tensor(fn.alpha)
    factor = compute.tensor(fn.require_posterior()) if with_sd else None
    if rows is not None:
        assert rows.shape == (len(left), fn.n_centres), "rows of other duels or centres"
        blocks: Iterator[tuple[int, int, torch.Tensor]] = iter([(0, len(left), rows)])
    else:
        kernel, duels, centres = bracket_kernel(
            fn, pool, left, right, context_pool, context_index, compute
        )
        operator = item_operator(fn, kernel, duels, centres)
        if operator is not None:
            # b(x) F = (D F)[l] - (D F)[r]: the products over the distinct items (tennis:
            # ~1,100 players in 2,000 held-out duels, 0.25 -> 0.12 s at M = r = 2,000)
            g = operator.mm(alpha).cpu().numpy()
            if factor is None:
                return g, None
            return g, torch.linalg.vector_norm(operator.mm(factor), dim=1).cpu().numpy()
        blocks = kernel.row_blocks(duels, centres, BLOCK_DUELS)
    g = np.empty(len(left))
    sd = np.empty(len(left)) if factor is not None else None
    for lo, hi, b in blocks:
        g[lo:hi] = (b @ alpha).cpu().numpy()
        if factor is not None:
            sd[lo:hi] = torch.linalg.vector_norm(b @ factor, dim=1).cpu().numpy()
    return g, sd
