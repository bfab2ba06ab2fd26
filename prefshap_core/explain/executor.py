"""The executor seam: where the coalition batches of an explanation are evaluated.

The explainer cuts each group of distinct duels into batches of coalitions and
hands them to an executor as one *work* object (picklable: the game, the duels, the
masks and the Shapley estimator) and a list of row slices. ``work(rows)`` evaluates
those coalitions and returns the estimator's partial statistics (for exact values
``A[:, rows] v[rows]``, p x duels, not the values themselves); the executor
returns them in the order of the slices, and the estimator's ``finish`` reduces
them in that order, so every executor gives the same numbers for the same
partition. :class:`LocalExecutor` (the default) runs them here, one after the
other; a cluster executor runs them elsewhere (issue: Dask backend).
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

    def values(self, rows: slice) -> np.ndarray:
        """(rows, D) coalition values; the boundary coalitions by definition."""
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
                bound = self.__dict__["_bound"] = self.game.bind(self.batch)
            values[proper] = bound.values(masks[proper], self.coalition_batch, self.on_batch)
        return values

    def __call__(self, rows: slice) -> Any:
        return self.estimator.partial(self.values(rows), rows)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["on_batch"] = None  # a progress callback never travels
        state.pop("_bound", None)
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


def coalition_slices(n_coalitions: int, per_task: int | None) -> list[slice]:
    """The partition of ``range(n_coalitions)`` into tasks of ``per_task`` rows."""
    size = n_coalitions if per_task is None else max(1, per_task)
    return [slice(s, min(s + size, n_coalitions)) for s in range(0, n_coalitions, size)]
