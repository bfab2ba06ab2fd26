"""One reader for every layout: detect it, map the columns, reshape to the long format.

``read_layout`` turns the tables as published (long, counts, wide, rankings; see
sample_data/README.md) into the upload format's long tables and says what it did;
``build_from_tables`` then builds the DuelData with :func:`build_duel_data`, so every
layout is validated, encoded and reported exactly as a hand-reshaped long file is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from prefshap_core.data.build import CONTEXTS_FILE, DUELS_FILE, ITEMS_FILE
from prefshap_core.data.csv_io import ROW_NAMES
from prefshap_core.data.id_columns import IgnoredColumn
from prefshap_core.data.layouts.counts import CountColumns, expand_counts, find_count_columns
from prefshap_core.data.layouts.doubt import reading_doubt
from prefshap_core.data.layouts.long import long_duels
from prefshap_core.data.layouts.mapping import (
    ColumnMapping,
    align_ids,
    guess_id_column,
    is_key_of,
    key_first,
    referenced_keys,
    resolve_context_row_names,
    unnamed_column_error,
)
from prefshap_core.data.layouts.pairs import ColumnPair, paired_columns
from prefshap_core.data.layouts.rankings import find_rankings, ranking_pairs
from prefshap_core.data.layouts.wide import find_wide, wide_tables
from prefshap_core.errors import DataValidationError

RESPONDENT_NAMES = ("id", "respondent", "person", "subject", "individual")


@dataclass(frozen=True, eq=False)
class LayoutRead:
    """The user's tables as the upload format's long tables, and how they were read."""

    layout: str  # "long", "counts", "wide" or "rankings"
    items: pd.DataFrame
    duels: pd.DataFrame
    contexts: pd.DataFrame | None
    mapping: ColumnMapping  # the columns used
    read_as: str  # one line: what was detected
    groups: np.ndarray | None = None  # per duel row: the source row (count tables)
    set_aside: tuple[IgnoredColumn, ...] = ()
    context_columns: list[str] | None = None  # None: build_duel_data's default
    doubt: str = ""  # why the guesses are worth checking (empty: the reader is sure)


def read_layout(
    items: pd.DataFrame | None,
    duels: pd.DataFrame,
    contexts: pd.DataFrame | None = None,
    mapping: ColumnMapping | None = None,
    *,
    items_file: str = ITEMS_FILE,
    duels_file: str = DUELS_FILE,
    contexts_file: str = CONTEXTS_FILE,
    use_columns: tuple[str, ...] = (),
) -> LayoutRead:
    """Detect the layout of ``duels`` and reshape the tables to the long format."""
    mapping = mapping or ColumnMapping()
    row_named = contexts is not None and str(contexts.columns[0]) == ROW_NAMES
    read = _reshape(
        items, duels, contexts, mapping, items_file, duels_file, contexts_file, use_columns
    )
    return replace(read, doubt=reading_doubt(read, mapping, row_named_contexts=row_named))


def _reshape(
    items: pd.DataFrame | None,
    duels: pd.DataFrame,
    contexts: pd.DataFrame | None,
    mapping: ColumnMapping,
    items_file: str,
    duels_file: str,
    contexts_file: str,
    use_columns: tuple[str, ...],
) -> LayoutRead:
    if ROW_NAMES in duels.columns:
        raise unnamed_column_error(duels_file)
    if contexts is not None:
        contexts = resolve_context_row_names(duels, contexts, mapping.context_key, contexts_file)
        if mapping.context_key is not None:
            contexts = key_first(contexts, mapping.context_key)
    key = mapping.context_key or (str(contexts.columns[0]) if contexts is not None else None)
    if key is not None and key not in duels.columns and mapping.context_key is not None:
        raise DataValidationError(
            "--context-key names a column the duels file does not have",
            file=duels_file,
            column=key,
        )
    given = _Given(items, duels, contexts, mapping, key, use_columns, items_file, duels_file)
    ranked = find_rankings(duels, mapping.event, mapping.rank)
    if ranked is not None and (mapping.event or mapping.rank or not _has_sides(duels)):
        return _rankings(given, ranked)
    if mapping.counts is not None or not {"winner", "y"} & set(duels.columns):
        found = find_count_columns(duels, mapping)
        if found is not None:
            return _counts(given, found)
    if not _has_sides(duels) and mapping.left is None:
        wide = find_wide(duels, mapping.outcome)
        if wide is not None:
            return _wide(given, wide)
    if not _has_sides(duels) and mapping.left is None and items is not None:
        mapping = _paired_sides(items, duels, mapping)
    if mapping.context_key is not None and contexts is None:
        raise DataValidationError(
            "--context-key needs --contexts: the key joins a contexts table's covariates "
            "to the duels; without a contexts table, leave --context-key out",
            file=duels_file,
            column=mapping.context_key,
        )
    long, used, references = long_duels(duels, mapping, duels_file)
    items = _need_items(items, "long", duels_file)
    id_column = _id_column(items, long, references, mapping.id, items_file)
    items, long = align_ids(items, id_column, long, references, also=("winner",))
    used = replace(used, id=id_column, context_key=key if contexts is not None else None)
    what = "winner/loser table" if references[0] == "winner" else "one row per duel"
    return LayoutRead(
        "long", items, long, contexts, used, f"read as: long table ({what}); {_id_note(id_column)}"
    )


@dataclass(frozen=True, eq=False)
class _Given:
    """The tables and choices every layout's reshaping starts from."""

    items: pd.DataFrame | None
    duels: pd.DataFrame
    contexts: pd.DataFrame | None
    mapping: ColumnMapping
    key: str | None  # the context key: --context-key, or the contexts table's first column
    use_columns: tuple[str, ...]
    items_file: str
    duels_file: str


