"""The Pref-SHAP explainer: one object per model that explains any duels asked of it.

    explainer = Explainer(fn, ExplainOptions(what="items"))
    explanation = explainer(left, right, winners=y)          # -> Explanation

The layers (docs/method.md): the duels are resolved and put in canonical
orientation (:mod:`duels`); a *game* (:mod:`games`: item or context value
functions) gives coalition values, its conditional mean embeddings solved by a CME
*backend* (:mod:`cme`); a Shapley *estimator* (:mod:`shapley`: exact enumeration or
sampling) turns them into values; an *executor* (:mod:`executor`) decides where the
coalition batches run. The explainer keeps its games between calls, and with them
each coalition's factorization (bounded by ``options.factor_cache_bytes``), so a
later call about new duels between the same pool pays only for its new queries.

Every explanation satisfies efficiency exactly, because the boundary coalitions are
fixed by definition: ``v(full)`` is the model output (``g``; ``g_bar`` for C-GPM
items; ``g(u, ., .)`` for context) and ``v(empty)`` is 0 for items and ``g_bar`` for
context (so a context explanation's base value is the item explanation's output).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from prefshap_core import budget
from prefshap_core.compute import Compute
from prefshap_core.errors import DataValidationError
from prefshap_core.explain.cme.backends import CMEBackend, make_backend
from prefshap_core.explain.cme.base import EngineStats
from prefshap_core.explain.cme.classes import class_cache_bytes
from prefshap_core.explain.cme.regulariser import usable_regulariser
from prefshap_core.explain.coalition_table import CoalitionTable, ValueTable
from prefshap_core.explain.duel_groups import bounded_duel_groups, join_group_results
from prefshap_core.explain.duels import CanonicalDuels, canonical_duels, resolve_side
from prefshap_core.explain.executor import (
    CoalitionWork,
    LocalExecutor,
    coalition_slices,
    default_task_coalitions,
)
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.games.base import Game
from prefshap_core.explain.games.context import ContextGame
from prefshap_core.explain.games.items import ItemGame
from prefshap_core.explain.games.sides import SidesGame, side_player_data
from prefshap_core.explain.options import ExplainOptions
from prefshap_core.explain.player_data import context_columns, player_differences
from prefshap_core.explain.shapley.coalitions import (
    CoalitionSet,
    all_coalitions,
    bits_from_masks,
    choose_coalitions,
    coalition_count,
)
from prefshap_core.explain.shapley.exact import ExactShapley
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import SampledCoalitions
from prefshap_core.explain.uncertainty_pass import SdTracker, explanation_sds, start_tracking
from prefshap_core.models.hyperparameters import DEFAULT_CME_LAMBDA, DEFAULT_CONTEXT_CME_LAMBDA
from prefshap_core.models.preference_function import as_preference_function
from prefshap_core.progress import Progress, ensure_progress


class Explainer:
    """Pref-SHAP values of a model's item or context groups for any duels.

    ``model``: a fitted estimator or a :class:`PreferenceFunction`; ``options``: what
    to explain and how (:class:`ExplainOptions`); ``compute``: device and dtype;
    ``stats``: an :class:`EngineStats` to collect seconds and flops per part.
    """

    def __init__(
        self,
        model: Any,
        options: ExplainOptions | None = None,
        *,
        compute: Compute | None = None,
        stats: EngineStats | None = None,
    ) -> None:
        self.function = as_preference_function(model)
        self.options = options or ExplainOptions()
        self.compute = compute or Compute()
        self.stats = stats
        self._game: Game | None = None
        self._backend: CMEBackend | None = None
        # Calls share the kept factorizations: one at a time per explainer.
        self._lock = threading.RLock()
        if self.options.what == "context" and self.function.kind != "cgpm":
            raise ValueError(
                f"context explanations need a C-GPM, not a {self.function.kind!r} model"
            )

    # -- public ------------------------------------------------------------------------
    def __call__(
        self,
        left: np.ndarray,
        right: np.ndarray,
        *,
        contexts: np.ndarray | None = None,
        winners: np.ndarray | None = None,
        duel_ids: np.ndarray | None = None,
        progress: Progress | None = None,
    ) -> Explanation:
        """Shapley values of each duel ``left[i]`` vs ``right[i]`` (see the module docstring).

        ``left``/``right``: item ids, pool rows (integers) or model-space covariate rows
        (duels, d); ``contexts``: model-space context rows (duels, d'), needed for
        ``what="context"``; ``winners``: +1 left won, -1 right won, 0 unknown.
        """
        with self._lock:
            return self._explain(left, right, contexts, winners, duel_ids, progress)

    def _explain(
        self,
        left: np.ndarray,
        right: np.ndarray,
        contexts: np.ndarray | None,
        winners: np.ndarray | None,
        duel_ids: np.ndarray | None,
        progress: Progress | None,
    ) -> Explanation:
        start = time.perf_counter()
        progress = ensure_progress(progress)
        fn, options = self.function, self.options
        left_side, right_side = resolve_side(fn, left, "left"), resolve_side(fn, right, "right")
        n = len(left_side.rows)
        if len(right_side.rows) != n:
            raise DataValidationError("left and right need one entry per duel")
        winners = np.zeros(n, np.int8) if winners is None else np.sign(winners).astype(np.int8)
        duel_ids = np.arange(n).astype(str) if duel_ids is None else np.asarray(duel_ids)
        if len(winners) != n or len(duel_ids) != n:
            raise DataValidationError("winners and duel_ids need one entry per duel")
        contexts = self._check_contexts(contexts, n)
        canon = canonical_duels(left_side.rows, right_side.rows, contexts)
        game = self._ensure_game(canon)
        p = game.space.n_groups
        n_samples = options.shapley.n_samples
        need = self._memory_need(n, coalition_count(p, options.exact_limit(), n_samples))
        with budget.reserve(need, f"Explaining {n:,} duels", budget.EXPLAIN_REDUCE):
            coalitions = choose_coalitions(p, options.exact_limit(), n_samples, options.seed)
            exact = isinstance(coalitions, CoalitionSet)
            estimator = ExactShapley(coalitions) if exact else SampledShapley(coalitions)
            stage = f"explaining {options.what} features"
            tracker = self._tracker(coalitions)
            try:
                base_u, outputs_u, (phi_u, se_u) = self._run(
                    canon, coalitions, estimator, progress, stage, tracker
                )
            finally:
                if tracker is not None:
                    self._game = game
            watched = None if tracker is None else tracker.finish(len(canon.batch.left))
        sign = canon.sign
        values = phi_u[canon.inverse] * sign[:, None]
        standard_errors = se_u[canon.inverse]
        swap = getattr(game, "side_swap", None)
        if swap is not None:  # side players: a swapped duel also exchanges the sides
            flip = sign < 0
            values[flip] = values[flip][:, swap]
            standard_errors[flip] = standard_errors[flip][:, swap]
        uncertainty = self._uncertainty(canon, coalitions, watched)
        space = game.space
        if options.what == "items":
            data, labels = player_differences(space, left_side.rows, right_side.rows)
            context_values = None
        elif options.what == "sides":
            data, labels = side_player_data(fn.item_space, left_side.rows, right_side.rows)
            context_values = None
        else:
            data = np.full((n, space.n_groups), np.nan)
            context_values, labels = context_columns(space, contexts)
        return Explanation(
            values=values,
            base_values=base_u[canon.inverse] * sign,
            outputs=outputs_u[canon.inverse] * sign,
            data=data,
            player_names=tuple(space.group_names),
            duel_ids=duel_ids.astype(str),
            left_ids=left_side.ids,
            right_ids=right_side.ids,
            winners=winners,
            standard_errors=standard_errors,
            what=options.what,
            data_labels=labels,
            context_values=context_values,
            meta=self._meta(coalitions, start, len(canon.batch.left)),
            **uncertainty,
        )

    def _tracker(self, coalitions: Any) -> SdTracker | None:
        """Watches the pass for the sds when asked for them (explain.uncertainty_pass)."""
        return start_tracking(self, coalitions) if self.options.uncertainty else None

    def _uncertainty(
        self, canon: CanonicalDuels, coalitions: Any, watched: Any = None
    ) -> dict[str, np.ndarray]:
        """sd, output_sd, base_value_sd per input duel when asked for (sign-free)."""
        if not self.options.uncertainty:
            return {}
        return explanation_sds(self, canon, coalitions, watched)

    def coalition_values(
        self,
        left: np.ndarray,
        right: np.ndarray,
        *,
        contexts: np.ndarray | None = None,
        progress: Progress | None = None,
    ) -> CoalitionTable:
        """The values of all ``2^p`` coalitions for each duel (for interactions, other games)."""
        with self._lock:
            return self._table(left, right, contexts, progress)

    def _table(
        self,
        left: np.ndarray,
        right: np.ndarray,
        contexts: np.ndarray | None,
        progress: Progress | None,
    ) -> CoalitionTable:
        fn = self.function
        left_side, right_side = resolve_side(fn, left, "left"), resolve_side(fn, right, "right")
        contexts = self._check_contexts(contexts, len(left_side.rows))
        canon = canonical_duels(left_side.rows, right_side.rows, contexts)
        game = self._ensure_game(canon)
        p = game.space.n_groups
        n = len(left_side.rows)
        # The whole table is kept (not reduced per batch): its copies are part of the need.
        table_bytes = budget.coalition_table_bytes(len(canon.batch.left), n, 2**p)
        need = self._memory_need(n, 2**p) + table_bytes
        with budget.reserve(need, "Coalition values", budget.EXPLAIN_REDUCE):
            coalitions = all_coalitions(p)
            *_, table = self._run(
                canon, coalitions, ValueTable(), ensure_progress(progress), "coalition values"
            )
        values = table[:, canon.inverse] * canon.sign[None, :]
        values += 0.0  # -0.0 (v(empty) of a swapped duel) to 0.0, as in Explanation
        swap = getattr(game, "side_swap", None)
        if swap is not None:  # a swapped duel's coalition (S_l, S_r) is the canonical (S_r, S_l)
            flip = canon.sign < 0
            codes = bits_from_masks(coalitions.masks[:, swap])
            values[:, flip] = values[codes][:, flip]
        return CoalitionTable(coalitions.masks, values, tuple(game.space.group_names))

    @property
    def cache_report(self) -> dict[str, Any]:
        return {} if self._backend is None else self._backend.report()

    # -- internals ---------------------------------------------------------------------
    def _check_contexts(self, contexts: np.ndarray | None, n: int) -> np.ndarray | None:
        if self.options.what != "context":
            return None
        space = self.function.context_space
        assert space is not None
        if contexts is None:
            raise DataValidationError("context explanations need one context row per duel")
        contexts = np.atleast_2d(np.asarray(contexts, dtype=np.float64))
        if contexts.shape != (n, space.n_features):
            raise DataValidationError(
                f"contexts must be (duels, {space.n_features}), got {contexts.shape}"
            )
        return contexts

    def _memory_need(self, n_duels: int, n_coalitions: int) -> int:
        """Peak bytes of explaining ``n_duels`` duels (checked before allocating)."""
        assert self._game is not None and self._backend is not None
        problem = self._game.problem
        n_features = self.function.item_space.n_features + (
            0 if self.function.context_space is None else self.function.context_space.n_features
        )
        cme = self._backend.workspace_bytes(len(problem.pool), len(problem.centres), n_coalitions)
        cme += class_cache_bytes(len(problem.pool) + len(problem.centres), n_coalitions)
        return budget.explain_bytes(
            n_duels, self._game.space.n_groups, n_coalitions, cme, n_features
        )

    def _ensure_game(self, canon: CanonicalDuels) -> Game:
        if self._game is not None:
            return self._game
        fn, options = self.function, self.options
        game: Game
        if options.what in ("items", "sides"):
            lam = usable_regulariser(
                fn.cme_lambda if options.cme_lambda is None else options.cme_lambda,
                DEFAULT_CME_LAMBDA,
            )
            game_type = ItemGame if options.what == "items" else SidesGame
            game = game_type(fn, self.compute, lam, self.stats)
            n_queries = len(canon.batch.items)
        else:
            lam = usable_regulariser(
                fn.context_cme_lambda if options.cme_lambda is None else options.cme_lambda,
                DEFAULT_CONTEXT_CME_LAMBDA,
            )
            game = ContextGame(fn, self.compute, lam, self.stats)
            assert canon.batch.contexts is not None
            n_queries = len(canon.batch.contexts)
        p = game.space.n_groups
        n_coalitions = coalition_count(p, options.exact_limit(), options.shapley.n_samples)
        # The side game embeds each side's coalitions, not the pairs: size the CMEs by them.
        n_embeddings = getattr(game, "n_embeddings", None)
        self._backend = make_backend(
            options.cme,
            game.problem,
            n_queries,
            n_coalitions if n_embeddings is None else n_embeddings(n_coalitions),
            self.compute,
            options.factor_cache_bytes,
        )
        game.use(self._backend)
        self._game = game
        return game

    def _run(
        self,
        canon: CanonicalDuels,
        coalitions: CoalitionSet | SampledCoalitions,
        estimator: Any,
        progress: Progress,
        stage: str,
        tracker: SdTracker | None = None,
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Boundary values and the estimator's result for every distinct duel.

        ``tracker``: sds are collected too, so duel groups are also bounded by its
        per-centre values (p x duels x M; the split changes no number).
        """
        assert self._game is not None and self._backend is not None
        game, options = self._game, self.options
        self._backend.begin_call()
        v_empty, v_full = game.boundary(canon.batch)
        executor = options.executor or LocalExecutor()
        batch_size = options.coalition_batch or (8 if self.compute.device.startswith("cuda") else 1)
        # The partition depends on the options only: every executor reduces the same
        # batches in the same order, so they all give the same numbers.
        # The side game embeds each distinct side coalition once per batch: one batch.
        per_task = options.task_coalitions or (
            None
            if options.what == "sides"
            else default_task_coalitions(coalitions.n_coalitions, coalitions.n_players)
        )
        slices = coalition_slices(coalitions.n_coalitions, per_task)
        width = coalitions.n_coalitions
        if tracker is not None:
            width = max(width, coalitions.n_players * self.function.n_centres)
        groups = bounded_duel_groups(len(v_full), width)
        results = []
        for g, rows in enumerate(groups):
            span = progress.span(g / len(groups), (g + 1) / len(groups))
            done = [0]

            def on_batch(f: float, span: Progress = span, done: list[int] = done) -> None:
                span.update(stage, min(1.0, (done[0] + f) / len(slices)))

            def on_done(k: int, span: Progress = span, done: list[int] = done) -> None:
                done[0] = k
                span.update(stage, k / len(slices))

            work = CoalitionWork(
                game=game,
                batch=canon.batch.subset(rows),
                masks=coalitions.masks,
                estimator=estimator,
                v_empty=v_empty[rows],
                v_full=v_full[rows],
                coalition_batch=batch_size,
                on_batch=on_batch,
            )
            partials = executor.map(work, slices, on_done)
            phi = None
            if getattr(estimator, "passes", 1) == 2:  # sampled: the errors need phi
                phi = estimator.solve_partials(partials, v_empty[rows], v_full[rows])
                partials = executor.map(work.second_pass(phi), slices)
            results.append(estimator.finish(partials, v_empty[rows], v_full[rows], phi))
        return v_empty, v_full, join_group_results(results)

    def _meta(
        self, coalitions: CoalitionSet | SampledCoalitions, start: float, n_unique: int
    ) -> dict[str, Any]:
        options, compute = self.options, self.compute
        timings = {} if self.stats is None else {"seconds_by_part": dict(self.stats.seconds)}
        game = self._game
        assert game is not None and self._backend is not None
        return {
            **timings,
            "shapley": "exact" if isinstance(coalitions, CoalitionSet) else "sampled",
            "n_players": coalitions.n_players,
            "n_coalitions": coalitions.n_coalitions,
            "seconds": time.perf_counter() - start,
            "dtype": compute.dtype,
            "device": compute.device,
            "model_kind": self.function.kind,
            "n_unique_duels": n_unique,
            "n_samples": options.shapley.n_samples,
            "seed": options.seed,
            "cme_lambda": game.problem.cme_lambda,
            "cme": self._backend.report(),
            "options": options.key(),
        }
