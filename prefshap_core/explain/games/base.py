"""The game seam: a cooperative game over feature groups, evaluated for batches of duels.

A game turns coalition masks into values ``v(S)`` for the distinct duels of a
:class:`DuelBatch` (docs/method.md, "Value functions"). The explainer only sees this
interface: the Shapley solver (:mod:`prefshap_core.explain.shapley`) and the CME
backends (:mod:`prefshap_core.explain.cme`) know nothing about duels, and a new
game (side-aware players, another reference distribution) needs no change there.

Every game is built once per explainer and model (its coalition embeddings keep
their factorizations across calls), then bound to one batch of duels at a time:

    game.use(backend)                  # how its CMEs are solved
    v_empty, v_full = game.boundary(batch)
    values = game.bind(batch).values(masks, coalition_batch, on_batch)   # (K, D)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.cme.backends import CMEBackend
from prefshap_core.explain.cme.base import CMEProblem

OnBatch = Callable[[float], None]


@dataclass(frozen=True)
class DuelBatch:
    """Distinct duels as rows of their own query tables (model space)."""

    items: np.ndarray  # (Q, d) query item rows
    left: np.ndarray  # (D,) row of items of each duel's left side
    right: np.ndarray  # (D,)
    contexts: np.ndarray | None = None  # (C, d') query context rows
    context: np.ndarray | None = None  # (D,) row of contexts of each duel

    @property
    def n_duels(self) -> int:
        return len(self.left)

    def subset(self, rows: np.ndarray) -> DuelBatch:
        """The duels ``rows`` of this batch, with query tables cut to what they use."""
        items, item_index = np.unique(
            np.concatenate([self.left[rows], self.right[rows]]), return_inverse=True
        )
        item_index = item_index.reshape(-1)
        n = len(rows)
        contexts = context = None
        if self.contexts is not None and self.context is not None:
            used, context = np.unique(self.context[rows], return_inverse=True)
            contexts, context = self.contexts[used], context.reshape(-1)
        return DuelBatch(self.items[items], item_index[:n], item_index[n:], contexts, context)


class BoundGame(Protocol):
    def values(
        self, masks: np.ndarray, coalition_batch: int, on_batch: OnBatch | None = None
    ) -> np.ndarray: ...


class Game(Protocol):
    """``v(S)`` of coalitions of ``space``'s groups for duels of a batch."""

    what: str
    space: FeatureSpace
    problem: CMEProblem

    def use(self, backend: CMEBackend) -> None: ...

    def boundary(self, batch: DuelBatch) -> tuple[np.ndarray, np.ndarray]: ...

    def bind(self, batch: DuelBatch) -> BoundGame: ...
