"""How large a table file may be, judged before it is materialised.

Compressed formats make file bytes a poor measure: a 650 KB parquet file held 50
million rows, a 0.9 MB one inflated to 3.7 GB, a 728 KB workbook kept a core busy for
minutes. So each reader first reads what the file *declares* — cheaply, without
decompressing the data — and refuses with :class:`UploadTooLargeError` (a
``DataValidationError`` naming the file, and a ``MemoryBudgetError``) when it would
not fit:

* any file: its bytes, read in blocks with a running count, at most the job budget
  over :data:`~prefshap_core.budget.CSV_BYTES_PER_BYTE` (a FIFO or a growing file too);
  that bound is the CSV reader's (no compressed CSV is accepted: gzip bytes are
  refused as "not CSV text");
* parquet: the footer's row count, leaf-value count and uncompressed column sizes
  (``pyarrow.parquet.ParquetFile(...).metadata``), before a page is decoded;
* .xlsx: the zip directory's uncompressed sizes (every member, sharedStrings.xml, the
  sheet; zip bombs in general), the sheet's declared ``dimension``, then the sheet's
  true extent (rows x widest row, as openpyxl and pandas pad it) from one streaming
  pass over its XML with a running byte count, before openpyxl parses anything. A
  workbook also has a cell cap of its own: openpyxl reads some 10^4 cells a second.

:func:`upload_need_bytes` gives the same estimate for a whole upload, for the
dashboard's server-wide reservation.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from prefshap_core import budget
from prefshap_core.errors import DataValidationError, MemoryBudgetError

# Memory per table cell read from a parquet file or a workbook and built into duels:
# what a CSV cell costs (CSV_BYTES_PER_BYTE per byte, about 5 bytes a cell); measured
# 67 B (parquet) and 180 B (xlsx) per cell of a 4-column duels table.
CELL_BYTES = 200
# openpyxl parses about 15-40 thousand cells a second: a million is about a minute.
MAX_WORKBOOK_CELLS = 1_000_000
# XML that openpyxl parses or holds: any one member, and the archive together.
MAX_WORKBOOK_MEMBER_BYTES = 256 * 2**20
MAX_WORKBOOK_BYTES = 512 * 2**20
MAX_WORKBOOK_MEMBERS = 10_000
# Shared strings are held as Python strings (about 4x their XML, plus a list slot).
SHARED_STRING_BYTES_PER_BYTE = 8
_READ_BLOCK = 1 << 24
_ZIP_MAGIC = b"PK\x03\x04"
_PARQUET_MAGIC = b"PAR1"
XLSX_REDUCE = "save the sheet as CSV or parquet (read much faster), or upload fewer rows"
TABLE_REDUCE = "upload fewer rows or columns"


class UploadTooLargeError(DataValidationError, MemoryBudgetError):
    """A table file larger than this server reads: refused before it is materialised."""


def _gib(n_bytes: int) -> str:
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f} GiB"
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:.0f} KiB"


def _check_memory(need: int, what: str, file_name: str, reduce: str) -> None:
    job = budget.current_budget().job_bytes
    if need > job:
        raise UploadTooLargeError(
            f"{what}; reading it would need about {_gib(need)} of memory, more than the "
            f"{_gib(job)} one job may use here: {reduce} (or raise {budget.MEMORY_BUDGET_ENV})",
            file=file_name,
        )


def max_file_bytes() -> int:
    """The largest file any reader takes: what the job budget allows at CSV's cost."""
    return max(1, budget.current_budget().job_bytes // budget.CSV_BYTES_PER_BYTE)


def read_file_bytes(source: str | Path | bytes, file_name: str) -> bytes:
    """The file's bytes, read in blocks with a running count; refused past
    :func:`max_file_bytes` (a path that never ends, such as a FIFO, included)."""
    limit = max_file_bytes()
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        if len(data) > limit:
            raise _too_many_bytes(len(data), limit, file_name)
        return data
    try:
        with open(source, "rb") as handle:
            blocks, total = [], 0
            while block := handle.read(min(_READ_BLOCK, limit + 1 - total)):
                total += len(block)
                if total > limit:
                    raise _too_many_bytes(total, limit, file_name, at_least=True)
                blocks.append(block)
    except FileNotFoundError:
        raise DataValidationError(f"file not found: {source}", file=file_name) from None
    except IsADirectoryError:
        raise DataValidationError(f"{source} is a folder, not a file", file=file_name) from None
    except OSError as exc:
        raise DataValidationError(f"cannot read {source}: {exc}", file=file_name) from None
    return b"".join(blocks)


def _too_many_bytes(
    size: int, limit: int, file_name: str, at_least: bool = False
) -> UploadTooLargeError:
    more = "more than " if at_least else ""
    return UploadTooLargeError(
        f"the file has {more}{_gib(size)}, more than the {_gib(limit)} one file may have "
        f"within this server's memory budget: {TABLE_REDUCE} "
        f"(or raise {budget.MEMORY_BUDGET_ENV})",
        file=file_name,
    )


# -- parquet -------------------------------------------------------------------------------
def parquet_text_columns(raw: bytes, file_name: str) -> list[str]:
    """Check a parquet file's declared sizes; returns its text columns (to be read as
    dictionaries, so that a repeated value is held once however often it occurs).

    Raises :class:`UploadTooLargeError` when the footer's rows x columns, leaf values
    or uncompressed bytes would not fit the job budget; an unreadable footer is left to
    the reader's own error.
    """
    import pyarrow as pa

    footer = _parquet_footer(raw)
    if footer is None:
        return []  # a corrupt footer: the reader says so in its words
    meta, schema = footer
    rows, columns, cells, uncompressed = _parquet_sizes(meta, schema)
    what = (
        f"the parquet file declares {rows:,} rows x {columns:,} columns ({cells:,} cells, "
        f"{_gib(uncompressed)} uncompressed)"
    )
    _check_memory(_parquet_need(cells, uncompressed), what, file_name, TABLE_REDUCE)
    text = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
            pa.types.is_large_binary)  # fmt: skip
    names = [f.name for f in schema]
    return [
        f.name
        for f in schema
        if names.count(f.name) == 1 and any(is_type(f.type) for is_type in text)
    ]


