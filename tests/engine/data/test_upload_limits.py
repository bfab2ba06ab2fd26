"""Compressed uploads are judged by what they declare, before anything is inflated.

Each bomb here is a few kilobytes to a few megabytes that would materialise as
gigabytes (or minutes of openpyxl): the readers refuse it from its footer, its zip
directory or one streaming pass over its sheet, fast and with the product's error.
"""

from __future__ import annotations

import io
import os
import resource
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prefshap_core import budget
from prefshap_core.data import upload_limits as limits
from prefshap_core.data.readers import read_any
from prefshap_core.data.upload_limits import UploadTooLargeError, upload_need_bytes
from prefshap_core.errors import DataValidationError, MemoryBudgetError

FAST_S = 5.0  # generous for a loaded machine: the refusals take milliseconds


@pytest.fixture(autouse=True)
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "256M")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _refused(raw: bytes, file_name: str, match: str) -> UploadTooLargeError:
    peak, start = _peak_rss(), time.perf_counter()
    with pytest.raises(UploadTooLargeError, match=match) as caught:
        read_any(raw, file_name=file_name)
    assert time.perf_counter() - start < FAST_S
    assert _peak_rss() - peak < 64 * 2**20  # nothing was inflated
    error = caught.value
    assert isinstance(error, DataValidationError) and isinstance(error, MemoryBudgetError)
    assert error.file == file_name and str(error).startswith(f"{file_name}: ")
    return error


# -- parquet -------------------------------------------------------------------------------
def _repeated_parquet(n_rows: int, value: str = "c01") -> bytes:
    """``n_rows`` duels that are all the same: RLE makes them a few kilobytes."""
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n_rows, np.int8)), [value])
    table = pa.table({"left": column, "right": column, "winner": column, "venue": column})
    buffer = io.BytesIO()
    # No stored arrow schema: read back, the columns are plain text, as any writer's are.
    pq.write_table(table, buffer, row_group_size=1 << 20, store_schema=False)
    return buffer.getvalue()


def test_a_parquet_of_millions_of_repeated_rows_is_refused_from_its_footer() -> None:
    raw = _repeated_parquet(4_000_000)
    assert len(raw) < 200_000  # the bytes say nothing of the rows
    error = _refused(raw, "duels.parquet", "declares 4,000,000 rows x 4 columns")
    assert "256 MiB one job may use" in str(error) and budget.MEMORY_BUDGET_ENV in str(error)
    assert upload_need_bytes(raw, "duels.parquet") > 4_000_000 * 4 * limits.CELL_BYTES


def test_a_long_value_repeated_is_held_once_not_inflated() -> None:
    # 20,000 rows of one 10 kB text: 200 MB as plain strings, a kilobyte as a dictionary.
    raw = _repeated_parquet(20_000, "x" * 10_000)
    peak = _peak_rss()
    table = read_any(raw, file_name="duels.parquet")
    assert len(table) == 20_000 and table["left"].iloc[-1] == "x" * 10_000
    assert _peak_rss() - peak < 100 * 2**20


def test_a_parquet_within_the_budget_reads_as_before() -> None:
    frame = pd.DataFrame(
        {"left": ["a", "b", " c "], "right": ["b", None, "a"], "n": [1.5, 2.0, np.nan]}
    )
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    table = read_any(buffer.getvalue(), file_name="t.parquet")
    assert table["left"].tolist() == ["a", "b", "c"] and table["right"].tolist()[1] is None
    assert table["left"].dtype == object and table["n"].tolist()[:2] == [1.5, 2.0]


# -- workbooks -----------------------------------------------------------------------------
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
    'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.'
    'openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType='
    '"application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.'
    'openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/'
    'worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
    'spreadsheetml.worksheet+xml"/></Types>'
)
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats'
    '.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
    'openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target='
    '"xl/workbook.xml"/></Relationships>'
)
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/'
    'spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats'
    '.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
    'openxmlformats.org/officeDocument/2006/relationships/worksheet" Target='
    '"worksheets/sheet1.xml"/></Relationships>'
)
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
    'spreadsheetml/2006/main">{dimension}<sheetData>'
)


