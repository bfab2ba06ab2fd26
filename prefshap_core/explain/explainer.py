"""Public entry points: Pref-SHAP explanations of item and context features.

    explain_items(fn, left, right)              GPM, UPM, C-GPM (context-averaged g_bar)
    explain_context(fn, left, right, contexts)  C-GPM context features (Prop. 3.3)

Both return an :class:`Explanation` with values left-vs-right and
``base_values + values.sum(1) == outputs`` to float precision, because the
boundary coalitions are fixed by definition (METHOD.md): ``v(full)`` is the model
output (``g``, or ``g_bar`` for C-GPM items; ``g(u, ., .)`` for context) and
``v(empty)`` is 0 for items and ``g_bar`` for context. So the context explanation's
base value is the item explanation's output.

Exact antisymmetry: duels are put in a canonical orientation (smaller pool row on
the left) and deduplicated (with the context, if any) before anything is computed;
values are computed once per canonical duel and negated for swapped ones. A duel
and its swap are therefore the same floats negated, within one call and across
calls that query the same items.

Aggregates (an item's duels, its losses or wins, any subset, context on average;
Table 1 of the paper) are means of per-duel Shapley values by linearity:
``Explanation.from_point_of_view``, ``losses_of``, ``wins_of``, ``subset`` and
``mean`` give them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.errors import DataValidationError
from prefshap_core.explain.cme import (
    DEFAULT_CME_LAMBDA,
    DEFAULT_CONTEXT_CME_LAMBDA,
    CMESolver,
    EngineStats,
)
from prefshap_core.explain.cme_select import CMEPlan, plan_cme
from prefshap_core.explain.coalitions import (
    CoalitionSet,
    all_coalitions,
    sample_paired_coalitions,
)
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.player_data import context_columns, player_differences
from prefshap_core.explain.shapley import ExactShapley, KernelShapley
from prefshap_core.explain.value_context import ContextGame
from prefshap_core.explain.value_items import ItemGame, resolve_lambda
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress

DEFAULT_MAX_EXACT_PLAYERS = 12
# Coalition values held at once (K x duels, float64): 2^25 values = 256 MB.
_MAX_VALUES_IN_MEMORY = 1 << 25


@dataclass(frozen=True)
class _Canonical:
    keys: np.ndarray  # (U, 2 or 3) distinct canonical duels: (a, b[, context]) with a <= b
    inverse: np.ndarray  # (D,) row of keys of each duel
    sign: np.ndarray  # (D,) -1.0 where the duel was swapped


def _canonical(left: np.ndarray, right: np.ndarray, context: np.ndarray | None) -> _Canonical:
    sign = np.where(left > right, -1.0, 1.0)
    cols = [np.minimum(left, right), np.maximum(left, right)]
    if context is not None:
        cols.append(context)
    keys, inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    return _Canonical(keys, inverse.reshape(-1), sign)


def _item_rows(fn: PreferenceFunction, items: np.ndarray, side: str) -> np.ndarray:
    """Pool rows from pool rows (integers) or item ids (anything else)."""
    items = np.asarray(items)
    if items.ndim != 1:
        raise DataValidationError("expected one item per duel", column=side)
    if items.dtype.kind in "iu":
        bad = np.flatnonzero((items < 0) | (items >= len(fn.items)))
        if len(bad):
            raise DataValidationError(
                f"item row {items[bad[0]]} is outside the model's {len(fn.items)} items",
                row=int(bad[0]) + 1,
                column=side,
            )
        return items.astype(np.int64)
    index = {str(i): k for k, i in enumerate(fn.item_ids)}
    rows = np.empty(len(items), dtype=np.int64)
    for k, item in enumerate(items):
        row = index.get(str(item))
        if row is None:
            raise DataValidationError(
                f"unknown item id {item!r} (not in the model's items)", row=k + 1, column=side
            )
        rows[k] = row
    return rows


def _choose_coalitions(
    n_players: int, max_exact_players: int, n_samples: int | None, seed: int
) -> CoalitionSet:
    proper = 2**n_players - 2 if n_players <= 62 else None
    exact = n_players <= max(1, max_exact_players) or (
        n_samples is not None and proper is not None and n_samples >= proper
    )
    if exact:
        return all_coalitions(n_players)
    wanted = n_samples if n_samples is not None else 2 * n_players + 2048
    if proper is not None and wanted >= proper:
        return all_coalitions(n_players)
    return sample_paired_coalitions(n_players, wanted, seed)


def _shapley_values(
    coalitions: CoalitionSet,
    evaluate: Callable[[np.ndarray], np.ndarray],  # masks (K, p) -> values (K, duels)
    v_empty: np.ndarray,
    v_full: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    masks = coalitions.masks
    sizes = masks.sum(1)
    proper = (sizes > 0) & (sizes < coalitions.n_players)
    if coalitions.exact:
        values = np.empty((len(masks), len(v_full)))
        values[sizes == 0] = v_empty
        values[sizes == coalitions.n_players] = v_full
        if proper.any():
            values[proper] = evaluate(masks[proper])
        return ExactShapley(coalitions)(values)
    return KernelShapley(coalitions)(evaluate(masks), v_empty, v_full)


def _model_output(
    fn: PreferenceFunction,
    a: np.ndarray,
    b: np.ndarray,
    context_pool: np.ndarray | None,
    context_index: np.ndarray | None,
    compute: Compute,
) -> np.ndarray:
    """g for canonical duels, evaluated on the queried items only (not the whole pool).

    The queried rows keep their order, so the model's own canonical orientation is
    ours, and item and context explanations of the same duels get the same floats.
    """
    query, local = np.unique(np.concatenate([a, b]), return_inverse=True)
    local = local.reshape(-1)
    return fn.decision_on_pool(
        fn.items[query], local[: len(a)], local[len(a) :], context_pool, context_index, compute
    )


def _shapley_over_duels(
    coalitions: CoalitionSet,
    make_evaluate,  # (rows of distinct duels, progress) -> ((masks) -> (K, rows) values)
    v_empty: np.ndarray,
    v_full: np.ndarray,
    progress: Progress,
) -> tuple[np.ndarray, np.ndarray]:
    """Shapley values and standard errors of every distinct duel, group by group."""
    phi = np.zeros((len(v_full), coalitions.n_players))
    se = np.zeros_like(phi)
    groups = _duel_groups(len(v_full), coalitions.n_coalitions)
    for g, rows in enumerate(groups):
        evaluate = make_evaluate(rows, progress.span(g / len(groups), (g + 1) / len(groups)))
        phi[rows], se[rows] = _shapley_values(coalitions, evaluate, v_empty[rows], v_full[rows])
    return phi, se


def _duel_groups(n_unique: int, n_coalitions: int) -> list[np.ndarray]:
    """Split the distinct duels so that K x duels values stay bounded in memory."""
    size = max(1, _MAX_VALUES_IN_MEMORY // max(1, n_coalitions))
    return [np.arange(s, min(s + size, n_unique)) for s in range(0, max(n_unique, 1), size)]


def _common(
    fn: PreferenceFunction,
    left: np.ndarray,
    right: np.ndarray,
    winners: np.ndarray | None,
    duel_ids: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    left_rows, right_rows = _item_rows(fn, left, "left"), _item_rows(fn, right, "right")
    if len(left_rows) != len(right_rows):
        raise DataValidationError("left and right need one entry per duel")
    n = len(left_rows)
    winners = np.zeros(n, np.int8) if winners is None else np.sign(winners).astype(np.int8)
    duel_ids = np.arange(n).astype(str) if duel_ids is None else np.asarray(duel_ids).astype(str)
    if len(winners) != n or len(duel_ids) != n:
        raise DataValidationError("winners and duel_ids need one entry per duel")
    return left_rows, right_rows, winners, duel_ids


def _plan(
    method: str,
    pool: np.ndarray,
    centres: np.ndarray,
    n_queries: int,
    coalitions: CoalitionSet,
    compute: Compute,
    options: dict[str, Any] | None,
    solver: CMESolver | None,
) -> CMEPlan:
    """The CME method of one explanation (one plan shared by all its duel groups)."""
    sizes = coalitions.masks.sum(1)
    n_proper = int(((sizes > 0) & (sizes < coalitions.n_players)).sum())
    n_centre_rows = len(np.unique(np.asarray(centres, dtype=np.float64), axis=0))
    return plan_cme(method, pool, n_centre_rows, n_queries, n_proper, compute, options, solver)


def _meta(
    coalitions: CoalitionSet,
    compute: Compute,
    start: float,
    stats: EngineStats | None,
    **extra: object,
) -> dict:
    timings = {} if stats is None else {"seconds_by_part": dict(stats.seconds)}
    return {
        **timings,
        "method": "exact" if coalitions.exact else "sampled",
        "n_players": coalitions.n_players,
        "n_coalitions": coalitions.n_coalitions,
        "seconds": time.perf_counter() - start,
        "dtype": compute.dtype,
        "device": compute.device,
        **extra,
    }


def explain_items(
    fn: PreferenceFunction,
    left: np.ndarray,
    right: np.ndarray,
    *,
    winners: np.ndarray | None = None,
    duel_ids: np.ndarray | None = None,
    max_exact_players: int = DEFAULT_MAX_EXACT_PLAYERS,
    n_samples: int | None = None,
    seed: int = 0,
    compute: Compute | None = None,
    progress: Progress | None = None,
    cme_lambda: float | None = None,
    solver: CMESolver | None = None,
    coalition_batch: int | None = None,
    stats: EngineStats | None = None,
    method: str = "auto",
    cme_options: dict[str, Any] | None = None,
) -> Explanation:
    """Shapley values of the item feature groups for each duel ``left[i]`` vs ``right[i]``.

    ``left``/``right``: pool rows (integers) or item ids. Exact over all coalitions
    when the model has at most ``max_exact_players`` groups, otherwise paired
    Shapley-kernel sampling of ``n_samples`` coalitions (default ``2p + 2048``)
    seeded by ``seed``. ``cme_lambda`` overrides the model's. ``coalition_batch``
    coalitions are solved together (default 8 on CUDA, where equal-size systems
    share one batched Cholesky; 1 on CPU, where LAPACK loops over a batch anyway).
    Pass an :class:`EngineStats` to collect seconds and flops per part.

    ``method``: how the coalition CMEs are solved: ``"cholesky"`` (exact),
    ``"cg"`` (preconditioned CG, exact to its tolerance), ``"nystrom"``
    (approximate, for very large pools) or ``"auto"`` (chosen from the sizes and the
    device, :mod:`cme_select`); ``cme_options`` tune it (``tol``, ``n_landmarks``,
    ...). What was used and how well it converged is in ``meta["cme"]``.
    """
    start = time.perf_counter()
    compute = compute or Compute()
    if coalition_batch is None:
        coalition_batch = 8 if compute.device.startswith("cuda") else 1
    progress = ensure_progress(progress)
    left_rows, right_rows, winners, duel_ids = _common(fn, left, right, winners, duel_ids)
    space = fn.item_space
    coalitions = _choose_coalitions(space.n_groups, max_exact_players, n_samples, seed)
    lam = resolve_lambda(fn.cme_lambda if cme_lambda is None else cme_lambda, DEFAULT_CME_LAMBDA)
    canon = _canonical(left_rows, right_rows, None)
    a, b = canon.keys[:, 0], canon.keys[:, 1]
    plan = _plan(
        method,
        fn.items,
        np.vstack([fn.centres_left, fn.centres_right]),
        len(np.unique(canon.keys)),
        coalitions,
        compute,
        cme_options,
        solver,
    )
    outputs_u = _model_output(fn, a, b, None, None, compute)

    def make_evaluate(rows: np.ndarray, span: Progress):
        query, query_index = np.unique(canon.keys[rows], return_inverse=True)
        query_index = query_index.reshape(len(rows), 2)
        game = ItemGame(fn, fn.items[query], compute, lam, None, stats, plan)
        return lambda masks: game.values(
            masks,
            query_index[:, 0],
            query_index[:, 1],
            batch=coalition_batch,
            on_batch=lambda f: span.update("explaining item features", f),
        )

    phi_u, se_u = _shapley_over_duels(
        coalitions, make_evaluate, np.zeros(len(a)), outputs_u, progress
    )
    sign = canon.sign
    data, labels = player_differences(space, fn.items[left_rows], fn.items[right_rows])
    return Explanation(
        values=phi_u[canon.inverse] * sign[:, None],
        base_values=np.zeros(len(sign)),
        outputs=outputs_u[canon.inverse] * sign,
        data=data,
        player_names=tuple(space.group_names),
        duel_ids=duel_ids,
        left_ids=np.asarray(fn.item_ids)[left_rows].astype(str),
        right_ids=np.asarray(fn.item_ids)[right_rows].astype(str),
        winners=winners,
        standard_errors=se_u[canon.inverse],
        kind="items",
        data_labels=labels,
        meta=_meta(
            coalitions,
            compute,
            start,
            stats,
            model_kind=fn.kind,
            n_unique_duels=len(a),
            n_samples=n_samples,
            seed=seed,
            cme_lambda=lam,
            cme=plan.report(),
        ),
    )


def explain_context(
    fn: PreferenceFunction,
    left: np.ndarray,
    right: np.ndarray,
    contexts: np.ndarray,
    *,
    winners: np.ndarray | None = None,
    duel_ids: np.ndarray | None = None,
    max_exact_players: int = DEFAULT_MAX_EXACT_PLAYERS,
    n_samples: int | None = None,
    seed: int = 0,
    compute: Compute | None = None,
    progress: Progress | None = None,
    context_cme_lambda: float | None = None,
    solver: CMESolver | None = None,
    coalition_batch: int = 8,
    stats: EngineStats | None = None,
    method: str = "auto",
    cme_options: dict[str, Any] | None = None,
) -> Explanation:
    """Shapley values of a C-GPM's context groups for each duel under its context.

    ``contexts``: one model-space context row per duel (any rows, observed or not).
    Base value = the context-averaged ``g_bar(x_l, x_r)``; output = ``g(u, x_l, x_r)``.
    ``method`` and ``cme_options`` as for :func:`explain_items` (over the model's
    unique contexts, so ``"auto"`` is nearly always the exact Cholesky).
    """
    start = time.perf_counter()
    if fn.kind != "cgpm" or fn.context_space is None:
        raise ValueError(f"context explanations need a C-GPM, not a {fn.kind!r} model")
    compute = compute or Compute()
    progress = ensure_progress(progress)
    left_rows, right_rows, winners, duel_ids = _common(fn, left, right, winners, duel_ids)
    contexts = np.atleast_2d(np.asarray(contexts, dtype=np.float64))
    if contexts.shape != (len(left_rows), fn.context_space.n_features):
        raise DataValidationError(
            f"contexts must be (duels, {fn.context_space.n_features}), got {contexts.shape}"
        )
    space = fn.context_space
    coalitions = _choose_coalitions(space.n_groups, max_exact_players, n_samples, seed)
    lam = resolve_lambda(
        fn.context_cme_lambda if context_cme_lambda is None else context_cme_lambda,
        DEFAULT_CONTEXT_CME_LAMBDA,
    )
    context_pool, context_index = np.unique(contexts + 0.0, axis=0, return_inverse=True)
    canon = _canonical(left_rows, right_rows, context_index.reshape(-1))
    a, b, c = canon.keys[:, 0], canon.keys[:, 1], canon.keys[:, 2]
    assert fn.contexts is not None and fn.centres_context is not None
    plan = _plan(
        method,
        fn.contexts,
        fn.centres_context,
        len(np.unique(c)),
        coalitions,
        compute,
        cme_options,
        solver,
    )
    outputs_u = _model_output(fn, a, b, context_pool, c, compute)
    base_u = _model_output(fn, a, b, None, None, compute)

    def make_evaluate(rows: np.ndarray, span: Progress):
        items, item_index = np.unique(canon.keys[rows, :2], return_inverse=True)
        item_index = item_index.reshape(len(rows), 2)
        ctx, ctx_index = np.unique(c[rows], return_inverse=True)
        game = ContextGame(fn, fn.items[items], context_pool[ctx], compute, lam, None, stats, plan)
        return lambda masks: game.values(
            masks,
            item_index[:, 0],
            item_index[:, 1],
            ctx_index.reshape(-1),
            batch=coalition_batch,
            on_batch=lambda f: span.update("explaining context features", f),
        )

    phi_u, se_u = _shapley_over_duels(coalitions, make_evaluate, base_u, outputs_u, progress)
    sign = canon.sign
    context_values, labels = context_columns(space, contexts)
    return Explanation(
        values=phi_u[canon.inverse] * sign[:, None],
        base_values=base_u[canon.inverse] * sign,
        outputs=outputs_u[canon.inverse] * sign,
        data=np.full((len(sign), space.n_groups), np.nan),
        player_names=tuple(space.group_names),
        duel_ids=duel_ids,
        left_ids=np.asarray(fn.item_ids)[left_rows].astype(str),
        right_ids=np.asarray(fn.item_ids)[right_rows].astype(str),
        winners=winners,
        standard_errors=se_u[canon.inverse],
        kind="context",
        data_labels=labels,
        context_values=context_values,
        meta=_meta(
            coalitions,
            compute,
            start,
            stats,
            model_kind=fn.kind,
            n_unique_duels=len(a),
            n_samples=n_samples,
            seed=seed,
            context_cme_lambda=lam,
            cme=plan.report(),
        ),
    )
