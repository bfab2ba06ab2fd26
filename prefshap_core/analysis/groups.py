"""Duels between two groups of items, seen from one of them.

A group is a condition on one raw item column: a category (``Type 1 == Fire``) or a
numeric range (``Speed > 100``). "Why does group A beat group B" is the explanation
of the duels between them oriented to A's side (positive values push towards the
A item), with A's wins and losses in those duels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.duel_data import DuelData
from prefshap_core.explain.explanation import Explanation

OPERATORS = (">", ">=", "<", "<=", "==")


@dataclass(frozen=True)
class ItemCondition:
    """``column <op> value``; ``value`` is a category for ``==``, a number otherwise."""

    column: str
    op: str
    value: str | float

    @property
    def label(self) -> str:
        value = self.value if isinstance(self.value, str) else f"{self.value:g}"
        return f"{self.column} {'=' if self.op == '==' else self.op} {value}"


def item_mask(data: DuelData, condition: ItemCondition | None) -> np.ndarray:
    """(n_items,) which items satisfy ``condition`` (all of them for None)."""
    if condition is None:
        return np.ones(data.n_items, dtype=bool)
    if data.raw_items is None or condition.column not in data.raw_items.columns:
        raise KeyError(f"no item column {condition.column!r}")
    if condition.op not in OPERATORS:
        raise ValueError(f"op must be one of {OPERATORS}, got {condition.op!r}")
    column = data.raw_items[condition.column]
    if condition.op == "==":
        return (column.astype(str).str.strip() == str(condition.value)).to_numpy()
    numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    threshold = float(condition.value)
    with np.errstate(invalid="ignore"):
        hit = {
            ">": numbers > threshold,
            ">=": numbers >= threshold,
            "<": numbers < threshold,
            "<=": numbers <= threshold,
        }[condition.op]
    return hit & np.isfinite(numbers)


def duels_between(
    data: DuelData, mask_a: np.ndarray, mask_b: np.ndarray, within: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(duel indices, signs): duels of an A item against a B item; sign +1 where the
    left item plays for A (left in A and right in B), -1 where the right one does."""
    idx = np.arange(data.n_duels) if within is None else np.asarray(within, dtype=np.int64)
    left, right = data.left[idx], data.right[idx]
    a_left = mask_a[left] & mask_b[right]
    a_right = mask_a[right] & mask_b[left]
    keep = a_left | a_right
    return idx[keep], np.where(a_left[keep], 1, -1).astype(np.int8)


def group_record(data: DuelData, duels: np.ndarray, signs: np.ndarray) -> tuple[int, int]:
    """(wins, losses) of group A in ``duels`` (signs from :func:`duels_between`)."""
    won = data.y[duels] * signs > 0
    return int(won.sum()), int((~won).sum())


def orient_to_group(
    expl: Explanation, data: DuelData, mask_a: np.ndarray, mask_b: np.ndarray, label: str
) -> Explanation:
    """``expl`` (duels between A and B) with each duel seen from its A item."""
    index = {str(i): k for k, i in enumerate(data.item_ids)}
    left = np.array([index[str(i)] for i in expl.left_ids], dtype=np.int64)
    right = np.array([index[str(i)] for i in expl.right_ids], dtype=np.int64)
    signs = np.where(mask_a[left] & mask_b[right], 1, -1)
    return expl.reoriented(signs, f"side:{label}")
