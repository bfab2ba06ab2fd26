"""``prefshap explain --duels`` in every layout ``prefshap train`` reads.

The duels become the long format's ``left``, ``right`` and (where there is an
outcome) ``winner`` columns; a table already in that form comes back unchanged.
A wide choice table also gives its alternatives' attributes, so that alternatives
outside the model's item pool can be explained as covariate rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import text_cells
from prefshap_core.data.layouts.counts import find_count_columns
from prefshap_core.data.layouts.long import long_duels
from prefshap_core.data.layouts.mapping import ColumnMapping, referenced_keys, require_column
from prefshap_core.data.layouts.rankings import find_rankings, ranking_pairs
from prefshap_core.data.layouts.wide import find_wide, wide_tables

_WORDS = {1: "left", -1: "right", 0: "tie"}


@dataclass(frozen=True, eq=False)
class ExplainDuels:
    table: pd.DataFrame  # left, right[, winner][, duel_id], other columns (contexts)
    layout: str
    alternatives: pd.DataFrame | None = None  # wide: per duel row, each side's attributes
    attributes: tuple[str, ...] = ()


def explain_duels(
    table: pd.DataFrame,
    mapping: ColumnMapping,
    file_name: str,
    item_ids: np.ndarray | None = None,
) -> ExplainDuels:
    """The duels of ``table`` (any layout) as long-format rows to explain.

    ``item_ids`` (the model's): a rankings table's item column is the one holding them.
    """
    overridden = mapping != ColumnMapping()
    columns = set(map(str, table.columns))
    plain = {"left", "right"} <= columns and "loser" not in columns
    if not overridden and plain and ("y" not in columns or "winner" in columns):
        return ExplainDuels(table, "long")
    ranked = find_rankings(table, mapping.event, mapping.rank)
    if ranked is not None and not {"left", "right"} <= columns:
        event, rank = ranked
        others = [str(c) for c in table.columns if str(c) not in (event, rank)]
        known = set(np.asarray(item_ids if item_ids is not None else []).astype(str).tolist())
        item = mapping.left or next(
            (c for c in others if referenced_keys(table, [c]) <= known and known), "item"
        )
        require_column(table, item, "--left-column", file_name)
        keep = [c for c in others if c != item]
        pairs = ranking_pairs(table, event, rank, item, keep, file_name)
        return ExplainDuels(_winner_from_y(pairs), "rankings")
    found = find_count_columns(table, mapping) if not {"winner", "y"} & columns else None
    if found is not None:
        keep = [str(c) for c in table.columns if str(c) not in (found.left, found.right)]
        keep = [c for c in keep if c not in found.counts]
        long = pd.DataFrame(
            {"left": text_cells(table[found.left]), "right": text_cells(table[found.right])},
            index=table.index,
        )
        for column in keep:
            long[column] = table[column].to_numpy()
        return ExplainDuels(long, "counts")  # one duel per pair row: values need no outcome
    wide = find_wide(table, mapping.outcome) if not {"left", "right"} <= columns else None
    if wide is not None:
        pairs_found, choice = wide
        built = wide_tables(table, pairs_found, choice, file_name)
        sides = pd.DataFrame(index=table.index)
        for pair in pairs_found:
            sides[f"left:{pair.stem}"] = table[pair.first].to_numpy()
            sides[f"right:{pair.stem}"] = table[pair.second].to_numpy()
        return ExplainDuels(built.duels, "wide", sides, tuple(built.attributes))
    long, _, references = long_duels(table, mapping, file_name)
    if references[0] == "winner":  # winner / loser: the winner on the left
        out = long.rename(columns={"winner": "left", "loser": "right"})
        out.insert(2, "winner", np.where(pd.isna(text_cells(out["left"])), None, "left"))
        return ExplainDuels(out, "long")
    return ExplainDuels(_winner_from_y(long) if "y" in long.columns else long, "long")


def _winner_from_y(table: pd.DataFrame) -> pd.DataFrame:
    """``y`` (1 / -1 / 0) as the winner words the explain reader takes."""
    cells = text_cells(table["y"])
    numbers = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(float)
    words = [None if v != v else _WORDS.get(int(np.sign(v))) for v in numbers.tolist()]
    out = table.drop(columns=["y"])
    out.insert(2, "winner", np.asarray(words, dtype=object))
    return out


def side_rows(duels: ExplainDuels, side: str) -> pd.DataFrame:
    """A wide table's ``side`` ("left"/"right") alternatives: one column per attribute."""
    assert duels.alternatives is not None
    return pd.DataFrame(
        {a: duels.alternatives[f"{side}:{a}"].to_numpy() for a in duels.attributes},
        index=duels.alternatives.index,
    )