def _has_sides(duels: pd.DataFrame) -> bool:
    columns = set(map(str, duels.columns))
    return {"left", "right"} <= columns or {"winner", "loser"} <= columns


def _paired_sides(
    items: pd.DataFrame, duels: pd.DataFrame, mapping: ColumnMapping
) -> ColumnMapping:
    """``player1, player2, winner``: the first pair of columns holding item ids is left/right."""
    for pair in paired_columns([str(c) for c in duels.columns]):
        wanted = referenced_keys(duels, [pair.first, pair.second])
        if wanted and any(is_key_of(items[c], wanted) for c in items.columns):
            return replace(mapping, left=pair.first, right=pair.second)
    return mapping


def _need_items(items: pd.DataFrame | None, layout: str, duels_file: str) -> pd.DataFrame:
    if items is None:
        raise DataValidationError(
            f"read as a {layout} table, which needs an item table of the items' covariates "
            "(--items FILE): items without covariates are not explainable by features",
            file=duels_file,
        )
    return items


def _id_column(
    items: pd.DataFrame,
    duels: pd.DataFrame,
    references: list[str],
    given: str | None,
    items_file: str,
) -> str:
    id_column = guess_id_column(items, referenced_keys(duels, references), given, items_file)
    if ROW_NAMES in items.columns and id_column != ROW_NAMES:
        raise unnamed_column_error(items_file)
    return id_column


def _id_note(id_column: str) -> str:
    if id_column == ROW_NAMES:
        return "item ids: the unnamed first column (row names)"
    return f"item ids: `{id_column}`"


def _key_note(key: str | None, joined: bool, who: str) -> str:
    if key is None:
        return ""
    return f"; {who} `{key}` -> context key" if joined else f"; {who} `{key}` set aside"


def _leftovers(
    duels: pd.DataFrame, used: set[str], use_columns: tuple[str, ...], layout: str
) -> tuple[list[str], tuple[IgnoredColumn, ...]]:
    """Columns of a count or rankings table beyond the mapped ones: named ones are context
    covariates, the others are set aside and reported (they are outcomes, not contexts)."""
    other = [str(c) for c in duels.columns if str(c) not in used]
    kept = [c for c in other if c in use_columns]
    aside = tuple(
        IgnoredColumn(
            "duels",
            c,
            f"a {layout} table's extra column is not a context covariate "
            "(name it to use it anyway: --use-column)",
        )
        for c in other
        if c not in use_columns
    )
    return kept, aside


