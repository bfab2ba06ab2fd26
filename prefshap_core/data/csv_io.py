"""Reading user CSV files into tables of strings, with errors a person can act on.

Every cell comes back as a stripped string or ``None`` (missing); deciding what is a
number is the encoder's job, because only it knows which columns are covariates.
The returned table's index holds each record's 1-based *data row* number in the
file (index name :data:`SOURCE_ROW`), so later errors can point at the file's own
line (``row + 1``) even when blank lines were skipped.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import re
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

import numpy as np
import pandas as pd

from prefshap_core.data.upload_limits import read_file_bytes
from prefshap_core.errors import DataValidationError

MISSING_TOKENS = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "None", "?"})
SOURCE_ROW = "row"

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
ZIP_MAGIC = b"PK\x03\x04"  # an .xlsx workbook is a zip archive
# A real CSV has (almost) no control characters; random bytes have ~11% of them.
_MAX_CONTROL_FRACTION = 0.01
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_UNSEEN = object()
_MAX_SHARED = 2_000_000  # distinct cell texts shared (bounds the cache itself)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# The name given to an unnamed first column (R's write.csv row names) while
# reading_row_names() is on; the layout reader then uses it as a key or rejects it.
ROW_NAMES = "(row names)"
_ROW_NAMES_ALLOWED: ContextVar[bool] = ContextVar("row_names_allowed", default=False)


@contextlib.contextmanager
def reading_row_names() -> Iterator[None]:
    """Within it, an unnamed first header cell names the column :data:`ROW_NAMES`.

    The readers keep rejecting it elsewhere: only a reader that sees every file
    can tell whether the column is a key (referenced by another file) or debris.
    """
    token = _ROW_NAMES_ALLOWED.set(True)
    try:
        yield
    finally:
        _ROW_NAMES_ALLOWED.reset(token)


def unnamed_column_reason(position: int) -> str:
    """The message for a header cell with no name (a column nothing references)."""
    return (
        f"column {position} of the header row has no name: every column needs a "
        "name (an unnamed first column is often an index written by a spreadsheet "
        "or pandas; delete it)"
    )


def read_table(
    source: str | Path | bytes, *, file_name: str, decimal: str | None = "auto"
) -> pd.DataFrame:
    """Read a CSV file (a path, or the uploaded bytes) into a table of strings.

    Strips a BOM, decodes UTF-8 (else Windows-1252, else Latin-1), accepts ``,``
    ``;`` or tab as delimiter (the header line decides), strips whitespace from
    names and cells, maps :data:`MISSING_TOKENS` to ``None`` and skips blank lines.
    Numbers are rewritten in one plain form (``decimal``: ``"."``, ``","`` or
    ``"auto"``, see :func:`plain_numbers`; ``None`` keeps them as written).
    Raises :class:`DataValidationError`
    (naming ``file_name`` and, where it makes sense, the row and column) for anything
    that is not a rectangular table with one header row of distinct names and at
    least one data row.
    """
    if decimal not in ("auto", ".", ",", None):
        raise ValueError(f"decimal must be 'auto', '.', ',' or None, got {decimal!r}")
    raw = read_bytes(source, file_name)
    text = _decode(raw, file_name)
    del raw
    header, columns, numbers, delimiter = _parse_records(text, file_name)
    del text
    index = pd.Index(np.asarray(numbers, dtype=np.int64), name=SOURCE_ROW)
    data = {}
    for name, column in zip(header, columns, strict=True):
        data[name] = np.empty(len(column), dtype=object)
        data[name][:] = column
        column.clear()  # peak memory: one copy of each column at a time
    if decimal == "auto":
        decimal = "," if delimiter != "," and _has_decimal_commas(data) else "."
    for name in header if decimal is not None else ():
        data[name] = plain_numbers(data[name], decimal)
    return pd.DataFrame(data, index=index, dtype=object, copy=False)


_DECIMAL_COMMA = re.compile(r"[+-]?(\d{1,3}(\.\d{3})+|\d+)(,\d+)?([eE][+-]?\d+)?")
_THOUSANDS_COMMA = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?([eE][+-]?\d+)?")
_COMMA_FRACTION = re.compile(r"[+-]?\d*,\d+([eE][+-]?\d+)?")


def plain_numbers(cells: np.ndarray, decimal: str) -> np.ndarray:
    """Cells that are numbers written with separators, rewritten as plain numbers.

    ``decimal=","``: ``1.234,5`` -> ``1234.5`` and ``0,25`` -> ``0.25``;
    ``decimal="."``: thousands commas go, ``1,234,567.5`` -> ``1234567.5``. Other
    cells are left as they are (the encoder decides what is a number, and names a
    cell that is not).
    """
    codes, uniques = pd.factorize(cells, use_na_sentinel=True)
    texts = uniques.tolist() if hasattr(uniques, "tolist") else list(uniques)
    changed = False
    for k, text in enumerate(texts):
        if not isinstance(text, str) or not text[-1:].isdigit():
            continue
        if "," not in text and (decimal == "." or "." not in text):
            continue
        if decimal == "," and _DECIMAL_COMMA.fullmatch(text):
            texts[k] = text.replace(".", "").replace(",", ".")
            changed = True
        elif decimal == "." and _THOUSANDS_COMMA.fullmatch(text):
            texts[k] = text.replace(",", "")
            changed = True
    if not changed:
        return cells
    table = np.empty(len(texts) + 1, dtype=object)
    table[: len(texts)] = texts
    return table[codes]  # code -1 (missing) picks the trailing None


def _has_decimal_commas(columns: dict[str, np.ndarray]) -> bool:
    """Whether any column holds a number with a decimal comma (``0,5``, ``1.234,5``)."""
    for cells in columns.values():
        uniques = pd.unique(cells)
        for text in uniques[:10_000].tolist():
            if (
                isinstance(text, str)
                and "," in text
                and _COMMA_FRACTION.fullmatch(text.replace(".", ""))
            ):
                return True
    return False


def row_numbers(table: pd.DataFrame) -> np.ndarray:
    """1-based data-row numbers of a table's rows, as its source file counts them.

    Tables from :func:`read_table` (and row subsets of them) carry the file's
    numbers in their index; any other table is numbered by position.
    """
    if table.index.name == SOURCE_ROW and pd.api.types.is_integer_dtype(table.index):
        return np.asarray(table.index, dtype=np.int64)
    return np.arange(1, len(table) + 1, dtype=np.int64)


def text_cells(series: pd.Series) -> np.ndarray:
    """Object array of stripped strings, ``None`` where missing, from a column of any dtype.

    In-memory tables hold numbers too: an integral float (``3.0``, e.g. an integer
    column that pandas widened for a NaN) becomes ``"3"``, so ids and categories
    match the text of a CSV file.
    """
    codes, texts = text_codes(series)
    cells = np.full(len(series), None, dtype=object)
    present = codes >= 0
    cells[present] = texts[codes[present]]
    return cells


def text_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's index into an array of cleaned distinct texts (-1: missing).

    Columns repeat their values (ids, categories), so each distinct value is
    cleaned once.
    """
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    texts = np.empty(len(uniques), dtype=object)
    texts[:] = [_cell_text(value) for value in np.asarray(uniques, dtype=object).tolist()]
    missing = np.flatnonzero(pd.isna(texts))
    if len(missing):
        codes = np.where(np.isin(codes, missing), -1, codes)
    return codes, texts


