"""Explanation: the one object every plot, table and export takes.

Values are stored *left-vs-right*: ``values[i, j] > 0`` means player ``j`` pushed duel
``i`` towards its left item. ``base_values + values.sum(1) == outputs`` always
(efficiency). A view re-orients duels, for example to their winners or to one item's
point of view, by swapping the two sides of chosen duels and negating everything
that is antisymmetric (values, data, base values, outputs), so in every view "left"
is the side being looked at and the identity above still holds.

``data[i, j]`` is ``x_left - x_right`` of player ``j`` in raw units (the colour of a
beehive point); in the winner view it is ``x_winner - x_loser``. Players made of
several columns (one-hot groups) have no single difference: NaN there, and
``data_labels`` (when given) says what met what, e.g. ``"Fire vs Water"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

WINNER_UNKNOWN = 0
# The float fields a view negates when it swaps a duel's sides.
_ANTISYMMETRIC = ("values", "base_values", "outputs", "data")


@dataclass(frozen=True, eq=False)
class Explanation:
    values: np.ndarray  # (q, p) float64
    base_values: np.ndarray  # (q,)
    outputs: np.ndarray  # (q,)
    data: np.ndarray  # (q, p) x_left - x_right per player (raw units), NaN for groups
    player_names: tuple[str, ...]
    duel_ids: np.ndarray  # (q,) str
    left_ids: np.ndarray  # (q,) str
    right_ids: np.ndarray  # (q,) str
    winners: np.ndarray  # (q,) int8: +1 left won, -1 right won, 0 unknown
    standard_errors: np.ndarray | None = None  # (q, p); 0 where exact
    what: str = "items"  # "items" | "context" | "sides" (left:<g> columns, then right:<g>)
    orientation: str = "left"  # "left" | "winner" | "item:<id>"
    left_labels: np.ndarray | None = None  # (q,) display names
    right_labels: np.ndarray | None = None
    data_labels: np.ndarray | None = None  # (q, p) str or None
    # (q, p) raw context value per player (what "context"; NaN for groups): a
    # context is shared by both sides, so views never flip it.
    context_values: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # Posterior sds (ExplainOptions(uncertainty=True)); None without a posterior.
    sd: np.ndarray | None = None  # (q, p), the shape of values
    output_sd: np.ndarray | None = None  # (q,)
    base_value_sd: np.ndarray | None = None  # (q,); 0 for items, sd of g_bar for context

    def __post_init__(self) -> None:
        q, p = np.shape(self.values)
        if len(self.player_names) != p:
            raise ValueError("one player name per column of values")
        for name in ("base_values", "outputs", "duel_ids", "left_ids", "right_ids", "winners"):
            if len(getattr(self, name)) != q:
                raise ValueError(f"{name} needs one entry per explained duel")
        if np.shape(self.data) != (q, p):
            raise ValueError("data must have the shape of values")
        # Orienting a duel multiplies by -1, so an exact zero (the items' base value, a
        # player equal on both sides) became -0.0 and exports printed "-0". Adding +0.0
        # turns -0.0 into 0.0 and leaves every other float as it is.
        for name in _ANTISYMMETRIC:  # required fields: never None
            object.__setattr__(self, name, np.asarray(getattr(self, name), np.float64) + 0.0)

    # -- sizes -------------------------------------------------------------------
    @property
    def n_duels(self) -> int:
        return int(np.shape(self.values)[0])

    @property
    def n_players(self) -> int:
        return len(self.player_names)

    # -- views -------------------------------------------------------------------
    def reoriented(self, signs: np.ndarray, orientation: str) -> Explanation:
        """Swap sides where ``signs == -1`` (negating the antisymmetric parts)."""
        s = np.asarray(signs, dtype=np.float64)
        flip = s < 0
        col = s[:, None]

        def swap(a: np.ndarray | None, b: np.ndarray | None) -> tuple[Any, Any]:
            if a is None or b is None:
                return a, b
            return np.where(flip, b, a), np.where(flip, a, b)

        left_ids, right_ids = swap(self.left_ids, self.right_ids)
        left_labels, right_labels = swap(self.left_labels, self.right_labels)
        values, data = self.values * col, self.data * col
        errors, data_labels, sd = self.standard_errors, self.data_labels, self.sd
        if self.what == "sides":  # left:<g> and right:<g> exchange places too
            values, data = _swap_sides(values, flip), _swap_sides(data, flip)
            errors, data_labels = _swap_sides(errors, flip), _swap_sides(data_labels, flip)
            sd = _swap_sides(sd, flip)
        return replace(
            self,
            values=values,
            sd=sd,
            data=data,
            standard_errors=errors,
            base_values=self.base_values * s,
            outputs=self.outputs * s,
            winners=(self.winners * s).astype(np.int8),
            left_ids=left_ids,
            right_ids=right_ids,
            left_labels=left_labels,
            right_labels=right_labels,
            data_labels=_swap_vs_labels(data_labels, flip),
            orientation=orientation,
        )

    def oriented_to_winner(self) -> Explanation:
        """Each duel seen from its winner (duels with unknown winner stay as they are)."""
        signs = np.where(self.winners == WINNER_UNKNOWN, 1, self.winners)
        return self.reoriented(signs, "winner")

    def from_point_of_view(self, item_id: str) -> Explanation:
        """Only the duels of ``item_id``, each seen from that item's side."""
        item_id = str(item_id)
        mine = (self.left_ids == item_id) | (self.right_ids == item_id)
        sub = self.subset(mine)
        signs = np.where(sub.left_ids == item_id, 1, -1)
        return sub.reoriented(signs, f"item:{item_id}")

    def losses_of(self, item_id: str) -> Explanation:
        """``item_id``'s lost duels, from its point of view (values push towards it)."""
        view = self.from_point_of_view(item_id)
        return view.subset(view.winners < 0)

    def wins_of(self, item_id: str) -> Explanation:
        view = self.from_point_of_view(item_id)
        return view.subset(view.winners > 0)

    def subset(self, rows: np.ndarray) -> Explanation:
        """Rows by boolean mask or integer indices, order kept."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)

        def take(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]

        return replace(
            self,
            values=self.values[rows],
            base_values=self.base_values[rows],
            outputs=self.outputs[rows],
            data=self.data[rows],
            duel_ids=self.duel_ids[rows],
            left_ids=self.left_ids[rows],
            right_ids=self.right_ids[rows],
            winners=self.winners[rows],
            standard_errors=take(self.standard_errors),
            left_labels=take(self.left_labels),
            right_labels=take(self.right_labels),
            data_labels=take(self.data_labels),
            context_values=take(self.context_values),
            sd=take(self.sd),
            output_sd=take(self.output_sd),
            base_value_sd=take(self.base_value_sd),
        )

    # -- summaries ---------------------------------------------------------------
    def mean_abs(self) -> np.ndarray:
        """(p,) mean |phi| per player (global importance)."""
        return np.abs(self.values).mean(axis=0) if self.n_duels else np.zeros(self.n_players)

    def mean(self) -> np.ndarray:
        """(p,) signed mean phi per player (direction, for a subset in a chosen view)."""
        return self.values.mean(axis=0) if self.n_duels else np.zeros(self.n_players)

    def efficiency_gap(self) -> float:
        """max |base + sum(values) - output|: 0 up to float rounding."""
        if not self.n_duels:
            return 0.0
        return float(np.max(np.abs(self.base_values + self.values.sum(1) - self.outputs)))

    def to_frame(self, standard_errors: bool = False) -> pd.DataFrame:
        """One row per duel: ids, winner, output, base value, one column per player."""
        frame = pd.DataFrame(
            {
                "duel_id": self.duel_ids,
                "left": self.left_ids,
                "right": self.right_ids,
                "winner": np.select(
                    [self.winners > 0, self.winners < 0],
                    [self.left_ids, self.right_ids],
                    default="",
                ),
                "output": self.outputs,
                "base_value": self.base_values,
            }
        )
        for j, name in enumerate(self.player_names):
            frame[name] = self.values[:, j]
        if standard_errors and self.standard_errors is not None:
            for j, name in enumerate(self.player_names):
                frame[f"se:{name}"] = self.standard_errors[:, j]
        return frame


def _swap_sides(a: np.ndarray | None, flip: np.ndarray) -> np.ndarray | None:
    """Side players (left's groups, then right's): exchange the halves on flipped rows."""
    if a is None:
        return None
    half = a.shape[1] // 2
    out = a.copy()
    out[flip] = np.concatenate([a[flip, half:], a[flip, :half]], axis=1)
    return out


def _swap_vs_labels(labels: np.ndarray | None, flip: np.ndarray) -> np.ndarray | None:
    """'A vs B' becomes 'B vs A' on flipped rows."""
    if labels is None:
        return None
    out = labels.astype(object).copy()
    for i in np.flatnonzero(flip):
        out[i] = [_swap_one(s) for s in out[i]]
    return out


def _swap_one(label: object) -> object:
    if isinstance(label, str) and " vs " in label:
        a, b = label.split(" vs ", 1)
        return f"{b} vs {a}"
    return label
