"""The executor seam: where the coalition batches of an explanation are evaluated.

The explainer cuts each group of distinct duels into batches of coalitions and
hands them to an executor as one *work* object (picklable: the game, the duels, the
masks and the Shapley estimator) and a list of row slices (:func:`coalition_slices`:
a partition that depends on the options only, never on the executor).

* One-pass estimators (exact values, value tables): ``work(rows)`` evaluates those
  coalitions and returns ``estimator.partial(values, rows)`` (for exact values
  ``A[:, rows] v[rows]``, p x duels, not the values themselves);
  ``Executor.map`` returns them in the order of the slices and
  ``estimator.finish(partials, v_empty, v_full)`` reduces them in that order.
* Two-pass estimators (sampled values with standard errors: the residuals need the
  fitted values): ``Executor.keep`` evaluates every batch once and keeps its values
  where they were computed; ``reduce`` then maps a small reducer over them twice
  (``partial_statistics`` without, then with the solved ``phi``), and only those
  statistics travel back (:func:`run_estimator`).

Either way every executor gives the same numbers for the same partition.
:class:`LocalExecutor` (the default) runs the batches here, one after the other;
:class:`~prefshap_core.explain.dask_executor.DaskExecutor` runs them on a cluster.
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
    estimator: Any  # ExactShapley | KernelShapley (partial / finish)
    v_empty: np.ndarray  # (D,)
    v_full: np.ndarray  # (D,)
    coalition_batch: int = 1
    on_batch: OnBatch | None = None  # progress inside this process only

    def values(self, rows: slice, game: Game | None = None) -> np.ndarray:
        """(rows, D) coalition values; the boundary coalitions by definition.

        ``game``: the game to bind when this work travelled without its own (a cluster
        worker keeps one copy of the game for every work object it is sent).
        """
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
        return self.estimator.partial(self.values(rows), rows)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["on_batch"] = None  # a progress callback never travels
        state.pop("_bound", None)
        return state


Reducer = Callable[[np.ndarray, slice], Any]


class KeptValues(Protocol):
    """The coalition values of every batch, kept where they were computed."""

    def reduce(self, reducer: Reducer) -> list[Any]:
        """``[reducer(values_b, b) for b in batches]`` in order."""
        ...

    def release(self) -> None: ...


class Executor(Protocol):
    def map(
        self,
        work: CoalitionWork,
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """``[work(b) for b in batches]`` in order; ``on_done(k)`` after k finished."""
        ...

    def keep(
        self,
        work: CoalitionWork,
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> KeptValues:
        """``work.values(b)`` of every batch, kept for :meth:`KeptValues.reduce`."""
        ...


class LocalExecutor:
    """Runs every batch in this process, in order (the default executor)."""

    def map(
        self,
        work: CoalitionWork,
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        out = []
        for k, rows in enumerate(batches):
            out.append(work(rows))
            if on_done is not None:
                on_done(k + 1)
        return out

    def keep(
        self,
        work: CoalitionWork,
        batches: Sequence[slice],
        on_done: Callable[[int], None] | None = None,
    ) -> KeptValues:
        values = []
        for k, rows in enumerate(batches):
            values.append(work.values(rows))
            if on_done is not None:
                on_done(k + 1)
        return _LocalValues(values, list(batches))


class _LocalValues:
    def __init__(self, values: list[np.ndarray], batches: list[slice]) -> None:
        self._values, self._batches = values, batches

    def reduce(self, reducer: Reducer) -> list[Any]:
        return [reducer(v, rows) for v, rows in zip(self._values, self._batches, strict=True)]

    def release(self) -> None:
        self._values = []


@dataclass(frozen=True)
class PassStatistics:
    """A reducer of a two-pass estimator: ``partial_statistics`` of one batch (picklable).

    ``phi`` ``None``: the first pass; else the second, around those values.
    """

    estimator: Any
    v_empty: np.ndarray
    v_full: np.ndarray
    phi: np.ndarray | None = None

    def __call__(self, values: np.ndarray, rows: slice) -> np.ndarray:
        index = np.arange(rows.start, rows.stop)
        return self.estimator.partial_statistics(
            values, index, self.v_empty, self.v_full, phi=self.phi
        )


def run_estimator(
    executor: Executor,
    work: CoalitionWork,
    batches: Sequence[slice],
    on_done: Callable[[int], None] | None = None,
) -> Any:
    """The estimator's result for ``work`` over ``batches``, reduced in batch order.

    Two-pass estimators (with ``partial_statistics``, ``solve`` and ``finish(second,
    phi)``) keep their values where they ran and send back only the statistics of
    each pass; the others map ``work`` once and ``finish(partials, v_empty, v_full)``.
    """
    estimator, v_empty, v_full = work.estimator, work.v_empty, work.v_full
    if not hasattr(estimator, "partial_statistics"):
        return estimator.finish(executor.map(work, batches, on_done), v_empty, v_full)
    kept = executor.keep(work, batches, on_done)
    try:
        first = _ordered_sum(kept.reduce(PassStatistics(estimator, v_empty, v_full)))
        phi = estimator.solve(first, v_empty, v_full)
        second = _ordered_sum(kept.reduce(PassStatistics(estimator, v_empty, v_full, phi)))
    finally:
        kept.release()
    return estimator.finish(second, phi)


def _ordered_sum(parts: list[np.ndarray]) -> np.ndarray:
    total = np.asarray(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total = total + part
    return total


# Coalitions per task when the options do not say: at least 4 per player, so a task's
# statistics (p x duels) are at most a quarter of its values, and at most
# _TASKS_PER_GROUP tasks per duel group (spread over a cluster's workers).
_TASKS_PER_GROUP = 32


def default_task_coalitions(n_coalitions: int, n_players: int) -> int:
    """Coalitions per task for ``task_coalitions=None`` (the same for every executor)."""
    return max(4 * n_players, -(-n_coalitions // _TASKS_PER_GROUP))


def coalition_slices(n_coalitions: int, per_task: int) -> list[slice]:
    """The partition of ``range(n_coalitions)`` into tasks of ``per_task`` rows.

    ``per_task`` is rounded up to an even number: a task then holds whole
    complementary pairs (rows ``2t``, ``2t + 1``), as the sampled estimators' second
    pass needs.
    """
    size = max(2, per_task + per_task % 2)
    return [slice(s, min(s + size, n_coalitions)) for s in range(0, n_coalitions, size)]