def _cell_text(value: object) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return None if text in MISSING_TOKENS else text


def is_number_text(text: str) -> bool:
    """A plain decimal number (no ``inf``, ``nan``, ``1_000`` or hex)."""
    return _NUMBER.fullmatch(text) is not None


def read_bytes(source: str | Path | bytes, file_name: str) -> bytes:
    """The file's bytes, refused past the size the memory budget allows (read in
    blocks with a running count: :func:`upload_limits.read_file_bytes`)."""
    return read_file_bytes(source, file_name)


def _decode(raw: bytes, file_name: str) -> str:
    if not raw.strip():
        raise DataValidationError("the file is empty", file=file_name)
    if raw.startswith(ZIP_MAGIC):
        raise DataValidationError(
            "this is a zip archive (an .xlsx workbook?), not CSV text: "
            "save the sheet as CSV (comma-separated) and upload that",
            file=file_name,
        )
    if raw.startswith(_UTF16_BOMS):
        try:
            text = raw.decode("utf-16")
        except UnicodeDecodeError:
            raise DataValidationError(
                "the file starts with a UTF-16 marker but is not valid UTF-16 text; "
                "save it as UTF-8 CSV",
                file=file_name,
            ) from None
    else:
        raw = raw.removeprefix(_UTF8_BOM)
        text = _decode_8bit(raw)
    text = text.lstrip("\ufeff").rstrip("\x1a")  # a second BOM; DOS end-of-file marker
    n_control = len(_CONTROL_CHARS.findall(text))
    if "\x00" in text or n_control > _MAX_CONTROL_FRACTION * len(text):
        raise DataValidationError(
            "the file is not CSV text (it holds binary data or control characters "
            f"in {n_control} places): save it as UTF-8 CSV",
            file=file_name,
        )
    if not text.strip():
        raise DataValidationError("the file is empty", file=file_name)
    return text


