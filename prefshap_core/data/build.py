"""From an items table and a duels table to a validated, encoded DuelData.

The upload format (sample_data/README.md) is two tables: items (an id column, an
optional label column, covariates) and duels (``left``, ``right``, the outcome as
``winner`` or ``y``, optional ``duel_id``, optional context columns). Every problem
is reported with file, row and column; real-data loaders pass ``on_invalid="drop"``
to drop (and count) unusable duel rows instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import SOURCE_ROW, read_table, row_numbers, text_cells
from prefshap_core.data.duel_data import DataReport, DuelData
from prefshap_core.data.duel_rows import (
    describe_problem,
    more_rows,
    outcome_column,
    raise_first_problem,
    validate_duel_rows,
)
from prefshap_core.data.encoding import EncodedTable, EncodingSpec, encode_table, row_labels
from prefshap_core.data.reserved_names import check_dataset_names
from prefshap_core.errors import DataValidationError

DUEL_COLUMNS = ("left", "right", "winner", "y", "duel_id")
ITEMS_FILE, DUELS_FILE = "items.csv", "duels.csv"


def build_duel_data(
    items: pd.DataFrame,
    duels: pd.DataFrame,
    *,
    name: str,
    id_column: str = "id",
    label_column: str | None = None,
    context_columns: Sequence[str] | None = None,
    item_columns: Sequence[str] | None = None,
    numeric: Iterable[str] = (),
    categorical: Iterable[str] = (),
    multi_categorical: Mapping[str, Sequence[str]] | None = None,
    max_categories: int = 50,
    seed: int = 0,
    on_invalid: Literal["error", "drop"] = "error",
    items_file: str = ITEMS_FILE,
    duels_file: str = DUELS_FILE,
) -> DuelData:
    """Validate and encode the two tables; randomise each duel's orientation (seeded).

    ``label_column`` defaults to a ``name`` column when there is one.
    ``context_columns=None`` takes every duel column other than left, right,
    winner, y and duel_id. ``item_columns=None`` makes every item column other than
    the id and label a covariate; a list keeps only those (the others stay in
    ``raw_items`` for display and filters). ``numeric``, ``categorical`` and ``multi_categorical``
    override the inferred column kinds in whichever table holds the columns.
    With ``on_invalid="drop"`` invalid duel rows are dropped and counted in the
    report; with ``"error"`` the first one raises.
    """
    if on_invalid not in ("error", "drop"):
        raise ValueError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    item_ids, labels, covariates, label = _item_ids_and_labels(
        items, id_column, label_column, items_file
    )
    if item_columns is None:
        item_columns = covariates
    else:
        unknown = [c for c in item_columns if c not in covariates]
        if unknown or not item_columns:
            raise DataValidationError(
                f"item columns {unknown or '[]'} are not covariates of the items table "
                f"(covariates: {', '.join(covariates)})",
                file=items_file,
            )
        item_columns = list(item_columns)
    contexts = _context_columns(duels, context_columns, duels_file)
    numeric, categorical = set(numeric), set(categorical)
    multi = dict(multi_categorical or {})
    _check_declared(numeric | categorical, multi, item_columns, contexts)
    encoded_items = encode_table(
        items,
        file_name=items_file,
        table_name="items",
        columns=item_columns,
        numeric=numeric & set(item_columns),
        categorical=categorical & set(item_columns),
        multi_categorical={g: s for g, s in multi.items() if set(s) <= set(item_columns)},
        max_categories=max_categories,
    )

    outcome = outcome_column(duels, duels_file)
    rows = row_numbers(duels)
    left, right, y, duel_ids, problems = validate_duel_rows(
        duels, outcome, pd.Index(item_ids), rows, items_file
    )
    bad = np.zeros(len(duels), dtype=bool)
    for problem in problems:
        bad[problem.rows] = True
    if problems and on_invalid == "error":
        raise_first_problem(problems, rows, duels_file)
    keep = np.flatnonzero(~bad)
    if len(keep) == 0:
        summary = "; ".join(describe_problem(p, rows) for p in problems)
        raise DataValidationError(f"no valid duel rows ({summary})", file=duels_file)

    rng = np.random.default_rng(seed)
    flip = rng.random(len(keep)) < 0.5
    left, right, y = left[keep], right[keep], y[keep]
    left, right = np.where(flip, right, left), np.where(flip, left, right)
    y = np.where(flip, -y, y).astype(np.int8)

    encoded_context = None
    if contexts:
        table = duels[contexts].iloc[keep].set_axis(pd.Index(rows[keep], name=SOURCE_ROW))
        encoded_context = encode_table(
            table,
            file_name=duels_file,
            table_name="context",
            numeric=numeric & set(contexts),
            categorical=categorical & set(contexts),
            multi_categorical={g: s for g, s in multi.items() if set(s) <= set(contexts)},
            max_categories=max_categories,
        )
    unique_contexts, context_index, context_labels = _unique_contexts(encoded_context)
    check_dataset_names(
        encoded_items.space, encoded_context.space if encoded_context else None,
        items_file=items_file, duels_file=duels_file,
    )  # fmt: skip

    raw_duels = pd.DataFrame(
        {
            "duel_id": duel_ids[keep],
            "left": item_ids[left],
            "right": item_ids[right],
            "winner": item_ids[np.where(y > 0, left, right)],
            "y": y,
        }
    )
    for column in contexts:
        raw_duels[column] = duels[column].to_numpy()[keep]
    report = DataReport(
        imputed=encoded_items.notes + (encoded_context.notes if encoded_context else ()),
        dropped_duels=int(bad.sum()),
        dropped_reasons=tuple(describe_problem(p, rows) for p in problems),
        orientation_flipped=int(flip.sum()),
        notes=_notes(encoded_items, encoded_context, label, len(keep), int(flip.sum()), seed),
    )
    return DuelData(
        name=name,
        item_ids=item_ids,
        items=encoded_items.model,
        item_space=encoded_items.space,
        left=left.astype(np.int64),
        right=right.astype(np.int64),
        y=y,
        duel_ids=duel_ids[keep],
        item_labels=labels,
        raw_items=items.reset_index(drop=True),
        context_space=encoded_context.space if encoded_context else None,
        contexts=unique_contexts,
        context_index=context_index,
        context_labels=context_labels,
        raw_duels=raw_duels,
        report=report,
        item_encoding=encoded_items.spec,
        context_encoding=encoded_context.spec if encoded_context else None,
    )


def load_directory(path: str | Path, **options: object) -> DuelData:
    """Read ``items.csv`` and ``duels.csv`` from a folder (the upload format) and build.

    ``options`` go to :func:`build_duel_data` (``name`` defaults to the folder name).
    """
    folder = Path(path)
    tables = {}
    for file in (ITEMS_FILE, DUELS_FILE):
        if not (folder / file).is_file():
            raise DataValidationError(
                f"not found in {folder}: a data folder needs {ITEMS_FILE} and {DUELS_FILE}",
                file=file,
            )
        tables[file] = read_table(folder / file, file_name=file)
    options.setdefault("name", folder.resolve().name)
    return build_duel_data(tables[ITEMS_FILE], tables[DUELS_FILE], **options)  # type: ignore[arg-type]


# -- items ---------------------------------------------------------------------
def _item_ids_and_labels(
    items: pd.DataFrame, id_column: str, label_column: str | None, file_name: str
) -> tuple[np.ndarray, np.ndarray, list[str], str | None]:
    """Item ids, display labels, covariate columns and the label column used."""
    columns = [str(c) for c in items.columns]
    if id_column not in columns:
        raise DataValidationError(
            f"there is no {id_column!r} column, which must hold each item's id "
            f"(columns found: {', '.join(columns[:12])}; is the header row missing?)",
            file=file_name,
            column=id_column,
        )
    if len(items) < 2:
        raise DataValidationError(f"needs at least two items, has {len(items)}", file=file_name)
    rows = row_numbers(items)
    ids = text_cells(items[id_column])
    missing = np.flatnonzero(pd.isna(ids))
    if len(missing):
        raise DataValidationError(
            "the item id is missing" + more_rows(len(missing) - 1, "have no id"),
            file=file_name,
            row=int(rows[missing[0]]),
            column=id_column,
        )
    first_row: dict[str, int] = {}
    for position, item in enumerate(ids.tolist()):
        if item in first_row:
            raise DataValidationError(
                f"item id {item!r} appears twice: rows {first_row[item]} and "
                f"{rows[position]}; item ids must be unique",
                file=file_name,
                row=int(rows[position]),
                column=id_column,
            )
        first_row[item] = int(rows[position])

    if label_column is None:
        label_column = next((c for c in columns if c == "name"), None) or next(
            (c for c in columns if c.lower() == "name" and c != id_column), None
        )
    elif label_column not in columns:
        raise DataValidationError(
            "the label column is not in the file", file=file_name, column=label_column
        )
    labels = ids.copy()
    if label_column is not None and label_column != id_column:
        given = text_cells(items[label_column])
        labels = np.where(pd.isna(given), ids, given)
    covariates = [c for c in columns if c not in (id_column, label_column)]
    if not covariates:
        raise DataValidationError(
            f"there are no covariate columns besides {id_column!r}"
            + (f" and {label_column!r}" if label_column else ""),
            file=file_name,
        )
    return ids.astype(str), labels.astype(str), covariates, label_column


# -- duels ---------------------------------------------------------------------
def _context_columns(
    duels: pd.DataFrame, context_columns: Sequence[str] | None, file_name: str
) -> list[str]:
    columns = [str(c) for c in duels.columns]
    if context_columns is None:
        return [c for c in columns if c not in DUEL_COLUMNS]
    for column in context_columns:
        if column not in columns or column in DUEL_COLUMNS:
            raise DataValidationError(
                "named as a context column, but "
                + (
                    "it is one of " + ", ".join(DUEL_COLUMNS)
                    if column in columns
                    else "there is no such column"
                ),
                file=file_name,
                column=column,
            )
    return list(context_columns)


def _check_declared(
    declared: set[str],
    multi: Mapping[str, Sequence[str]],
    item_columns: list[str],
    contexts: list[str],
) -> None:
    for group, sources in multi.items():
        if not (set(sources) <= set(item_columns) or set(sources) <= set(contexts)):
            raise DataValidationError(
                f"multi_categorical group {group!r} must take all its columns from the "
                f"item covariates ({', '.join(item_columns)}) or all from the context "
                f"columns ({', '.join(contexts) or 'none'})",
                column=group,
            )
    unknown = sorted(declared - set(item_columns) - set(contexts))
    if unknown:
        raise DataValidationError(
            f"declared numeric/categorical, but it is neither an item covariate "
            f"({', '.join(item_columns)}) nor a context column ({', '.join(contexts) or 'none'})",
            column=unknown[0],
        )


# -- contexts and notes --------------------------------------------------------
def _unique_contexts(
    encoded: EncodedTable | None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Unique context rows (model space), each duel's row among them, readable labels."""
    if encoded is None:
        return None, None, None
    unique, first, index = np.unique(encoded.model, axis=0, return_index=True, return_inverse=True)
    labels = row_labels(encoded.raw[first], encoded.spec)
    return unique, index.reshape(-1).astype(np.int64), labels


def _notes(
    items: EncodedTable,
    context: EncodedTable | None,
    label: str | None,
    n_duels: int,
    n_flipped: int,
    seed: int,
) -> tuple[str, ...]:
    notes = [f"items: {len(items.model)}; display label column: {label or '(the id)'}"]
    notes.append(_kinds("item covariates", items.spec))
    if context is not None:
        notes.append(_kinds("context columns", context.spec))
    notes.append(
        f"orientation randomised (seed {seed}): {n_flipped} of {n_duels} duels had "
        "left and right swapped (and y negated)"
    )
    return tuple(notes)


def _kinds(title: str, spec: EncodingSpec) -> str:
    parts = [
        g.name if g.kind == "numeric" else f"{g.name} ({g.kind}, {len(g.categories)} categories)"
        for g in spec.groups
    ]
    return f"{title}: " + ", ".join(parts)
