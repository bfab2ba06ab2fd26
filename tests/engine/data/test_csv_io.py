"""read_table: decoding, cleaning, and a precise error for every malformed file."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefshap_core.data.csv_io import SOURCE_ROW, read_table, row_numbers
from prefshap_core.errors import DataValidationError


def read(text: str | bytes) -> pd.DataFrame:
    return read_table(text.encode() if isinstance(text, str) else text, file_name="t.csv")


def error_of(text: str | bytes) -> DataValidationError:
    with pytest.raises(DataValidationError) as info:
        read(text)
    assert info.value.file == "t.csv"
    assert str(info.value).startswith("t.csv")
    return info.value


# -- what comes back -----------------------------------------------------------------
def test_cells_are_stripped_strings_and_missing_tokens_are_none() -> None:
    table = read(" id , score ,kind\n a , 1.5 , x \nb,NA,N/A\nc,nan,?\nd,null,None\ne,,NaN\n")
    assert list(table.columns) == ["id", "score", "kind"]
    assert table["id"].tolist() == ["a", "b", "c", "d", "e"]
    assert table["score"].tolist() == ["1.5", None, None, None, None]
    assert table["kind"].tolist() == ["x", None, None, None, None]
    assert all(dtype is np.dtype(object) for dtype in table.dtypes)


def test_numbers_stay_text_until_the_encoder_decides() -> None:
    table = read("id,x\n007,1e3\n")
    assert table.loc[1, "id"] == "007" and table.loc[1, "x"] == "1e3"


def test_utf8_bom_is_stripped() -> None:
    table = read(b"\xef\xbb\xbfid,x\na,1\n")
    assert list(table.columns) == ["id", "x"]


def test_utf16_with_bom_is_decoded() -> None:
    table = read("id,name\na,Zoë\n".encode("utf-16"))
    assert table["name"].tolist() == ["Zoë"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"id,name\na,Caf\xe9\n", "Caf\u00e9"),  # Latin-1 / cp1252 e-acute
        (b"id,name\na,5\x80\n", "5\u20ac"),  # cp1252 euro sign
        (b"id,name\na,\x81" + b"b" * 200, "\x81" + "b" * 200),  # undefined in cp1252
    ],
)
def test_non_utf8_falls_back_to_cp1252_then_latin1(raw: bytes, expected: str) -> None:
    assert read(raw)["name"].tolist() == [expected]


def test_quoted_fields_keep_delimiters_and_newlines() -> None:
    table = read('id,label\na,"Smith, J."\nb,"two\nlines"\nc, "spaced, quoted"\n')
    assert table["label"].tolist() == ["Smith, J.", "two\nlines", "spaced, quoted"]


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_semicolon_and_tab_delimiters(delimiter: str) -> None:
    table = read(f"id{delimiter}x{delimiter}label\na{delimiter}1,5{delimiter}u, v\n")
    assert table["x"].tolist() == ["1.5"]  # a decimal comma, with these delimiters
    assert table["label"].tolist() == ["u, v"]


def test_row_numbers_follow_the_file_across_blank_lines() -> None:
    table = read("id,x\n\na,1\n , \nb,2\n\n")
    assert table.index.name == SOURCE_ROW
    # line 3 holds a, line 5 holds b: data rows 2 and 4 (row r is on line r + 1)
    assert row_numbers(table).tolist() == [2, 4]
    assert row_numbers(pd.DataFrame({"a": [1, 2, 3]})).tolist() == [1, 2, 3]


def test_crlf_line_endings() -> None:
    assert read("id,x\r\na,1\r\nb,2\r\n")["x"].tolist() == ["1", "2"]


def test_trailing_empty_fields_of_spreadsheets_are_ignored() -> None:
    table = read("id,x,\na,1,\nb,2,,\n")
    assert list(table.columns) == ["id", "x"] and table["x"].tolist() == ["1", "2"]


def test_reads_a_path(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("id,x\na,1\n")
    assert read_table(path, file_name="items.csv")["id"].tolist() == ["a"]
    assert read_table(str(path), file_name="items.csv")["x"].tolist() == ["1"]


# -- errors -------------------------------------------------------------------------
@pytest.mark.parametrize("text", [b"", b"   ", b"\n\n\r\n", b"\xef\xbb\xbf", b",,,\n,,\n"])
def test_empty_file(text: bytes) -> None:
    assert "empty" in error_of(text).reason


def test_header_only_file() -> None:
    assert "no data rows" in error_of("id,name,x\n").reason
    assert "no data rows" in error_of("id,name,x\n\n,,\n").reason


def test_headerless_file() -> None:
    error = error_of("1,2.5,3\n4,5,6\n")
    assert "header row" in error.reason and "looks like data" in error.reason


def test_duplicate_column_names() -> None:
    error = error_of("id,x, x\na,1,2\n")
    assert error.column == "x" and "columns 2 and 3" in error.reason


def test_empty_column_name() -> None:
    error = error_of(",id,x\n0,a,1\n")
    assert error.column == "#1" and "no name" in error.reason


def test_ragged_rows_name_the_first_row_and_count_the_rest() -> None:
    error = error_of("id,x\na,1\nb,2,3\nc\nd,4,5\n")
    assert error.row == 2 and error.column is None
    assert "3 fields" in error.reason and "2 columns" in error.reason
    assert "2 more rows" in error.reason
    assert "row 2 (line 3)" in str(error)


def test_binary_garbage() -> None:
    noise = np.random.default_rng(0).integers(0, 256, size=4000, dtype=np.uint8).tobytes()
    assert "not CSV text" in error_of(noise).reason
    assert "not CSV text" in error_of(b"id,x\na,\x00\x01\x02\n").reason


def test_excel_workbook_is_recognised() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    assert ".xlsx" in error_of(buffer.getvalue()).reason


def test_undecodable_utf16() -> None:
    assert "UTF-16" in error_of(b"\xff\xfei\x00d\x00\x00\xd8").reason


def test_missing_path() -> None:
    with pytest.raises(DataValidationError, match=r"items\.csv: file not found"):
        read_table("/nonexistent/items.csv", file_name="items.csv")


def test_csv_parser_errors_become_ours() -> None:
    huge_field = "id,x\na," + '"' + "y" * 200_000 + '"\n'
    error = error_of(huge_field)
    assert "cannot parse CSV" in error.reason
