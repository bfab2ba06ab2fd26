"""From a table of covariates (items or contexts) to model space.

Policy, documented for users in sample_data/README.md:

- A column is **numeric** when at least 80% of its non-missing values are numbers
  (``TRUE``/``FALSE`` count as 1/0); any other cell in it is then an error naming
  file, row and column. Otherwise it is **categorical**: one 0/1 column per category,
  named ``"<column>=<category>"``, the columns forming one feature group (one
  Shapley player). ``numeric=`` / ``categorical=`` override the guess;
  ``multi_categorical={"Type": ["Type 1", "Type 2"]}`` makes one multi-hot group
  over the union of several columns' categories.
- Missing values are imputed (numeric: median; categorical: most frequent category)
  and every imputation is reported as an :class:`ImputationNote`; a column with no
  value at all is an error.
- A column with at least ``missing_indicator_share`` (default 20%) of its cells
  missing gets a 0/1 *missing indicator* column ``"<column> (missing)"`` in its own
  group instead, so that unknown rows are not made identical to the typical one:
  its missing cells then read as the mean of the present values (numeric; 0 in model
  space) or as no category (categorical), with the indicator at 1. Both rules need
  nothing but the feature space, so a model file's reader encodes an empty cell the
  same way (docs/model-format.md).
- Columns are standardised once, on this table: offset = mean, scale = standard
  deviation (1 for constant columns).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import is_number_text, row_numbers, text_cells, text_codes
from prefshap_core.data.duel_data import ImputationNote
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import DataValidationError

NUMERIC_SHARE = 0.8
MISSING_INDICATOR_SHARE = 0.2  # this share of missing cells or more: an indicator column
MISSING_SUFFIX = " (missing)"
MAX_ABS_VALUE = 1e100  # beyond this, squares and sums in the kernels overflow
_BOOLEANS = {"true": 1.0, "false": 0.0}


@dataclass(frozen=True)
class GroupEncoding:
    """How one feature group (one Shapley player) is read from raw columns."""

    name: str
    kind: str  # "numeric" | "categorical" | "multi_categorical"
    sources: tuple[str, ...]  # raw table columns
    categories: tuple[str, ...] = ()  # one-hot order, for the categorical kinds
    fill: float | str | None = None  # replaces a missing cell; None: missing is an error
    missing_indicator: bool = False  # a last 0/1 column "<name> (missing)"

    @property
    def feature_names(self) -> tuple[str, ...]:
        if self.kind == "numeric":
            names: tuple[str, ...] = (self.name,)
        else:
            names = tuple(f"{self.name}={category}" for category in self.categories)
        return names + ((self.name + MISSING_SUFFIX,) if self.missing_indicator else ())

    @property
    def fills_missing(self) -> bool:
        """Whether a missing cell can be encoded (a fill, or no category + indicator)."""
        return self.fill is not None or (self.missing_indicator and self.kind != "numeric")


@dataclass(frozen=True, eq=False)
class EncodingSpec:
    """Everything needed to encode new rows exactly like the table that was fitted."""

    table: str  # "items" or "context": the name used in notes
    groups: tuple[GroupEncoding, ...]
    space: FeatureSpace

    @classmethod
    def from_feature_space(cls, space: FeatureSpace, table: str) -> EncodingSpec:
        """Rebuild a spec from names alone (e.g. a model file), without fill values.

        A one-column group named like its column is numeric; a group of
        ``"<group>=<category>"`` columns is categorical and reads a column named
        ``<group>``; either may end with a ``"<group> (missing)"`` indicator column.
        Missing cells are then errors, as the fills are unknown, except in groups
        with an indicator (numeric: the column's mean, categorical: no category).
        """
        groups = []
        for index, group in enumerate(space.group_names):
            columns = list(space.group_columns(index))
            names = [space.feature_names[j] for j in columns]
            indicator = len(names) > 1 and names[-1] == group + MISSING_SUFFIX
            if indicator:
                names, columns = names[:-1], columns[:-1]
            prefix = f"{group}="
            if names == [group]:
                fill = float(space.offset[columns[0]]) if indicator else None
                groups.append(GroupEncoding(group, "numeric", (group,), (), fill, indicator))
            elif names and all(name.startswith(prefix) for name in names):
                categories = tuple(name[len(prefix) :] for name in names)
                groups.append(
                    GroupEncoding(group, "categorical", (group,), categories, None, indicator)
                )
            else:
                raise ValueError(
                    f"feature group {group!r} has columns {names}: neither one numeric "
                    f"column named {group!r} nor one-hot columns named '{group}=<category>'"
                )
        return cls(table=table, groups=tuple(groups), space=space)


@dataclass(frozen=True, eq=False)
class EncodedTable:
    spec: EncodingSpec
    model: np.ndarray  # (rows, d) standardised
    raw: np.ndarray  # (rows, d) raw units (imputed, one-hot)
    notes: tuple[ImputationNote, ...]

    @property
    def space(self) -> FeatureSpace:
        return self.spec.space


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
    get a missing indicator (module docstring); None: never.
    """
    columns = [str(c) for c in (table.columns if columns is None else columns)]
    if table.columns.has_duplicates:
        name = str(table.columns[table.columns.duplicated()][0])
        raise DataValidationError("two columns have this name", file=file_name, column=name)
    numeric, categorical = set(numeric), set(categorical)
    multi = {str(k): [str(c) for c in v] for k, v in (multi_categorical or {}).items()}
    _check_overrides(columns, numeric, categorical, multi, file_name)
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
            group, block, note = _fit_categories(
                name, sources, cells, rows, file_name, table_name, max_categories,
                missing_indicator_share,
            )  # fmt: skip
        else:
            forced = "numeric" if column in numeric else None
            forced = "categorical" if column in categorical else forced
            group, block, note = _fit_column(
                column, table[column], rows, file_name, table_name, max_categories, forced,
                missing_indicator_share,
            )  # fmt: skip
        groups.append(group)
        blocks.append(block)
        if note is not None:
            notes.append(note)

    raw = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(table), 0))
    space = _standardised_space(groups, raw, file_name)
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
                    f"this column is needed (columns given: {_names(table.columns)})",
                    file=file_name,
                    column=source,
                )
    blocks, notes = [], []
    for group in spec.groups:
        if group.kind == "numeric":
            values, bad = _parse_numbers(table[group.sources[0]])
            why = "the model reads this column as numeric; fix the cell"
            _raise_bad_numbers(bad, table[group.sources[0]], rows, file_name, group.name, why)
            _check_magnitude(values, rows, file_name, group.name)
            block, missing = values[:, None], np.isnan(values)
        else:
            cells = [text_cells(table[source]) for source in group.sources]
            block, missing = _one_hot(group, cells, rows, file_name)
        if missing.any():
            if not group.fills_missing:
                row = int(rows[np.flatnonzero(missing)[0]])
                raise DataValidationError(
                    "missing value, and no fill value is known for this column",
                    file=file_name,
                    row=row,
                    column=group.sources[0],
                )
            block = _fill(group, block, missing)
            notes.append(_note(spec.table, group, int(missing.sum())))
        blocks.append(_with_indicator(group, block, missing))
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


