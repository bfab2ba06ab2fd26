"""The executor seam: where the coalition batches of an explanation are evaluated.

The explainer cuts each group of distinct duels into batches of coalitions and
hands them to an executor as one *work* object (picklable: the game, the duels, the
masks and the Shapley estimator) and a list of row slices. ``work(rows)`` evaluates
those coalitions and returns the estimator's partial statistics (for exact values
``A[:, rows] v[rows]``, p x duels, not the values themselves); the executor
returns them in the order of the slices, and the estimator reduces them in that
order, so every executor gives the same numbers for the same partition. Sampled
values take two passes (the standard errors need the fitted values): the same
slices again through ``work.second_pass(phi)``, whose values are kept from the
first pass where the same process ran it. :class:`LocalExecutor` (the default) runs
them here, one after the other;
:class:`~prefshap_core.explain.dask_executor.DaskExecutor` runs them on a cluster
(keeping each batch's values on its worker between the passes). The partition comes
from the options alone (:func:`default_task_coalitions`), never from the executor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prefshap_core.explain.games.base import DuelBatch, Game, OnBatch


@dataclass
class CoalitionWork:
    """Evaluate coalitions ``masks[rows]`` for ``batch`` and reduce them to partial sums."""

    game: Game
    batch: DuelBatch
    masks: np.ndarray  # (K, p) every coalition of the explanation
    estimator: Any  # ExactShapley | SampledShapley (partial / finish)
    v_empty: np.ndarray  # (D,)
    v_full: np.ndarray  # (D,)
    coalition_batch: int = 1
    on_batch: OnBatch | None = None  # progress inside this process only
    phi: np.ndarray | None = None  # (D, p) for a two-pass estimator's second pass

    def values(self, rows: slice, game: Game | None = None) -> np.ndarray:
        """(rows, D) coalition values; the boundary coalitions by definition.

        ``game``: the game to bind when this work travelled without its own (a cluster
        worker keeps one copy of the game for all the work it is sent).
        """
        kept = self.__dict__.setdefault("_kept", {})
        if rows.start in kept:
            return kept[rows.start]
        values = self.evaluate(rows, game)
        if getattr(self.estimator, "passes", 1) > 1:
            kept[rows.start] = values  # the second pass needs them again
        return values

    def evaluate(self, rows: slice, game: Game | None = None) -> np.ndarray:
        """The values of ``rows``, computed now (not kept: see :meth:`values`)."""
        masks = self.masks[rows]
        sizes = masks.sum(1)
        p = masks.shape[1]
        values = np.empty((len(masks), self.batch.n_duels))
        values[sizes == 0] = self.v_empty
        values[sizes == p] = self.v_full
        proper = (sizes > 0) & (sizes < p)
        if proper.any():
            bound = self.__dict__.get("_bound")
            if bound is None:  # bound once per process: universes, kernels to the queries
                game = game if game is not None else self.game
                bound = self.__dict__["_bound"] = game.bind(self.batch)
            values[proper] = bound.values(masks[proper], self.coalition_batch, self.on_batch)
        return values

    def __call__(self, rows: slice) -> Any:
        values = self.values(rows)
        return self.estimator.partial(values, rows, self.v_empty, self.v_full, self.phi)

    def second_pass(self, phi: np.ndarray) -> CoalitionWork:
        """The same work with ``phi`` known, sharing the kept values and bound game."""
        other = object.__new__(CoalitionWork)
        other.__dict__.update(self.__dict__)  # not copy.copy: __getstate__ drops the kept
        other.phi = phi
        return other

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["on_batch"] = None  # a progress callback never travels
        state.pop("_bound", None)
        state.pop("_kept", None)
        return state


class Executor(Protocol):
    def map(
        self,
        work: Callable[[slice], Any],
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """``[work(b) for b in batches]`` in order; ``on_done(k)`` after k finished."""
        ...


class LocalExecutor:
    """Runs every batch in this process, in order (the default executor)."""

    def map(
        self,
        work: Callable[[slice], Any],
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        out = []
        for k, rows in enumerate(batches):
            out.append(work(rows))
            if on_done is not None:
                on_done(k + 1)
        return out


# Coalitions per task when the options do not say: at least 4 per player, so a task's
# statistics (p x duels) are at most a quarter of its values, and at most
# _TASKS_PER_GROUP tasks per duel group (spread over a cluster's workers).
_TASKS_PER_GROUP = 32


def default_task_coalitions(n_coalitions: int, n_players: int) -> int:
    """Coalitions per task for ``task_coalitions=None`` (the same for every executor)."""
    return max(4 * n_players, -(-n_coalitions // _TASKS_PER_GROUP))


def coalition_slices(n_coalitions: int, per_task: int | None) -> list[slice]:
    """The partition of ``range(n_coalitions)`` into tasks of ``per_task`` rows.

    Rounded up to an even size: sampled coalitions come in pairs (rows 2t, 2t + 1)
    that a task must not split.
    """
    size = n_coalitions if per_task is None else max(2, per_task + per_task % 2)
    return [slice(s, min(s + size, n_coalitions)) for s in range(0, n_coalitions, size)]
