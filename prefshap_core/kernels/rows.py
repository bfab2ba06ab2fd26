"""Distinct rows as a kernel sees them: ``-0.0`` and ``0.0`` are the same row.

Equal rows have equal kernel columns and equal coalition embeddings, so the engine
evaluates each distinct row once (the model's centres, the pool, query rows) and
gathers: the model's games, the CME backends and the regulariser search all
deduplicate through :func:`unique_rows`.
"""

from __future__ import annotations

import numpy as np


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (``-0.0`` and ``0.0`` equal) and each input row's index among them."""
    rows = np.ascontiguousarray(np.asarray(rows, dtype=np.float64) + 0.0)
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1).astype(np.int64)