def _workbook(rows, dimension: str = "", shared_strings: int = 0) -> bytes:
    """An .xlsx whose first sheet's XML is streamed from ``rows`` (strings)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _ROOT_RELS)
        archive.writestr("xl/workbook.xml", _WORKBOOK)
        archive.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        with archive.open("xl/worksheets/sheet1.xml", "w") as sheet:
            sheet.write(_SHEET_HEAD.format(dimension=dimension).encode())
            for row in rows:
                sheet.write(row.encode())
            sheet.write(b"</sheetData></worksheet>")
        if shared_strings:
            with archive.open("xl/sharedStrings.xml", "w") as strings:
                strings.write(b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                              b'2006/main">')  # fmt: skip
                block = b"<si><t>aaaaaaaa</t></si>" * 4096
                for _ in range(shared_strings // len(block)):
                    strings.write(block)
                strings.write(b"</sst>")
    return buffer.getvalue()


def _cells(row: int, values: list[tuple[str, str]]) -> str:
    cells = "".join(f'<c r="{col}{row}" t="inlineStr"><is><t>{v}</t></is></c>' for col, v in values)
    return f'<row r="{row}">{cells}</row>'


def test_a_small_workbook_reads() -> None:
    rows = [_cells(1, [("A", "left"), ("B", "right")]), _cells(2, [("A", "a"), ("B", "b")])]
    table = read_any(_workbook(rows, '<dimension ref="A1:B2"/>'), file_name="d.xlsx")
    assert table.columns.tolist() == ["left", "right"] and table.iloc[0].tolist() == ["a", "b"]


def test_a_huge_declared_dimension_is_refused() -> None:
    rows = [_cells(1, [("A", "left"), ("B", "right")]), _cells(2, [("A", "a"), ("B", "b")])]
    raw = _workbook(rows, '<dimension ref="A1:XFD1048576"/>')
    _refused(raw, "d.xlsx", "declares 1,048,576 rows x 16,384 columns")


def test_one_far_cell_that_pads_every_row_is_refused_in_one_pass() -> None:
    # Row 1 reaches column XFD, so openpyxl and pandas pad all 100,000 rows to 16,384
    # cells: 1.6 billion cells from 2 MB of XML. The dimension claims A1:B2.
    far = _cells(1, [("A", "left"), ("B", "right"), ("XFD", "x")])
    rows = (_cells(k, [("A", "a"), ("B", "b")]) for k in range(2, 100_002))
    raw = _workbook([far, *rows], '<dimension ref="A1:B2"/>')
    assert len(raw) < 2_000_000
    _refused(raw, "d.xlsx", "holds at least .* rows x 16,384 columns")


def test_cells_without_references_count_too() -> None:
    wide = "<row>" + '<c t="inlineStr"><is><t>v</t></is></c>' * 20_000 + "</row>"
    rows = [wide] + ["<row><c><v>1</v></c></row>"] * 60
    _refused(_workbook(rows), "d.xlsx", r"rows x 20,000 columns")


def test_huge_shared_strings_are_refused_from_the_zip_directory() -> None:
    rows = [_cells(1, [("A", "left")]), _cells(2, [("A", "a")])]
    raw = _workbook(rows, shared_strings=48 * 2**20)
    assert len(raw) < 1_000_000
    _refused(raw, "d.xlsx", "shared strings are 48 MiB of XML")


def test_a_zip_bomb_member_is_refused_from_the_zip_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "MAX_WORKBOOK_MEMBER_BYTES", 8 * 2**20)
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("xl/media/zeros.bin", "w") as member,
    ):
        for _ in range(16):
            member.write(bytes(2**20))
    _refused(buffer.getvalue(), "d.xlsx", r"inflates to 16 MiB of XML \(xl/media/zeros.bin")


# -- any file ------------------------------------------------------------------------------
def test_a_file_larger_than_the_budget_is_refused_while_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "duels.csv"
    limit = limits.max_file_bytes()
    with open(path, "wb") as handle:
        handle.write(b"left,right,winner\n")
        handle.truncate(limit + 5 * 2**20)  # sparse: no disk, but read as zeros
    peak = _peak_rss()
    with pytest.raises(UploadTooLargeError, match="more than the 6 MiB one file may have"):
        read_any(path, file_name="duels.csv")
    assert _peak_rss() - peak < limit + 32 * 2**20  # never more than the limit held


def test_a_fifo_that_never_ends_is_refused(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "endless.csv"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer() -> None:
        try:
            with open(fifo, "wb") as handle:
                while not stop.is_set():
                    handle.write(b"a,b,c\n" * 10_000)
        except BrokenPipeError:  # the reader gave up, as it should
            pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(UploadTooLargeError, match="one file may have"):
            read_any(fifo, file_name="endless.csv")
    finally:
        stop.set()
        thread.join(timeout=10)