def _parquet_footer(raw: bytes):  # -> (FileMetaData, pyarrow.Schema) | None
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(raw))
        return parquet.metadata, parquet.schema_arrow
    except Exception:
        return None


def _parquet_sizes(meta, schema) -> tuple[int, int, int, int]:
    """Rows, top-level columns, cells (leaf values when lists hold more) and
    uncompressed bytes, from the footer alone."""
    rows, columns = int(meta.num_rows), len(schema)
    values = uncompressed = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            values += max(0, int(chunk.num_values))
            uncompressed += max(0, int(chunk.total_uncompressed_size))
    return rows, columns, max(rows * max(1, columns), values), uncompressed


def _parquet_need(cells: int, uncompressed: int) -> int:
    return cells * CELL_BYTES + uncompressed * budget.CSV_BYTES_PER_BYTE


# -- workbooks -----------------------------------------------------------------------------
_SHEET_TAG = re.compile(rb"<(?:\w+:)?sheet\b[^>]*?\br(?:\w*):id=\"([^\"]+)\"")
_RELATIONSHIP = re.compile(rb"<(?:\w+:)?Relationship\b([^>]*)>")
_ATTRIBUTE = re.compile(rb"\b(Id|Target)=\"([^\"]*)\"")
_DIMENSION = re.compile(rb"<(?:\w+:)?dimension\b[^>]*\bref=\"([A-Za-z]*)(\d*):?([A-Za-z]*)(\d*)\"")
# One row or cell start tag; its r attribute if any (rows: a number, cells: "AB12").
_TOKEN = re.compile(rb"<(?:\w+:)?(row|c)\b((?:[^>\"]|\"[^\"]*\")*)>")
_REF = re.compile(rb"\br=\"([A-Za-z]{0,3})(\d{0,7})\"")


def _column_number(letters: bytes) -> int:
    number = 0
    for ch in letters.upper():
        number = number * 26 + (ch - 64)
    return number


def _first_sheet(archive: zipfile.ZipFile) -> str | None:
    """The member name of the workbook's first sheet (what pandas reads), if found."""
    names = set(archive.namelist())
    try:
        workbook = archive.read("xl/workbook.xml")
        relations = archive.read("xl/_rels/workbook.xml.rels")
    except KeyError:
        return None
    first = _SHEET_TAG.search(workbook)
    if first is None:
        return None
    for match in _RELATIONSHIP.finditer(relations):
        attributes = dict(_ATTRIBUTE.findall(match.group(1)))
        if attributes.get(b"Id") == first.group(1):
            target = attributes.get(b"Target", b"").decode("utf-8", "replace")
            name = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
            return name if name in names else None
    return None


