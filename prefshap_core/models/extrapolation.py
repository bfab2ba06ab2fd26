"""Covariates outside the training range: where a model's answer is an extrapolation.

The range of a column is the observed pool's minimum and maximum (the items, and a
C-GPM's observed contexts): beyond it an RBF model decays towards its prior and its
probabilities stop meaning anything (P(price 20,000) = 0.000 but P(price 50,000) =
0.108 on one model). The Python API warns (:class:`ExtrapolationWarning`); the CLI
refuses unless ``--allow-extrapolation``; the dashboard's what-if form keeps values in
range. Messages give the column, the value and the range in raw units.
"""

from __future__ import annotations

import warnings

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace

MAX_NAMED = 5  # columns named in one message; the rest are counted


class ExtrapolationWarning(UserWarning):
    """A covariate or context value outside the observed pool's range."""


def outside_range(space: FeatureSpace, pool: np.ndarray, rows: np.ndarray, what: str) -> list[str]:
    """One line per column of ``rows`` (model space) with a value outside ``pool``'s
    per-column min/max, in raw units: ``"item column price = 50000 (range 10 to 900)"``."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    pool = np.atleast_2d(np.asarray(pool, dtype=np.float64))
    if rows.size == 0 or pool.size == 0:
        return []
    low, high = pool.min(axis=0), pool.max(axis=0)
    slack = 1e-9 * np.maximum(1.0, high - low)  # raw -> model rounding is not extrapolation
    below, above = rows < (low - slack), rows > (high + slack)
    out: list[str] = []
    raw_low, raw_high, raw = space.to_raw(low), space.to_raw(high), space.to_raw(rows)
    for j in np.flatnonzero((below | above).any(axis=0)):
        column = rows[:, j]
        worst = int(np.argmax(np.maximum(low[j] - column, column - high[j])))
        out.append(
            f"{what} column {space.feature_names[j]} = {raw[worst, j]:.6g} "
            f"(training range {raw_low[j]:.6g} to {raw_high[j]:.6g})"
        )
    return out


def describe(problems: list[str]) -> str:
    """The lines of :func:`outside_range` as one sentence (the first few named)."""
    named = "; ".join(problems[:MAX_NAMED])
    more = len(problems) - MAX_NAMED
    return named + (f"; and {more} more column(s)" if more > 0 else "")


def warn_if_outside(problems: list[str], *, stacklevel: int = 3) -> None:
    """An :class:`ExtrapolationWarning` naming the columns, if any."""
    if problems:
        warnings.warn(
            "evaluating outside the training range, where the model extrapolates: "
            + describe(problems),
            ExtrapolationWarning,
            stacklevel=stacklevel,
        )
