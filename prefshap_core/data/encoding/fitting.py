"""Fitting one feature group on a table: column kind, categories, fills; standardising.

A column is numeric when at least ``NUMERIC_SHARE`` of its present cells are numbers
(unless declared); otherwise its categories are one-hot encoded.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import text_cells
from prefshap_core.data.duel_data import ImputationNote
from prefshap_core.data.encoding.missing import (
    fill_missing,
    imputation_note,
    wants_indicator,
    with_indicator,
)
from prefshap_core.data.encoding.numeric_cells import (
    check_magnitude,
    parse_numbers,
    raise_bad_numbers,
)
from prefshap_core.data.encoding.overrides import name_list
from prefshap_core.data.encoding.spec import GroupEncoding
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import DataValidationError

NUMERIC_SHARE = 0.8


def fit_column(
    column: str,
    series: pd.Series,
    rows: np.ndarray,
    file_name: str,
    table_name: str,
    max_categories: int,
    forced: str | None,
    indicator_share: float | None,
) -> tuple[GroupEncoding, np.ndarray, ImputationNote | None]:
    """One raw column fitted as a group: numeric or categorical (``forced``: declared,
    else guessed), its fill and indicator; also its raw block and imputation note."""
    values, bad = parse_numbers(series)
    n_present = int((~np.isnan(values)).sum() + bad.sum())
    if n_present == 0:
        raise DataValidationError(
            "the column has no values at all: fill it in or drop it",
            file=file_name,
            column=column,
        )
    share = 1.0 - bad.sum() / n_present
    if forced == "numeric" or (forced is None and share >= NUMERIC_SHARE):
        why = (
            "the column was declared numeric"
            if forced == "numeric"
            else f"{math.floor(100 * share)}% of this column's values are numbers, so it is "
            "read as numeric"
        )
        why += "; fix the cell (leave it empty if unknown) or declare the column categorical"
        raise_bad_numbers(bad, series, rows, file_name, column, why)
        check_magnitude(values, rows, file_name, column)
        missing = np.isnan(values)
        indicator = wants_indicator(missing, indicator_share)
        present = values[~missing]
        # With an indicator: the mean, which is the column's offset, so a reader of the
        # model file alone fills an empty cell the same way (model-space 0).
        fill = float(present.mean() if indicator else np.median(present))
        group = GroupEncoding(column, "numeric", (column,), fill=fill, missing_indicator=indicator)
        block = with_indicator(group, fill_missing(group, values[:, None], missing), missing)
        return (
            group,
            block,
            imputation_note(table_name, group, int(missing.sum())) if missing.any() else None,
        )
    cells = text_cells(series)
    return fit_categories(
        column, (column,), [cells], rows, file_name, table_name, max_categories, indicator_share
    )


def fit_categories(
    name: str,
    sources: tuple[str, ...],
    cells: list[np.ndarray],
    rows: np.ndarray,
    file_name: str,
    table_name: str,
    max_categories: int,
    indicator_share: float | None = None,
) -> tuple[GroupEncoding, np.ndarray, ImputationNote | None]:
    """A categorical group over ``sources`` (several: multi-hot): its categories, fill and
    indicator; also its raw 0/1 block and imputation note."""
    counts = Counter(cell for column in cells for cell in column if cell is not None)
    if not counts:
        raise DataValidationError(
            "the column has no values at all: fill it in or drop it",
            file=file_name,
            column=name,
        )
    if len(counts) > max_categories:
        raise DataValidationError(
            f"the column is categorical with {len(counts)} distinct values, more than "
            f"max_categories={max_categories}: if it is a name or an identifier, drop it "
            "or use it as the label column; if it holds numbers, fix its non-numeric cells",
            file=file_name,
            column=name,
        )
    categories = tuple(sorted(counts))
    most_frequent = min(counts, key=lambda category: (-counts[category], category))
    kind = "categorical" if len(sources) == 1 else "multi_categorical"
    group = GroupEncoding(name, kind, sources, categories, fill=most_frequent)
    block, missing = one_hot(group, cells, rows, file_name)
    if wants_indicator(missing, indicator_share):
        group = GroupEncoding(name, kind, sources, categories, None, missing_indicator=True)
    block = with_indicator(group, fill_missing(group, block, missing), missing)
    return (
        group,
        block,
        imputation_note(table_name, group, int(missing.sum())) if missing.any() else None,
    )


def one_hot(
    group: GroupEncoding, cells: list[np.ndarray], rows: np.ndarray, file_name: str
) -> tuple[np.ndarray, np.ndarray]:
    """0/1 block (rows, categories) and which rows have no category at all."""
    categories = pd.Index(group.categories)
    block = np.zeros((len(rows), len(group.categories)))
    for source, column in zip(group.sources, cells, strict=True):
        present = ~pd.isna(column)
        codes = categories.get_indexer(np.where(present, column, ""))
        unknown = np.flatnonzero(present & (codes < 0))
        if len(unknown):
            raise DataValidationError(
                f"unknown category {column[unknown[0]]!r}; known categories: "
                f"{name_list(group.categories)}",
                file=file_name,
                row=int(rows[unknown[0]]),
                column=source,
            )
        block[np.flatnonzero(present), codes[present]] = 1.0
    return block, ~block.any(axis=1)


def standardised_space(
    groups: list[GroupEncoding], raw: np.ndarray, file_name: str
) -> FeatureSpace:
    """The feature space of fitted ``groups``: names, groups, and each column's offset (mean)
    and scale (standard deviation; 1 for constant columns)."""
    names = [name for group in groups for name in group.feature_names]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise DataValidationError(
            f"the encoded column name {duplicated[0]!r} occurs twice (a column named like "
            "another column's one-hot category): rename one of them",
            file=file_name,
            column=duplicated[0],
        )
    feature_group = [g for g, group in enumerate(groups) for _ in group.feature_names]
    offset = raw.mean(axis=0) if len(raw) else np.zeros(raw.shape[1])
    scale = raw.std(axis=0) if len(raw) else np.ones(raw.shape[1])
    peak = np.abs(raw).max(axis=0) if len(raw) else np.zeros(raw.shape[1])
    scale = np.where(scale <= 1e-12 * peak, 1.0, scale)  # constant up to rounding
    scale = np.where(scale > 0, scale, 1.0)
    return FeatureSpace(
        feature_names=tuple(names),
        group_names=tuple(group.name for group in groups),
        feature_group=np.asarray(feature_group, dtype=np.int64),
        offset=offset,
        scale=scale,
    )