def _counts(given: _Given, found: CountColumns) -> LayoutRead:
    items, duels, contexts, mapping, key = (
        given.items,
        given.duels,
        given.contexts,
        given.mapping,
        given.key,
    )
    use_columns, items_file, duels_file = given.use_columns, given.items_file, given.duels_file
    items = _need_items(items, "count", duels_file)
    used = {found.left, found.right, *found.counts} | ({key} if key else set())
    kept, aside = _leftovers(duels, used, use_columns, "count")
    joined = contexts is not None and key is not None
    keep = kept + ([key] if key is not None and key in duels.columns else [])
    long, groups = expand_counts(duels, found, keep, duels_file)
    if key is not None and not joined:
        long = long.drop(columns=[key])
        aside += (
            IgnoredColumn(
                "duels", key, "the judge's key: give a contexts table of their covariates to use it"
            ),
        )
    id_column = _id_column(items, long, ["left", "right"], mapping.id, items_file)
    items, long = align_ids(items, id_column, long, ["left", "right"])
    columns = ColumnMapping(
        id=id_column,
        left=found.left,
        right=found.right,
        context_key=key if joined else None,
        counts=found.counts,
    )
    read_as = (
        f"read as: count table; {len(duels):,} rows -> {len(long):,} duels "
        f"(wins in `{found.counts[0]}`/`{found.counts[1]}`"
        + (f", ties in `{found.counts[2]}`" if len(found.counts) > 2 else "")
        + f"); {_id_note(id_column)}"
        + _key_note(key, joined, "judge")
    )
    return LayoutRead("counts", items, long, contexts, columns, read_as, groups, aside, kept)


def _rankings(given: _Given, ranked: tuple[str, str]) -> LayoutRead:
    items, duels, contexts, mapping, key = (
        given.items,
        given.duels,
        given.contexts,
        given.mapping,
        given.key,
    )
    use_columns, items_file, duels_file = given.use_columns, given.items_file, given.duels_file
    event, rank = ranked
    items = _need_items(items, "rankings", duels_file)
    others = [str(c) for c in duels.columns if str(c) not in (event, rank, key)]
    item = mapping.left or ("item" if "item" in others else None)
    if item is None:
        ids = {c: referenced_keys(duels, [c]) for c in others}
        item = next(
            (c for c in others if any(is_key_of(items[i], ids[c]) for i in items.columns)), None
        )
    if item is None:
        raise DataValidationError(
            f"a rankings table (event `{event}`, rank `{rank}`) needs a column of item ids "
            "(name it `item`, or --left-column NAME)",
            file=duels_file,
        )
    kept, aside = _leftovers(
        duels, {event, rank, item} | ({key} if key else set()), use_columns, "rankings"
    )
    joined = contexts is not None and key is not None
    long = ranking_pairs(duels, event, rank, item, kept + ([key] if joined else []), duels_file)
    id_column = _id_column(items, long, ["left", "right"], mapping.id, items_file)
    items, long = align_ids(items, id_column, long, ["left", "right"])
    columns = ColumnMapping(
        id=id_column,
        left=item,
        right=item,
        outcome=rank,
        context_key=key if joined else None,
        event=event,
        rank=rank,
    )
    n_events = duels[event].nunique()
    read_as = (
        f"read as: rankings; {n_events:,} events `{event}` ranked by `{rank}` -> "
        f"{len(long):,} pairs; {_id_note(id_column)}"
        + _key_note(key if joined else None, True, "event")
    )
    return LayoutRead("rankings", items, long, contexts, columns, read_as, None, aside, kept)


def _wide(given: _Given, wide: tuple[list[ColumnPair], str]) -> LayoutRead:
    items, duels, contexts, key, duels_file = (
        given.items,
        given.duels,
        given.contexts,
        given.key,
        given.duels_file,
    )
    if items is not None:
        raise DataValidationError(
            "read as a wide choice table (the alternatives' attributes are on each row), "
            "which has no item table: leave out --items",
            file=duels_file,
        )
    pairs, choice = wide
    found = wide_tables(duels, pairs, choice, duels_file)
    long = found.duels
    respondent = key or next(
        (c for c in map(str, duels.columns) if c.lower() in RESPONDENT_NAMES), None
    )
    joined = contexts is not None and respondent is not None and respondent == key
    aside: tuple[IgnoredColumn, ...] = ()
    if respondent is not None and not joined and respondent in long.columns:
        long = long.drop(columns=[respondent])
        aside = (
            IgnoredColumn(
                "duels",
                respondent,
                "the respondent's id: give a contexts table of their covariates to use it",
            ),
        )
    columns = ColumnMapping(
        id=None,
        left=pairs[0].first,
        right=pairs[0].second,
        outcome=choice,
        context_key=respondent if joined else None,
    )
    read_as = (
        f"read as: wide choice table; {len(found.items):,} distinct alternatives from "
        f"{len(pairs)} paired attributes" + _key_note(respondent, joined, "respondent")
    )
    return LayoutRead("wide", found.items, long, contexts, columns, read_as, None, aside)
