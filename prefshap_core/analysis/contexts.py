"""Observed contexts grouped by one context group's value.

"P(A beats B) per category of a context group" averages the model over the
observed contexts that have that category, weighted by how often each occurred:
the other context columns take their observed mix for that category. With every
category's weights together this is the model's own context average (g_bar).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.data.duel_data import DuelData
from prefshap_core.data.encoding.spec import EncodingSpec
from prefshap_core.data.feature_space import FeatureSpace

# A numeric context column with at most this many distinct observed values is shown
# value by value; beyond, it has no "each value" (it is averaged like the others).
MAX_NUMERIC_VALUES = 12


@dataclass(frozen=True)
class ContextSlice:
    """The observed contexts having one value of one context group."""

    group: str  # the context group (Shapley player) name, e.g. "tourney_surface"
    value: str  # its category or numeric value, e.g. "Clay"
    weights: np.ndarray  # (p,) weight of each observed context (0 outside the slice)

    @property
    def label(self) -> str:
        return f"{self.group} = {self.value}"


def _group_values(space: FeatureSpace, raw: np.ndarray, group: int) -> np.ndarray | None:
    """(p,) the group's value per context row as text, or None (too many numbers)."""
    cols = space.group_columns(group)
    name = space.group_names[group]
    prefix = f"{name}="
    names = [space.feature_names[j] for j in cols]
    if len(cols) == 1 and not names[0].startswith(prefix):
        values = raw[:, cols[0]]
        if len(np.unique(values)) > MAX_NUMERIC_VALUES:
            return None
        return np.array([f"{v:g}" for v in values], dtype=object)
    categories = [n[len(prefix) :] if n.startswith(prefix) else n for n in names]
    block = raw[:, cols] >= 0.5
    return np.array(
        [
            "+".join(c for c, on in zip(categories, row, strict=True) if on) or "none"
            for row in block
        ],
        dtype=object,
    )


def context_slices(
    space: FeatureSpace, contexts: np.ndarray, weights: np.ndarray
) -> list[ContextSlice]:
    """One slice per (context group, observed value), groups in order, values sorted.

    ``contexts``: (p, d') unique observed context rows (model space); ``weights``: how
    often each occurred. Numeric groups with many distinct values are left out.
    """
    raw = space.to_raw(contexts)
    weights = np.asarray(weights, dtype=np.float64)
    out = []
    for g, name in enumerate(space.group_names):
        values = _group_values(space, raw, g)
        if values is None:
            continue
        for value in sorted(set(values.tolist()), key=_value_order):
            out.append(ContextSlice(name, value, np.where(values == value, weights, 0.0)))
    return out


def _value_order(value: str) -> tuple[int, float, str]:
    """Numbers by size, then texts alphabetically."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def data_context_labels(data: DuelData) -> np.ndarray | None:
    """(p,) the data's observed contexts labelled ``"column = value, ..."`` (None
    without contexts): what tables and captions of duels show for their context."""
    if not data.has_context or data.context_space is None or data.contexts is None:
        return None
    labels = context_row_labels(data.context_space, data.contexts, data.context_encoding)
    return np.array(labels, dtype=object)


def context_row_labels(
    space: FeatureSpace, contexts: np.ndarray, spec: EncodingSpec | None = None
) -> list[str]:
    """A readable label per context row naming each column, e.g.
    ``"indoor = Outdoor, surface = Clay"`` (a numeric column ``"temp = 25.5"``, an
    unknown value ``"surface = ?"``): a bare ``"Outdoor / Clay"`` does not say which
    column a value is of."""
    spec = spec or EncodingSpec.from_feature_space(space, "context")
    raw = space.to_raw(np.atleast_2d(contexts))
    parts = []
    for group in spec.groups:
        block = raw[:, space.group_columns(group.name)]
        unknown = block[:, -1] > 0.5 if group.missing_indicator else np.zeros(len(raw), bool)
        if group.kind == "numeric":
            values = [f"{value:g}" for value in block[:, 0]]
        else:
            n = len(group.categories)
            values = [
                "+".join(c for c, on in zip(group.categories, r, strict=True) if on) or "none"
                for r in block[:, :n] > 0.5
            ]
        parts.append(
            [f"{group.name} = {'?' if u else v}" for v, u in zip(values, unknown, strict=True)]
        )
    return [", ".join(p) for p in zip(*parts, strict=True)] if parts else [""] * len(raw)
