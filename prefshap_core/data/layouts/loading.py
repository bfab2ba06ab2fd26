"""Building a DuelData from tables or files in any layout (``read_layout``, then
:func:`build_duel_data`), with the layout's report line, mapping and duel groups."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from prefshap_core.data.build import CONTEXTS_FILE, DUELS_FILE, ITEMS_FILE, build_duel_data
from prefshap_core.data.csv_io import reading_row_names
from prefshap_core.data.duel_data import DuelData
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.data.layouts.reader import LayoutRead, read_layout
from prefshap_core.data.readers import read_any
from prefshap_core.errors import DataProblems, DataValidationError


def build_from_tables(
    items: pd.DataFrame | None,
    duels: pd.DataFrame,
    *,
    contexts: pd.DataFrame | None = None,
    mapping: ColumnMapping | None = None,
    items_file: str = ITEMS_FILE,
    duels_file: str = DUELS_FILE,
    contexts_file: str = CONTEXTS_FILE,
    use_columns: tuple[str, ...] | list[str] = (),
    **options: Any,
) -> DuelData:
    """:func:`read_layout`, then :func:`build_duel_data` on the long tables (``options``)."""
    use_columns = tuple(use_columns)
    options.setdefault("name", Path(duels_file).stem)
    read = read_layout(
        items,
        duels,
        contexts,
        mapping,
        items_file=items_file,
        duels_file=duels_file,
        contexts_file=contexts_file,
        use_columns=use_columns,
    )
    if read.context_columns is not None:
        options.setdefault("context_columns", read.context_columns)
    try:
        data = build_duel_data(
            read.items,
            read.duels,
            contexts=read.contexts,
            id_column=read.mapping.id or "id",
            items_file=items_file if read.layout != "wide" else f"{duels_file} (its alternatives)",
            duels_file=duels_file,
            contexts_file=contexts_file,
            use_columns=use_columns,
            **options,
        )
    except DataValidationError as exc:
        raise in_user_columns(exc, user_columns(read), duels_file) from None
    return attach_layout(data, read)


def user_columns(read: LayoutRead) -> dict[str, str]:
    """The user's duels column behind each upload-format column the reshaped table has
    (``left`` -> ``item1``): what a message about a duel row names."""
    m = read.mapping
    if read.layout == "wide":  # the sides are built alternatives, not a column of the file
        return {}
    if read.layout == "long" and m.outcome is None:  # winner/loser columns
        names = {"winner": m.left, "loser": m.right}
    else:
        names = {"left": m.left, "right": m.right}
        if read.layout == "long":
            names |= {"winner": m.outcome, "y": m.outcome}
    return {k: v for k, v in names.items() if v is not None and v != k}


def in_user_columns(
    exc: DataValidationError, names: dict[str, str], duels_file: str
) -> DataValidationError:
    """``exc`` with the duels file's columns under the user's names (as it was if none)."""
    if not names:
        return exc
    if isinstance(exc, DataProblems):
        return DataProblems([in_user_columns(p, names, duels_file) for p in exc.problems])
    if exc.file != duels_file or exc.column not in names:
        return exc
    reason = exc.reason
    for first, second in (("left", "right"), ("winner", "loser")):
        if first in names or second in names:  # "an item duels itself: left and right are both"
            reason = reason.replace(
                f"{first} and {second} are both",
                f"{names.get(first, first)} and {names.get(second, second)} are both",
            )
    return DataValidationError(reason, file=exc.file, row=exc.row, column=names[exc.column])


def attach_layout(data: DuelData, read: LayoutRead) -> DuelData:
    """The DuelData with the layout's report line, mapping, set-aside columns and groups."""
    report = replace(
        data.report,
        layout=read.layout,
        read_as=read.read_as,
        mapping=read.mapping,
        doubt=read.doubt,
        ignored_columns=data.report.ignored_columns + read.set_aside,
        notes=(read.read_as, *data.report.notes, *(c.describe() for c in read.set_aside)),
    )
    groups = None
    if read.groups is not None:
        groups = _kept_groups(data, read)
    return replace(data, report=report, duel_groups=groups)


def _kept_groups(data: DuelData, read: LayoutRead) -> np.ndarray:
    """Each kept duel's source row (the duel ids name their rows, ``<row>.<k>``)."""
    by_id = dict(zip(read.duels["duel_id"].astype(str).tolist(), read.groups.tolist(), strict=True))
    return np.array([by_id[d] for d in data.duel_ids.tolist()], dtype=np.int64)


def load_files(
    duels: str | Path,
    items: str | Path | None = None,
    contexts: str | Path | None = None,
    *,
    mapping: ColumnMapping | None = None,
    decimal: str = "auto",
    **options: Any,
) -> DuelData:
    """Read the files (csv/tsv/xlsx/parquet; R row names allowed) and build the DuelData.

    ``name`` defaults to the duels file's stem; ``options`` go to
    :func:`build_from_tables` / :func:`build_duel_data`.
    """
    paths = {"items": items, "duels": duels, "contexts": contexts}
    tables: dict[str, pd.DataFrame | None] = {}
    with reading_row_names():
        for part, path in paths.items():
            tables[part] = (
                None
                if path is None
                else read_any(Path(path), file_name=Path(path).name, decimal=decimal)
            )
    options.setdefault("name", Path(duels).stem)
    return build_from_tables(
        tables["items"],
        tables["duels"],  # type: ignore[arg-type]
        contexts=tables["contexts"],
        mapping=mapping,
        items_file=Path(items).name if items is not None else ITEMS_FILE,
        duels_file=Path(duels).name,
        contexts_file=Path(contexts).name if contexts is not None else CONTEXTS_FILE,
        **options,
    )