# -- fitting one group -------------------------------------------------------------
def _fit_column(
    column: str,
    series: pd.Series,
    rows: np.ndarray,
    file_name: str,
    table_name: str,
    max_categories: int,
    forced: str | None,
    indicator_share: float | None,
) -> tuple[GroupEncoding, np.ndarray, ImputationNote | None]:
    values, bad = _parse_numbers(series)
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
        _raise_bad_numbers(bad, series, rows, file_name, column, why)
        _check_magnitude(values, rows, file_name, column)
        missing = np.isnan(values)
        indicator = _wants_indicator(missing, indicator_share)
        present = values[~missing]
        # With an indicator: the mean, which is the column's offset, so a reader of the
        # model file alone fills an empty cell the same way (model-space 0).
        fill = float(present.mean() if indicator else np.median(present))
        group = GroupEncoding(column, "numeric", (column,), fill=fill, missing_indicator=indicator)
        block = _with_indicator(group, _fill(group, values[:, None], missing), missing)
        return group, block, _note(table_name, group, int(missing.sum())) if missing.any() else None
    cells = text_cells(series)
    return _fit_categories(
        column, (column,), [cells], rows, file_name, table_name, max_categories, indicator_share
    )


def _fit_categories(
    name: str,
    sources: tuple[str, ...],
    cells: list[np.ndarray],
    rows: np.ndarray,
    file_name: str,
    table_name: str,
    max_categories: int,
    indicator_share: float | None = None,
) -> tuple[GroupEncoding, np.ndarray, ImputationNote | None]:
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
    block, missing = _one_hot(group, cells, rows, file_name)
    if _wants_indicator(missing, indicator_share):
        group = GroupEncoding(name, kind, sources, categories, None, missing_indicator=True)
    block = _with_indicator(group, _fill(group, block, missing), missing)
    return group, block, _note(table_name, group, int(missing.sum())) if missing.any() else None


def _one_hot(
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
                f"{_names(group.categories)}",
                file=file_name,
                row=int(rows[unknown[0]]),
                column=source,
            )
        block[np.flatnonzero(present), codes[present]] = 1.0
    return block, ~block.any(axis=1)


