"""Every coalition's value per duel: the table the explainer returns for exact runs.

:class:`ValueTable` is the pass-through 'estimator' that the explainer runs over the
coalition batches to collect it (interactions and other games start from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CoalitionTable:
    """The values of every coalition for each duel, left-vs-right (exact runs).

    ``masks[k, i]``: player ``i`` in coalition ``k`` (all ``2^p`` in bit order);
    ``values[k, j]``: ``v(S_k)`` of duel ``j``, boundary rows included.
    """

    masks: np.ndarray  # (2^p, p) bool
    values: np.ndarray  # (2^p, D) float64
    player_names: tuple[str, ...]


class ValueTable:
    """An 'estimator' that keeps the coalition values themselves."""

    passes = 1

    def partial(self, values: np.ndarray, rows: slice, *_: Any) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def finish(self, partials: list[np.ndarray], *_: Any) -> np.ndarray:
        return np.vstack(partials)
