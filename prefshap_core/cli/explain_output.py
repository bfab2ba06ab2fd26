"""The layout of ``prefshap explain``'s OUT.csv, for values and for interactions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import InteractionExplanation


def explanation_table(expl: Explanation, table: pd.DataFrame) -> pd.DataFrame:
    """The output layout of every ``--what``: ids, [duel_id, winner], output, values, [se]."""
    columns = {name: expl.values[:, j] for j, name in enumerate(expl.player_names)}
    if expl.meta.get("shapley") == "sampled" and expl.standard_errors is not None:
        for j, name in enumerate(expl.player_names):
            columns[f"se:{name}"] = expl.standard_errors[:, j]
    if expl.sd is not None:
        for j, name in enumerate(expl.player_names):
            columns[f"sd:{name}"] = expl.sd[:, j]
    out = _layout(expl.left_ids, expl.right_ids, expl.outputs, expl.base_values, columns, table)
    if expl.output_sd is not None:  # after base_value
        at = out.columns.get_loc("base_value") + 1
        out.insert(at, "output_sd", expl.output_sd)
        if expl.what == "context" and expl.base_value_sd is not None:
            out.insert(at + 1, "base_value_sd", expl.base_value_sd)
    return out


def interaction_table(inter: InteractionExplanation, table: pd.DataFrame) -> pd.DataFrame:
    """The same layout with one ``<a>*<b>`` column per pair (base value: v(empty) = 0)."""
    columns = {name: inter.values[:, k] for k, name in enumerate(inter.pair_names)}
    base = np.zeros(inter.n_duels)
    return _layout(inter.left_ids, inter.right_ids, inter.outputs, base, columns, table)


def _layout(
    left: np.ndarray,
    right: np.ndarray,
    outputs: np.ndarray,
    base_values: np.ndarray,
    columns: dict[str, np.ndarray],
    table: pd.DataFrame,
) -> pd.DataFrame:
    out = pd.DataFrame({"left": left, "right": right})
    for name in ("duel_id", "winner"):
        if name in table.columns:
            out[name] = table[name].to_numpy()
    out["output"] = outputs
    out["base_value"] = base_values
    return pd.concat([out, pd.DataFrame(columns, index=out.index)], axis=1)
