"""Reading a user's table in any of the upload formats: CSV (any separator), .xlsx, .parquet.

The format is recognised from the bytes (a zip archive is a workbook, ``PAR1`` a
parquet file), so a misnamed file still reads. Every reader returns what
:func:`prefshap_core.data.csv_io.read_table` returns: one header of distinct names,
the 1-based data row of each record in the index, missing cells as ``None``. A
workbook's or parquet file's numbers stay numbers (the encoder reads them as they
are); its text cells are stripped like CSV cells. Workbooks are read with openpyxl,
parquet files with pyarrow: data, never code, is loaded from them (no pickle).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import (
    MISSING_TOKENS,
    SOURCE_ROW,
    ZIP_MAGIC,
    check_header,
    read_bytes,
    read_table,
)
from prefshap_core.data.upload_limits import check_workbook, parquet_text_columns
from prefshap_core.errors import DataValidationError

_PARQUET_MAGIC = b"PAR1"
# The upload formats, as file pickers name them; a folder's tables are "<stem>.<type>".
UPLOAD_TYPES = ("csv", "tsv", "txt", "xlsx", "parquet")


def read_any(source: str | Path | bytes, *, file_name: str, decimal: str = "auto") -> pd.DataFrame:
    """Read a CSV, .xlsx (first sheet) or .parquet table; errors name ``file_name``."""
    raw = read_bytes(source, file_name)  # bounded by the memory budget
    if raw.startswith(ZIP_MAGIC):
        return _read_workbook(raw, file_name)
    if raw.startswith(_PARQUET_MAGIC):
        return _read_parquet(raw, file_name)
    return read_table(raw, file_name=file_name, decimal=decimal)


def _read_workbook(raw: bytes, file_name: str) -> pd.DataFrame:
    check_workbook(raw, file_name)  # sizes and the sheet's extent, before openpyxl parses
    try:
        table = pd.read_excel(
            io.BytesIO(raw), sheet_name=0, header=None, engine="openpyxl",
            keep_default_na=False, na_values=[""],  # cells as the CSV reader reads them
        )  # fmt: skip
    except Exception as exc:  # openpyxl raises many kinds for a broken archive
        raise DataValidationError(
            f"this is a zip archive but not a readable .xlsx workbook ({type(exc).__name__}: "
            f"{exc}); save the sheet as .xlsx or CSV",
            file=file_name,
        ) from None
    cells = pd.DataFrame(
        {k: _clean_column(table[k]) for k in table.columns}, dtype=object, copy=False
    )
    filled = ~_blank_rows(table)
    if not filled.any():
        raise DataValidationError("the workbook's first sheet is empty", file=file_name)
    first = int(np.flatnonzero(filled)[0])
    header_cells = ["" if v is None else str(v) for v in cells.iloc[first].tolist()]
    header = check_header(header_cells, file_name)
    body = cells.iloc[first + 1 :, : len(header)]
    extra = cells.iloc[first + 1 :, len(header) :]
    if extra.notna().any(axis=None):
        row = int(np.flatnonzero(extra.notna().any(axis=1).to_numpy())[0]) + 1
        raise DataValidationError(
            f"has cells beyond the header's {len(header)} columns", file=file_name, row=row
        )
    numbers = np.arange(1, len(body) + 1, dtype=np.int64)
    keep = filled[first + 1 :]  # blank rows are skipped, as in CSV
    body = body[keep].set_axis(header, axis=1)
    if body.empty:
        raise DataValidationError("the sheet has a header row but no data rows", file=file_name)
    return body.set_axis(pd.Index(numbers[keep], name=SOURCE_ROW), axis=0)


def _read_parquet(raw: bytes, file_name: str) -> pd.DataFrame:
    # The footer's sizes first; text columns stay dictionaries, so a value repeated
    # in every row is held once (cleaning works on the distinct values anyway).
    text_columns = parquet_text_columns(raw, file_name)
    try:
        table = pd.read_parquet(
            io.BytesIO(raw), engine="pyarrow", read_dictionary=text_columns or None
        )
    except Exception as exc:  # pyarrow's errors for a corrupt file vary
        raise DataValidationError(
            f"not a readable parquet file ({type(exc).__name__}: {exc})", file=file_name
        ) from None
    header = check_header([str(c) for c in table.columns], file_name)
    if len(header) != table.shape[1]:
        raise DataValidationError("a column of the parquet file has no name", file=file_name)
    if table.empty:
        raise DataValidationError("the file has no data rows", file=file_name)
    table = table.set_axis(header, axis=1)
    blank = _blank_rows(table)
    for column in header:
        if not pd.api.types.is_numeric_dtype(table[column]):
            table[column] = pd.Series(_clean_column(table[column]), index=table.index, dtype=object)
    index = pd.Index(np.arange(1, len(table) + 1, dtype=np.int64), name=SOURCE_ROW)
    table = table.set_axis(index, axis=0)
    if blank.all():  # blank rows are skipped, as in CSV
        raise DataValidationError("the file has no data rows", file=file_name)
    return table[~blank]


def _clean_column(series: pd.Series) -> np.ndarray:
    """Object array of cleaned cells (each distinct value cleaned once); None = missing."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    cleaned = np.empty(len(uniques) + 1, dtype=object)  # the last: missing (code -1)
    cleaned[: len(uniques)] = [_clean(v) for v in np.asarray(uniques, dtype=object).tolist()]
    return cleaned[codes]


def _blank_rows(table: pd.DataFrame) -> np.ndarray:
    """Rows with no text at all (empty or whitespace cells; ``NA`` is text), as CSV skips."""
    blank = np.ones(len(table), dtype=bool)
    for column in table.columns:
        codes, uniques = pd.factorize(table[column], use_na_sentinel=True)
        empty = [isinstance(v, str) and not v.strip() for v in np.asarray(uniques, dtype=object)]
        blank &= np.asarray([*empty, True], dtype=bool)[codes]
    return blank


def _clean(value: object) -> object:
    """Strip text cells; missing tokens, NaN and empty text become None; numbers stay."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NaT:
        return None
    if isinstance(value, str):
        text = value.strip()
        return None if text in MISSING_TOKENS else text
    if isinstance(value, bool | np.bool_):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float | np.integer | np.floating):
        return value
    return str(value).strip() or None