def _fill(group: GroupEncoding, block: np.ndarray, missing: np.ndarray) -> np.ndarray:
    block = block.copy()
    if group.kind == "numeric":
        block[missing, 0] = group.fill
    elif group.fill is not None:  # else (indicator): no category
        block[missing, group.categories.index(group.fill)] = 1.0
    return block


def _wants_indicator(missing: np.ndarray, share: float | None) -> bool:
    return share is not None and bool(missing.any()) and missing.mean() >= share


def _with_indicator(group: GroupEncoding, block: np.ndarray, missing: np.ndarray) -> np.ndarray:
    if not group.missing_indicator:
        return block
    return np.concatenate([block, missing[:, None].astype(np.float64)], axis=1)


def _note(table_name: str, group: GroupEncoding, n_missing: int) -> ImputationNote:
    marked = f", marked in {group.name + MISSING_SUFFIX!r}" if group.missing_indicator else ""
    if group.kind == "numeric":
        how = "mean" if group.missing_indicator else "median"
        filled = f"{how} {group.fill:g}{marked}"
    elif group.fill is None:
        filled = f"no category{marked}"
    else:
        filled = f"most frequent category {group.fill!r}"
    return ImputationNote(
        table=table_name, column=group.name, n_missing=n_missing, filled_with=filled
    )


def _standardised_space(
    groups: list[GroupEncoding], raw: np.ndarray, file_name: str
) -> FeatureSpace:
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


# -- cells -------------------------------------------------------------------------
def _parse_numbers(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Values (NaN where missing or not a number) and where a present cell is not a number."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64), np.zeros(len(series), dtype=bool)
    if pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        bad = np.isinf(values)
        values[bad] = np.nan
        return values, bad
    codes, texts = text_codes(series)
    parsed = np.array([math.nan if t is None else _number(t) for t in texts.tolist()] + [math.nan])
    values = parsed[codes]  # code -1 picks the trailing NaN: missing
    texts_bad = np.array([t is not None for t in texts.tolist()] + [False]) & np.isnan(parsed)
    return values, texts_bad[codes]


def _number(text: str) -> float:
    if text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    return float(text) if is_number_text(text) and math.isfinite(float(text)) else math.nan


def _raise_bad_numbers(
    bad: np.ndarray, series: pd.Series, rows: np.ndarray, file_name: str, column: str, why: str
) -> None:
    if not bad.any():
        return
    first = int(np.flatnonzero(bad)[0])
    more = int(bad.sum()) - 1
    raise DataValidationError(
        f"{series.iloc[first]!r} is not a number, but {why}"
        + (f" ({more} more cells in this column are not numbers)" if more else ""),
        file=file_name,
        row=int(rows[first]),
        column=column,
    )


def _check_magnitude(values: np.ndarray, rows: np.ndarray, file_name: str, column: str) -> None:
    huge = np.abs(np.nan_to_num(values)) > MAX_ABS_VALUE
    if huge.any():
        first = int(np.flatnonzero(huge)[0])
        raise DataValidationError(
            f"the value {values[first]:g} is too large to use (limit {MAX_ABS_VALUE:g})",
            file=file_name,
            row=int(rows[first]),
            column=column,
        )


def _check_overrides(
    columns: list[str],
    numeric: set[str],
    categorical: set[str],
    multi: dict[str, list[str]],
    file_name: str,
) -> None:
    for name in sorted(numeric & categorical):
        raise ValueError(f"column {name!r} is declared both numeric and categorical")
    for name in sorted((numeric | categorical) - set(columns)):
        raise DataValidationError(
            f"declared numeric or categorical, but there is no such covariate column "
            f"(covariate columns: {_names(columns)})",
            file=file_name,
            column=name,
        )
    claimed: set[str] = set()
    for group, sources in multi.items():
        if not sources:
            raise ValueError(f"multi_categorical group {group!r} needs at least one column")
        for source in sources:
            if source not in columns:
                raise DataValidationError(
                    f"named in multi_categorical group {group!r}, but there is no such "
                    f"covariate column (covariate columns: {_names(columns)})",
                    file=file_name,
                    column=source,
                )
            if source in claimed or source in numeric | categorical:
                raise ValueError(f"column {source!r} is claimed by more than one declaration")
            claimed.add(source)
        if group in columns and group not in sources:
            raise DataValidationError(
                f"multi_categorical group {group!r} has the name of another column",
                file=file_name,
                column=group,
            )


def _names(names: Iterable[object], limit: int = 12) -> str:
    names = [str(name) for name in names]
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")