def check_workbook(raw: bytes, file_name: str) -> None:
    """Check an .xlsx archive before openpyxl opens it (see the module docstring)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a readable archive: the reader's own error says so
    if len(members) > MAX_WORKBOOK_MEMBERS:
        raise UploadTooLargeError(
            f"the archive has {len(members):,} members, more than a workbook has "
            f"({MAX_WORKBOOK_MEMBERS:,} at most): {XLSX_REDUCE}",
            file=file_name,
        )
    total = sum(max(0, m.file_size) for m in members)
    biggest = max(members, key=lambda m: m.file_size, default=None)
    if total > MAX_WORKBOOK_BYTES or (
        biggest is not None and biggest.file_size > MAX_WORKBOOK_MEMBER_BYTES
    ):
        raise UploadTooLargeError(
            f"the workbook inflates to {_gib(total)} of XML ({biggest.filename} alone "
            f"{_gib(biggest.file_size)}), more than the {_gib(MAX_WORKBOOK_BYTES)} "
            f"({_gib(MAX_WORKBOOK_MEMBER_BYTES)} per part) read here: {XLSX_REDUCE}",
            file=file_name,
        )
    strings = sum(m.file_size for m in members if m.filename.endswith("sharedStrings.xml"))
    _check_memory(
        strings * SHARED_STRING_BYTES_PER_BYTE,
        f"the workbook's shared strings are {_gib(strings)} of XML",
        file_name,
        XLSX_REDUCE,
    )
    sheet = _first_sheet(archive)
    if sheet is None:
        return  # openpyxl will say what is missing
    rows, width = _sheet_extent(archive, sheet, file_name)
    _check_workbook_cells(rows, width, "holds", file_name)


def _check_workbook_cells(rows: int, width: int, verb: str, file_name: str) -> None:
    cells = rows * width
    what = f"the workbook's first sheet {verb} {rows:,} rows x {width:,} columns"
    if cells > MAX_WORKBOOK_CELLS:
        raise UploadTooLargeError(
            f"{what} ({cells:,} cells as it is read), more than the "
            f"{MAX_WORKBOOK_CELLS:,} cells a workbook may have here: {XLSX_REDUCE}",
            file=file_name,
        )
    _check_memory(cells * CELL_BYTES, what, file_name, XLSX_REDUCE)


def _sheet_extent(archive: zipfile.ZipFile, sheet: str, file_name: str) -> tuple[int, int]:
    """Rows (the last row number) and the widest row (its last column) of a sheet, from
    one streaming pass; refused as soon as the extent passes the workbook cell cap."""
    max_row = max_col = row = col = 0
    carry = b""
    declared = False
    with archive.open(sheet) as stream:
        while block := stream.read(1 << 20):
            text = carry + block
            if not declared:
                found = _DIMENSION.search(text)
                if found is not None or b"<sheetData" in text:
                    declared = True
                if found is not None and found.group(3):  # read from row 1 and column A
                    rows, width = int(found.group(4) or 0), _column_number(found.group(3))
                    _check_workbook_cells(rows, width, "declares", file_name)
            end = text.rfind(b"<")  # a tag cut by the block boundary waits for the next one
            end = len(text) if end < 0 or text.find(b">", end) >= 0 else end
            for token in _TOKEN.finditer(text, 0, end):
                ref = _REF.search(token.group(2))
                if token.group(1) == b"row":
                    row = int(ref.group(2)) if ref is not None and ref.group(2) else row + 1
                    col = 0
                    max_row = max(max_row, row)
                else:
                    has_col = ref is not None and ref.group(1)
                    col = _column_number(ref.group(1)) if has_col else col + 1
                    if ref is not None and ref.group(2):
                        max_row = max(max_row, int(ref.group(2)))
                    max_col = max(max_col, col)
                if max_row * max_col > MAX_WORKBOOK_CELLS:
                    _check_workbook_cells(max_row, max_col, "holds at least", file_name)
            carry = text[end:]
            if len(carry) > 1 << 20:  # one tag longer than a block: not a sheet anyone wrote
                raise UploadTooLargeError("a sheet tag is over 1 MiB long", file=file_name)
    return max_row, max_col


# -- a whole upload ------------------------------------------------------------------------
def upload_need_bytes(raw: bytes, file_name: str) -> int:
    """Memory to read and build one uploaded file, from what it declares (cheap: no data
    is decompressed); the readers refuse what exceeds a job's budget."""
    if raw.startswith(_PARQUET_MAGIC):
        footer = _parquet_footer(raw)
        if footer is None:
            return len(raw) * budget.CSV_BYTES_PER_BYTE
        _, _, cells, uncompressed = _parquet_sizes(*footer)
        return _parquet_need(cells, uncompressed)
    if raw.startswith(_ZIP_MAGIC):
        try:
            members = zipfile.ZipFile(io.BytesIO(raw)).infolist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return len(raw) * budget.CSV_BYTES_PER_BYTE
        # about 60 bytes of sheet XML per cell (openpyxl's own files)
        xml = sum(max(0, m.file_size) for m in members)
        return max(len(raw) * budget.CSV_BYTES_PER_BYTE, xml // 60 * CELL_BYTES)
    return len(raw) * budget.CSV_BYTES_PER_BYTE
