"""Encoding whole tables: fit on a table, encode new rows with a fitted spec, label rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import row_numbers, text_cells
from prefshap_core.data.duel_data import ImputationNote
from prefshap_core.data.encoding.fitting import (
    fit_categories,
    fit_column,
    one_hot,
    standardised_space,
)
from prefshap_core.data.encoding.missing import fill_missing, imputation_note, with_indicator
from prefshap_core.data.encoding.numeric_cells import (
    check_magnitude,
    parse_numbers,
    raise_bad_numbers,
)
from prefshap_core.data.encoding.overrides import check_overrides, name_list
from prefshap_core.data.encoding.spec import EncodedTable, EncodingSpec, GroupEncoding
from prefshap_core.errors import DataValidationError

MISSING_INDICATOR_SHARE = 0.2  # this share of missing cells or more: an indicator column


def encode_table(
    table: pd.DataFrame,
    *,
    file_name: str,
    table_name: str = "items",
    columns: Sequence[str] | None = None,
    numeric: Iterable[str] = (),
    categorical: Iterable[str] = (),
    multi_categorical: Mapping[str, Sequence[str]] | None = None,
    max_categories: int = 50,
    missing_indicator_share: float | None = MISSING_INDICATOR_SHARE,
) -> EncodedTable:
    """Infer column kinds, impute, one-hot encode and standardise ``columns`` of ``table``.

    ``missing_indicator_share``: columns with at least this share of missing cells
    get a missing indicator (the package docstring, data.encoding); None: never.
    """
    columns = [str(c) for c in (table.columns if columns is None else columns)]
    if table.columns.has_duplicates:
        name = str(table.columns[table.columns.duplicated()][0])
        raise DataValidationError("two columns have this name", file=file_name, column=name)
    numeric, categorical = set(numeric), set(categorical)
    multi = {str(k): [str(c) for c in v] for k, v in (multi_categorical or {}).items()}
    check_overrides(columns, numeric, categorical, multi, file_name)
    rows = row_numbers(table)

    groups: list[GroupEncoding] = []
    blocks: list[np.ndarray] = []
    notes: list[ImputationNote] = []
    multi_of = {source: group for group, sources in multi.items() for source in sources}
    for column in columns:
        if column in multi_of:
            if column != multi[multi_of[column]][0]:
                continue  # the group is built at its first source column
            name, sources = multi_of[column], tuple(multi[multi_of[column]])
            cells = [text_cells(table[source]) for source in sources]
            group, block, note = fit_categories(
                name, sources, cells, rows, file_name, table_name, max_categories,
                missing_indicator_share,
            )  # fmt: skip
        else:
            forced = "numeric" if column in numeric else None
            forced = "categorical" if column in categorical else forced
            group, block, note = fit_column(
                column, table[column], rows, file_name, table_name, max_categories, forced,
                missing_indicator_share,
            )  # fmt: skip
        groups.append(group)
        blocks.append(block)
        if note is not None:
            notes.append(note)

    raw = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(table), 0))
    space = standardised_space(groups, raw, file_name)
    spec = EncodingSpec(table=table_name, groups=tuple(groups), space=space)
    return EncodedTable(spec=spec, model=space.standardise(raw), raw=raw, notes=tuple(notes))


def encode_rows(
    table: pd.DataFrame, spec: EncodingSpec, *, file_name: str = "rows"
) -> EncodedTable:
    """Encode new rows with a fitted spec: same categories, fills, offset and scale.

    Unknown categories, non-numeric cells in numeric columns and missing cells with
    no known fill are errors naming file, row and column.
    """
    rows = row_numbers(table)
    for group in spec.groups:
        for source in group.sources:
            if source not in table.columns:
                raise DataValidationError(
                    f"this column is needed (columns given: {name_list(table.columns)})",
                    file=file_name,
                    column=source,
                )
    blocks, notes = [], []
    for group in spec.groups:
        if group.kind == "numeric":
            values, bad = parse_numbers(table[group.sources[0]])
            why = "the model reads this column as numeric; fix the cell"
            raise_bad_numbers(bad, table[group.sources[0]], rows, file_name, group.name, why)
            check_magnitude(values, rows, file_name, group.name)
            block, missing = values[:, None], np.isnan(values)
        else:
            cells = [text_cells(table[source]) for source in group.sources]
            block, missing = one_hot(group, cells, rows, file_name)
        if missing.any():
            if not group.fills_missing:
                row = int(rows[np.flatnonzero(missing)[0]])
                raise DataValidationError(
                    "missing value, and no fill value is known for this column",
                    file=file_name,
                    row=row,
                    column=group.sources[0],
                )
            block = fill_missing(group, block, missing)
            notes.append(imputation_note(spec.table, group, int(missing.sum())))
        blocks.append(with_indicator(group, block, missing))
    raw = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(table), 0))
    return EncodedTable(spec=spec, model=spec.space.standardise(raw), raw=raw, notes=tuple(notes))


def row_labels(raw: np.ndarray, spec: EncodingSpec) -> np.ndarray:
    """Readable row descriptions from raw encoded rows, e.g. ``"Outdoor / Clay"``."""
    parts = []
    for group in spec.groups:
        block = raw[:, spec.space.group_columns(group.name)]
        unknown = block[:, -1] > 0.5 if group.missing_indicator else np.zeros(len(raw), bool)
        if group.kind == "numeric":
            labels = [f"{group.name} {value:g}" for value in block[:, 0]]
        else:
            n = len(group.categories)
            labels = [
                "+".join(c for c, on in zip(group.categories, r, strict=True) if on)
                for r in block[:, :n] > 0.5
            ]
        parts.append(
            [f"{group.name} ?" if u else label for label, u in zip(labels, unknown, strict=True)]
        )
    return np.array([" / ".join(p) for p in zip(*parts, strict=True)] if parts else [], dtype=str)