def _decode_8bit(raw: bytes) -> str:
    """UTF-8 first; spreadsheet programs on Windows write cp1252; Latin-1 never fails."""
    for encoding in ("utf-8", "cp1252"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


def _guess_delimiter(first_line: str) -> str:
    counts = {delimiter: first_line.count(delimiter) for delimiter in (",", ";", "\t")}
    if counts[","] > 0:
        return ","
    best = max((";", "\t"), key=lambda delimiter: counts[delimiter])
    return best if counts[best] > 0 else ","


def _parse_records(
    text: str, file_name: str
) -> tuple[list[str], list[list[str | None]], list[int], str]:
    """Header names, each column's cells, the records' row numbers and the delimiter.

    Cells are stripped, missing tokens become None, and equal cells share one string
    object: ids and categories repeat, so a large file costs one string per distinct
    value, not one per cell.
    """
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = _guess_delimiter(first_line)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, skipinitialspace=True)
    header: list[str] | None = None
    columns: list[list[str | None]] = []
    numbers: list[int] = []
    ragged: list[tuple[int, int]] = []
    shared: dict[str, str | None] = dict.fromkeys(MISSING_TOKENS)
    last_line = 0
    try:
        for fields in reader:
            start_line, last_line = last_line + 1, reader.line_num
            if not any(field.strip() for field in fields):
                continue
            if header is None:
                header = check_header(fields, file_name)
                columns = [[] for _ in header]
                width = len(header)
                continue
            if len(fields) > width and not any(f.strip() for f in fields[width:]):
                fields = fields[:width]  # trailing empty fields: a spreadsheet artefact
            if len(fields) != width:
                ragged.append((start_line - 1, len(fields)))
                continue
            for column, field in zip(columns, fields, strict=True):
                cell = shared.get(field, _UNSEEN)
                if cell is _UNSEEN:
                    stripped = field.strip()
                    cell = None if stripped in MISSING_TOKENS else shared.get(stripped, stripped)
                    if len(shared) < _MAX_SHARED:
                        shared[field] = shared[stripped] = cell
                column.append(cell)
            numbers.append(start_line - 1)
    except csv.Error as exc:
        raise DataValidationError(
            f"cannot parse CSV near line {reader.line_num}: {exc}", file=file_name
        ) from None
    if header is None:
        raise DataValidationError("the file is empty", file=file_name)
    if ragged:
        row, n_fields = ragged[0]
        more = (
            f"; {len(ragged) - 1} more rows have the wrong number of fields"
            if len(ragged) > 1
            else ""
        )
        raise DataValidationError(
            f"has {n_fields} fields but the header has {len(header)} columns "
            f"(a stray delimiter or quote?){more}",
            file=file_name,
            row=row,
        )
    if not numbers:
        raise DataValidationError(
            "the file has a header row but no data rows; a table needs a header row "
            "naming its columns and at least one data row",
            file=file_name,
        )
    return header, columns, numbers, delimiter


def check_header(fields: list[str], file_name: str) -> list[str]:
    names = [field.strip() for field in fields]
    while len(names) > 1 and not names[-1]:
        names.pop()  # a trailing delimiter on the header line: a spreadsheet artefact
    if all(is_number_text(name) or name in MISSING_TOKENS for name in names):
        raise DataValidationError(
            "the first line looks like data, not column names: the file needs a header "
            f"row naming its columns (it starts with {', '.join(names[:4])})",
            file=file_name,
        )
    if len(names) > 1 and not names[0] and _ROW_NAMES_ALLOWED.get() and ROW_NAMES not in names:
        names[0] = ROW_NAMES
    for position, name in enumerate(names, start=1):
        if not name:
            raise DataValidationError(
                unnamed_column_reason(position), file=file_name, column=f"#{position}"
            )
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if name in seen:
            raise DataValidationError(
                f"two columns have this name (columns {seen[name]} and {position}): "
                "column names must be distinct (is the header row missing?)",
                file=file_name,
                column=name,
            )
        seen[name] = position
    return names
