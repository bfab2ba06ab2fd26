"""Interaction values of duels: the pairwise Shapley interaction index of the item groups.

    inter = explain_interactions(fn, left, right, winners=y)   # -> InteractionExplanation
    inter.oriented_to_winner().mean_abs()                       # (pairs,) for a heatmap

Always exact, from the item game's coalition table (:meth:`Explainer.coalition_values`;
C-GPM: the context-averaged model) through :func:`interactions.shapley_interactions`,
so at most :data:`interactions.MAX_INTERACTION_PLAYERS` groups; a model with more is
explained over a chosen subset of them (``groups=``): the chosen groups are the
players, and every other group stays at the duel's own values (always in the
coalition: the game ``v'(S) = v(S + rest)``, one extra player of the enumeration kept
present). Values are stored
left-vs-right like :class:`Explanation`; the item game is antisymmetric, so a duel
seen from its other side has every interaction negated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from prefshap_core import budget
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.explainer import Explainer
from prefshap_core.explain.interactions import (
    MAX_INTERACTION_PLAYERS,
    pair_names,
    player_pairs,
    shapley_interactions,
)
from prefshap_core.explain.options import ExplainOptions
from prefshap_core.models.preference_function import PreferenceFunction, as_preference_function
from prefshap_core.progress import Progress

INTERACTIONS_REDUCE = "the number of duels or of item groups (each group doubles the work)"


@dataclass(frozen=True, eq=False)
class InteractionExplanation:
    values: np.ndarray  # (q, pairs) SII of each pair (i < j, group order), left-vs-right
    outputs: np.ndarray  # (q,) g (C-GPM: context-averaged)
    player_names: tuple[str, ...]
    duel_ids: np.ndarray  # (q,) str
    left_ids: np.ndarray
    right_ids: np.ndarray
    winners: np.ndarray  # (q,) +1 left won, -1 right won, 0 unknown
    orientation: str = "left"

    @property
    def pairs(self) -> np.ndarray:
        """(pairs, 2) player indices of each column."""
        return player_pairs(len(self.player_names))

    @property
    def pair_names(self) -> list[str]:
        """``<a>*<b>`` per column."""
        return pair_names(self.player_names)

    @property
    def n_duels(self) -> int:
        return len(self.outputs)

    def oriented_to_winner(self) -> InteractionExplanation:
        """Each duel seen from its winner (unknown winners stay as they are)."""
        s = np.where(self.winners == 0, 1.0, np.sign(self.winners)).astype(np.float64)
        flip = s < 0
        return replace(
            self,
            values=self.values * s[:, None],
            outputs=self.outputs * s,
            left_ids=np.where(flip, self.right_ids, self.left_ids),
            right_ids=np.where(flip, self.left_ids, self.right_ids),
            winners=(self.winners * s).astype(np.int8),
            orientation="winner",
        )

    def subset(self, rows: np.ndarray) -> InteractionExplanation:
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return replace(
            self,
            values=self.values[rows],
            outputs=self.outputs[rows],
            duel_ids=self.duel_ids[rows],
            left_ids=self.left_ids[rows],
            right_ids=self.right_ids[rows],
            winners=self.winners[rows],
        )

    def mean_abs(self) -> np.ndarray:
        """(pairs,) mean |SII| over the duels (orientation does not matter)."""
        n_pairs = self.values.shape[1]
        return np.abs(self.values).mean(0) if self.n_duels else np.zeros(n_pairs)

    def mean(self) -> np.ndarray:
        """(pairs,) signed mean SII in this orientation."""
        n_pairs = self.values.shape[1]
        return self.values.mean(0) if self.n_duels else np.zeros(n_pairs)

    def to_frame(self) -> pd.DataFrame:
        """One row per duel: ids, winner, output, one ``<a>*<b>`` column per pair."""
        frame = pd.DataFrame(
            {
                "duel_id": self.duel_ids,
                "left": self.left_ids,
                "right": self.right_ids,
                "winner": np.select(
                    [self.winners > 0, self.winners < 0], [self.left_ids, self.right_ids], ""
                ),
                "output": self.outputs,
            }
        )
        values = pd.DataFrame(self.values, columns=self.pair_names, index=frame.index)
        return pd.concat([frame, values], axis=1)

    def square(self, per_pair: np.ndarray) -> np.ndarray:
        """(p, p) symmetric matrix of one number per pair (diagonal 0)."""
        p = len(self.player_names)
        out = np.zeros((p, p))
        pairs = self.pairs
        out[pairs[:, 0], pairs[:, 1]] = per_pair
        out[pairs[:, 1], pairs[:, 0]] = per_pair
        return out


def check_interaction_groups(n_groups: int, chosen: int | None = None) -> None:
    """Refuse what exact interaction values cannot do, in words a user can act on
    (``chosen``: the size of a chosen subset of the model's ``n_groups``)."""
    if chosen is not None:
        if not 2 <= chosen <= MAX_INTERACTION_PLAYERS:
            raise ValueError(
                f"interaction values need 2 to {MAX_INTERACTION_PLAYERS} chosen item groups, "
                f"got {chosen}"
            )
        return
    if n_groups < 2:
        raise ValueError(
            f"interaction values need at least 2 item groups, the model has {n_groups}"
        )
    if n_groups > MAX_INTERACTION_PLAYERS:
        raise ValueError(
            f"interaction values are exact over the item groups (2^p coalitions per duel) "
            f"and limited to {MAX_INTERACTION_PLAYERS} groups; the model has {n_groups}: "
            f"choose at most {MAX_INTERACTION_PLAYERS} of them"
        )


REST = "(other groups)"  # the merged player of the groups left out of a chosen subset


def chosen_groups(fn: PreferenceFunction, groups: Any) -> tuple[str, ...] | None:
    """A chosen subset of the item groups in the model's order (None: all groups);
    unknown names and repeats are errors naming them."""
    if groups is None:
        return None
    names = fn.item_space.group_names
    wanted = [str(g) for g in groups]
    unknown = [g for g in wanted if g not in names]
    if unknown:
        raise ValueError(
            f"not item groups of this model: {', '.join(unknown)} (groups: {', '.join(names)})"
        )
    if len(set(wanted)) != len(wanted):
        raise ValueError("an item group is chosen twice")
    check_interaction_groups(len(names), len(wanted))
    ordered = tuple(g for g in names if g in wanted)
    return None if len(ordered) == len(names) else ordered


def _regrouped(fn: PreferenceFunction, groups: tuple[str, ...]) -> PreferenceFunction:
    """``fn`` with the chosen groups as players (model order) and the others as one last
    player :data:`REST`: the same g, other players."""
    space = fn.item_space
    index = {name: k for k, name in enumerate(groups)}
    old = [space.group_names[g] for g in space.feature_group.tolist()]
    feature_group = np.array([index.get(name, len(groups)) for name in old], dtype=np.int64)
    regrouped = FeatureSpace(
        space.feature_names, (*groups, REST), feature_group, space.offset, space.scale
    )
    return replace(fn, item_space=regrouped)


def explain_interactions(
    model: Any,
    left: np.ndarray,
    right: np.ndarray,
    *,
    winners: np.ndarray | None = None,
    duel_ids: np.ndarray | None = None,
    explainer: Explainer | None = None,
    progress: Progress | None = None,
    groups: Any = None,
) -> InteractionExplanation:
    """Exact pairwise interactions of the item groups for each duel ``left[i]`` vs ``right[i]``.

    ``explainer``: an item explainer of the same model (``what="items"``), to reuse its
    kept factorizations (not with a subset: its players differ). ``groups``: at most
    16 item group names, the players; the others stay at the duel's values (module doc).
    """
    fn = as_preference_function(model)
    subset = chosen_groups(fn, groups)
    if subset is None:
        check_interaction_groups(fn.item_space.n_groups)
    else:
        fn = _regrouped(fn, subset)
        options = ExplainOptions() if explainer is None else explainer.options
        explainer = Explainer(fn, replace(options, what="items", shapley="exact"))
    p = fn.item_space.n_groups
    n = len(np.asarray(left))
    # Refused before any CME solve: the 2^p-row table of every duel is kept whole.
    budget.check(
        budget.coalition_table_bytes(n, n, 2**p) + budget.interaction_bytes(p, n),
        f"Interaction values of {n:,} duels ({2**p:,} coalitions each)",
        INTERACTIONS_REDUCE,
    )
    if explainer is None:
        options = ExplainOptions(what="items", shapley="exact")
        explainer = Explainer(fn, options)
    if explainer.options.what != "items":
        raise ValueError("interaction values come from an item explainer (what='items')")
    table = explainer.coalition_values(left, right, progress=progress)
    n = table.values.shape[1]
    values, players = table.values, table.player_names
    if subset is not None:  # the rest (last bit) always present: the table's upper half
        values, players = values[2 ** (p - 1) :], players[:-1]
    winners = np.zeros(n, np.int8) if winners is None else np.sign(winners).astype(np.int8)
    ids = np.arange(n).astype(str) if duel_ids is None else np.asarray(duel_ids).astype(str)
    return InteractionExplanation(
        values=shapley_interactions(values),
        outputs=values[-1].copy(),
        player_names=players,
        duel_ids=ids,
        left_ids=np.asarray(left).astype(str),
        right_ids=np.asarray(right).astype(str),
        winners=winners,
    )
