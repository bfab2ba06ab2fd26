"""From an items table and a duels table to a validated, encoded DuelData.

The upload format (sample_data/README.md) is two tables, and an optional third:
items (an id column, an optional label column, covariates), duels (``left``,
``right``, the outcome as ``winner`` or ``y``, or ``winner``/``loser`` columns;
optional ``duel_id``; optional context columns) and contexts (a key column shared
with the duels, then context covariates). Every problem is reported with file, row
and column: strict (``on_invalid="error"``) lists every kind of problem of a file
at once; lenient (``on_invalid="drop"``) drops the invalid duel rows and reports each
one (``DataReport.rejected``). Rows with no outcome are skipped in both modes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from prefshap_core.data.build_notes import build_notes, more_notes
from prefshap_core.data.context_table import ContextJoin, join_contexts
from prefshap_core.data.csv_io import SOURCE_ROW, row_numbers, text_cells
from prefshap_core.data.duel_data import DataReport, DuelData
from prefshap_core.data.duel_rows import (
    KeyWords,
    describe_problem,
    key_problems,
    outcome_column,
    raise_problems,
    rejected_rows,
    validate_duel_rows,
)
from prefshap_core.data.encoding.spec import EncodedTable
from prefshap_core.data.encoding.tables import MISSING_INDICATOR_SHARE, encode_table, row_labels
from prefshap_core.data.id_columns import IgnoredColumn, split_id_like
from prefshap_core.data.readers import UPLOAD_TYPES, read_any
from prefshap_core.data.reserved_names import check_dataset_names
from prefshap_core.errors import DataProblems, DataValidationError

DUEL_COLUMNS = ("left", "right", "winner", "loser", "y", "duel_id")
ITEMS_FILE, DUELS_FILE, CONTEXTS_FILE = "items.csv", "duels.csv", "contexts.csv"
ITEM_ID_WORDS = KeyWords("item id", "item ids", "have no id", "repeat an earlier id")


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
    contexts: pd.DataFrame | None = None,
    contexts_file: str = CONTEXTS_FILE,
    use_columns: Iterable[str] = (),
    missing_indicators: bool = True,
) -> DuelData:
    """Validate and encode the tables; randomise each duel's orientation (seeded).

    ``label_column`` defaults to a ``name`` column when there is one.
    ``context_columns=None`` takes every duel column other than left, right,
    winner, loser, y, duel_id and the contexts key. ``item_columns=None`` makes every
    item column other than the id and label a covariate; a list keeps only those (the
    others stay in ``raw_items`` for display and filters). Inferred covariates that
    look like identifiers (``id_columns``) are left out and reported unless named in
    ``use_columns``. ``numeric``, ``categorical`` and ``multi_categorical`` override
    the inferred column kinds in whichever table holds the columns. ``contexts``: a
    table keyed by its first column (``context_table``), joined to the duels.
    With ``on_invalid="drop"`` invalid duel rows are dropped and reported in
    ``report.rejected``; with ``"error"`` every kind of problem is raised at once
    (:class:`DataProblems`). Rows without an outcome are skipped either way.
    ``missing_indicators=False``: no ``"<column> (missing)"`` columns; mostly-missing
    columns are only filled like the others (median / most frequent category).
    """
    if on_invalid not in ("error", "drop"):
        raise ValueError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    use_columns = tuple(use_columns)
    numeric, categorical = set(numeric), set(categorical)
    multi = dict(multi_categorical or {})
    declared = numeric | categorical | {c for s in multi.values() for c in s} | set(use_columns)
    indicator_share = MISSING_INDICATOR_SHARE if missing_indicators else None
    item_ids, labels, covariates, label = _item_ids_and_labels(
        items, id_column, label_column, items_file
    )
    ignored: list[IgnoredColumn] = []
    if item_columns is None:
        item_columns, ignored = split_id_like(items, covariates, "items", declared)
        if not item_columns:
            raise DataValidationError(
                "there are no covariate columns left: " + "; ".join(i.describe() for i in ignored),
                file=items_file,
            )
    else:
        unknown = [c for c in item_columns if c not in covariates]
        if unknown or not item_columns:
            raise DataValidationError(
                f"item columns {unknown or '[]'} are not covariates of the items table "
                f"(covariates: {', '.join(covariates)})",
                file=items_file,
            )
        item_columns = list(item_columns)
    outcome = outcome_column(duels, duels_file)
    join = None
    if contexts is not None:
        join = join_contexts(
            duels, contexts, duels_file=duels_file, contexts_file=contexts_file,
            reserved=DUEL_COLUMNS, use_columns=use_columns,
        )  # fmt: skip
        ignored += join.ignored
    own_contexts = _context_columns(duels, context_columns, duels_file, join)
    if context_columns is None:
        own_contexts, ignored_duel = split_id_like(duels, own_contexts, "duels", declared)
        ignored += ignored_duel
    all_contexts = own_contexts + (join.columns if join else [])
    _check_declared(numeric | categorical, multi, item_columns, all_contexts)
    encoded_items = encode_table(
        items,
        file_name=items_file,
        table_name="items",
        columns=item_columns,
        numeric=numeric & set(item_columns),
        categorical=categorical & set(item_columns),
        multi_categorical={g: s for g, s in multi.items() if set(s) <= set(item_columns)},
        max_categories=max_categories,
        missing_indicator_share=indicator_share,
    )

    rows = row_numbers(duels)
    checked = validate_duel_rows(duels, outcome, pd.Index(item_ids), rows, items_file)
    problems = list(checked.problems)
    if join is not None and join.problem is not None:
        unflagged = _not_yet_flagged(join.problem.rows, problems, checked.skipped)
        if len(unflagged):
            problems.append(replace(join.problem, rows=unflagged))
    if problems and on_invalid == "error":
        raise_problems(problems, rows, duels_file)
    bad = checked.skipped.copy()
    for problem in problems:
        bad[problem.rows] = True
    keep = np.flatnonzero(~bad)
    if len(keep) == 0:
        summary = "; ".join(describe_problem(p, rows) for p in problems)
        n_skipped = int(checked.skipped.sum())
        if n_skipped:
            summary += ("; " if summary else "") + f"{n_skipped} rows have no outcome"
        raise DataValidationError(f"no valid duel rows ({summary})", file=duels_file)

    rng = np.random.default_rng(seed)
    flip = rng.random(len(keep)) < 0.5
    left, right, y = checked.left[keep], checked.right[keep], checked.y[keep]
    left, right = np.where(flip, right, left), np.where(flip, left, right)
    y = np.where(flip, -y, y).astype(np.int8)

    encoded_context = None
    if all_contexts:
        table = duels[own_contexts].iloc[keep].set_axis(pd.Index(rows[keep], name=SOURCE_ROW))
        if join is not None:
            taken = contexts[join.columns].iloc[join.position[keep]]  # type: ignore[index]
            for column in join.columns:
                table[column] = taken[column].to_numpy()
        encoded_context = encode_table(
            table,
            file_name=duels_file if join is None else f"{duels_file} + {contexts_file}",
            table_name="context",
            numeric=numeric & set(all_contexts),
            categorical=categorical & set(all_contexts),
            multi_categorical={g: s for g, s in multi.items() if set(s) <= set(all_contexts)},
            max_categories=max_categories,
            missing_indicator_share=indicator_share,
        )
        raw_context = table
    unique_contexts, context_index, context_labels = _unique_contexts(encoded_context)
    check_dataset_names(
        encoded_items.space, encoded_context.space if encoded_context else None,
        items_file=items_file, duels_file=duels_file,
    )  # fmt: skip

    ids = pd.Index(item_ids)
    raw_duels = pd.DataFrame(
        {
            "duel_id": checked.duel_ids[keep],
            "left": pd.Categorical.from_codes(left, categories=ids),
            "right": pd.Categorical.from_codes(right, categories=ids),
            # ties have no winner: left out of winner-oriented views
            "winner": pd.Categorical.from_codes(
                np.where(y > 0, left, np.where(y < 0, right, -1)), categories=ids
            ),
            "y": y,
        }
    )
    if encoded_context is not None:
        for column in all_contexts:
            raw_duels[column] = pd.Categorical(raw_context[column].to_numpy())
    n_ties, n_skipped = int((y == 0).sum()), int(checked.skipped.sum())
    report = DataReport(
        imputed=encoded_items.notes + (encoded_context.notes if encoded_context else ()),
        dropped_duels=int(bad.sum()) - n_skipped,
        dropped_reasons=tuple(describe_problem(p, rows) for p in problems),
        orientation_flipped=int(flip.sum()),
        notes=build_notes(encoded_items, encoded_context, label, len(keep), int(flip.sum()), seed)
        + more_notes(n_ties, n_skipped, ignored, join, missing_indicators),
        skipped_duels=n_skipped,
        ties=n_ties,
        ignored_columns=tuple(ignored),
        rejected=rejected_rows(problems, checked.skipped, duels, rows, duels_file),
    )
    return DuelData(
        name=name,
        item_ids=item_ids,
        items=encoded_items.model,
        item_space=encoded_items.space,
        left=left.astype(np.int64),
        right=right.astype(np.int64),
        y=y,
        duel_ids=checked.duel_ids[keep],
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


def find_table(folder: Path, stem: str) -> Path | None:
    """``<stem>.csv`` (or .tsv, .txt, .xlsx, .parquet) in ``folder``; None if absent."""
    for kind in UPLOAD_TYPES:
        if (folder / f"{stem}.{kind}").is_file():
            return folder / f"{stem}.{kind}"
    return None


def load_directory(path: str | Path, *, decimal: str = "auto", **options: object) -> DuelData:
    """Read items, duels and, if present, contexts from a folder (the upload format).

    Each table is ``<name>.csv`` (or ``.tsv``, ``.txt``, ``.xlsx``, ``.parquet``); the
    duels table may be in any layout of ``data.layouts`` (a wide choice table needs no
    items table). ``options`` go to :func:`build_duel_data` (``name`` defaults to the
    folder name; e.g. ``missing_indicators=False``), ``mapping`` (a ``ColumnMapping``)
    to the layout reader; ``decimal`` to the CSV reader (``"auto"``, ``"."`` or ``","``).
    """
    from prefshap_core.data.layouts.loading import load_files

    folder = Path(path)
    found = {stem: find_table(folder, stem) for stem in ("items", "duels", "contexts")}
    if found["duels"] is None or (found["items"] is None and not _may_lack_items(found["duels"])):
        missing = "duels" if found["duels"] is None else "items"
        raise DataValidationError(
            f"not found in {folder}: a data folder needs {ITEMS_FILE} and {DUELS_FILE} "
            f"(or .xlsx / .parquet tables of those names; {CONTEXTS_FILE} is optional)",
            file=f"{missing}.csv",
        )
    options.setdefault("name", folder.resolve().name)
    return load_files(
        found["duels"],
        found["items"],
        found["contexts"],
        decimal=decimal,
        **options,  # type: ignore[arg-type]
    )


def _may_lack_items(duels: Path) -> bool:
    """A wide choice table has no item table (its rows describe the alternatives)."""
    from prefshap_core.data.layouts.wide import is_wide_table

    try:
        return is_wide_table(read_any(duels, file_name=duels.name))
    except DataValidationError:
        return True  # the reader reports it


def _not_yet_flagged(hits: np.ndarray, problems: list, skipped: np.ndarray) -> np.ndarray:
    flagged = skipped.copy()
    for problem in problems:
        flagged[problem.rows] = True
    return hits[~flagged[hits]]


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
    problems = key_problems(ids, rows, id_column, file_name, ITEM_ID_WORDS)
    if problems:
        raise DataProblems(sorted(problems, key=lambda e: e.row or 0))

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
    duels: pd.DataFrame,
    context_columns: Sequence[str] | None,
    file_name: str,
    join: ContextJoin | None,
) -> list[str]:
    columns = [str(c) for c in duels.columns]
    reserved = DUEL_COLUMNS + ((join.key,) if join is not None else ())
    if context_columns is None:
        return [c for c in columns if c not in reserved]
    for column in context_columns:
        if column not in columns or column in reserved:
            raise DataValidationError(
                "named as a context column, but "
                + (
                    "it is one of " + ", ".join(reserved)
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


# -- contexts ------------------------------------------------------------------
def _unique_contexts(
    encoded: EncodedTable | None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Unique context rows (model space), each duel's row among them, readable labels."""
    if encoded is None:
        return None, None, None
    unique, first, index = np.unique(encoded.model, axis=0, return_index=True, return_inverse=True)
    labels = row_labels(encoded.raw[first], encoded.spec)
    return unique, index.reshape(-1).astype(np.int64), labels
