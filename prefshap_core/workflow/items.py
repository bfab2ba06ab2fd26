"""One item: its record of duels, and finding items by id or name ("A vs B")."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.analysis.contexts import data_context_labels
from prefshap_core.data.duel_data import DuelData
from prefshap_core.workflow.selections import duels_of_item


@dataclass(frozen=True)
class ItemRecord:
    item_id: str
    label: str
    n_duels: int
    wins: int
    losses: int
    duels: pd.DataFrame  # one row per duel: duel index, opponent, result, context
    ties: int = 0

    @property
    def wlt(self) -> str:
        """The record as wins-losses-ties, e.g. ``"12-7-3"``."""
        return f"{self.wins}-{self.losses}-{self.ties}"


def item_record(data: DuelData, item_id: str) -> ItemRecord:
    """An item's record: wins, losses and a table of its duels."""
    row = data.item_index(item_id)
    idx = duels_of_item(data, item_id)
    is_left = data.left[idx] == row
    opponent = np.where(is_left, data.right[idx], data.left[idx])
    won = np.where(is_left, data.y[idx] > 0, data.y[idx] < 0)
    tied = data.y[idx] == 0
    table = pd.DataFrame(
        {
            "duel": idx,
            "duel_id": data.duel_ids[idx],
            "opponent_id": data.item_ids[opponent],
            "opponent": np.asarray(data.labels)[opponent],
            "result": np.where(won, "won", np.where(tied, "tie", "lost")),
        }
    )
    labels = data_context_labels(data)
    if labels is not None and data.context_index is not None:
        table["context"] = labels[data.context_index[idx]]
    return ItemRecord(
        item_id=str(item_id),
        label=str(data.labels[row]),
        n_duels=len(idx),
        wins=int(won.sum()),
        losses=int((~won & ~tied).sum()),
        duels=table,
        ties=int(tied.sum()),
    )


def find_item(data: DuelData, text: str) -> str | None:
    """The id of the item named ``text`` (its id, or its label; case-insensitive)."""
    wanted = text.strip().casefold()
    ids = np.asarray(data.item_ids).astype(str)
    for candidates in (ids, np.asarray(data.labels).astype(str)):
        hits = np.flatnonzero(np.char.lower(candidates) == wanted)
        if len(hits):
            return str(ids[hits[0]])
    return None


def parse_pair(data: DuelData, text: str) -> tuple[str, str] | None:
    """``"A vs B"`` (names or ids, any case) -> the two item ids, or None if not a pair.

    Raises KeyError naming a side that matches no item."""
    parts = re.split(r"\s+vs\.?\s+", text.strip(), maxsplit=1, flags=re.IGNORECASE)
    if len(parts) != 2:
        return None
    found = [find_item(data, part) for part in parts]
    for part, item in zip(parts, found, strict=True):
        if item is None:
            raise KeyError(f"no item is named {part.strip()!r}")
    return found[0], found[1]  # type: ignore[return-value]


def duel_counts(data: DuelData) -> np.ndarray:
    """(n_items,) how many duels each item took part in."""
    return np.bincount(data.left, minlength=data.n_items) + np.bincount(
        data.right, minlength=data.n_items
    )


def most_active_first(data: DuelData) -> np.ndarray:
    """Item rows, the most duels first (ties: pool order), as pick lists show them."""
    return np.argsort(-duel_counts(data), kind="stable")
