"""Fuzzing the whole path from uploaded bytes to DuelData.

Any input gives either data or our DataValidationError, never another exception.
Well-formed tables written by Python's csv module read back exactly.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefshap_core.data.build import build_duel_data
from prefshap_core.data.csv_io import MISSING_TOKENS, read_table
from prefshap_core.data.duel_data import split_duels
from prefshap_core.data.readers import read_any
from prefshap_core.errors import DataValidationError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_NEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD_ITEMS = b"id,name,x,kind\na,A,1,p\nb,B,2,q\nc,C,,p\nd,D,4,q\n"
GOOD_DUELS = b"left,right,winner,venue\na,b,a,in\nb,c,c,out\nc,d,d,in\nd,a,a,out\n"

NAMES = [
    "id", "name", "left", "right", "winner", "loser", "y", "duel_id", "x", "kind", "venue",
    " id", "student", "age",
]  # fmt: skip
CELLS = [
    "a",
    "b",
    "c",
    "d",
    "zz",
    "1",
    "-1",
    "+1",
    "0",
    "draw",
    "TIE",
    "1,5",
    "1.234,5",
    "1,234",
    "2.5",
    "1e400",
    "1" * 320,
    "left",
    "right",
    "NA",
    "",
    "?",
    "TRUE",
    "false",
    "nan",
    "inf",
    "x y",
    '"q,u"',
    '"',
    "in",
    "out",
]


def build_or_our_error(
    items: bytes, duels: bytes, on_invalid: str = "error", contexts: bytes | None = None
) -> None:
    """Read the files (any format) and build; only DataValidationError may escape."""
    try:
        duels_table = read_any(duels, file_name="duels.csv")
        data = build_duel_data(
            read_any(items, file_name="items.csv"),
            duels_table,
            name="fuzz",
            on_invalid=on_invalid,
            contexts=None if contexts is None else read_any(contexts, file_name="contexts.csv"),
        )
    except DataValidationError as error:
        # context covariates joined from contexts.csv are encoded with the duels' own
        assert error.file in (
            "items.csv",
            "duels.csv",
            "contexts.csv",
            "duels.csv + contexts.csv",
            None,
        )
        return
    assert data.n_duels >= 1 and np.isfinite(data.items).all()
    assert set(np.unique(data.y).tolist()) <= {-1, 0, 1}
    report = data.report
    assert data.n_duels + report.dropped_duels + report.skipped_duels == len(duels_table)
    assert len(report.rejected) == report.dropped_duels + report.skipped_duels
    assert np.all(data.left != data.right)
    if data.has_context:
        assert np.isfinite(data.contexts).all()
        assert data.context_index.max() < len(data.contexts)
    try:
        split_duels(data.n_duels, seed=0)
    except DataValidationError:
        assert data.n_duels < 3


@FUZZ
@given(st.binary(max_size=600))
def test_any_bytes_as_items_or_duels(raw: bytes) -> None:
    build_or_our_error(raw, GOOD_DUELS)
    build_or_our_error(GOOD_ITEMS, raw, on_invalid="drop")


ITEM_HEADERS = [["id", "x"], ["id", "name", "x", "kind"], ["id", "kind"], ["name", "id", "x"]]
DUEL_HEADERS = [
    ["left", "right", "winner"],
    ["left", "right", "y"],
    ["y", "left", "right", "venue"],
    ["duel_id", "left", "right", "winner", "venue"],
    ["winner", "loser"],
    ["student", "winner", "loser", "venue"],
    ["left", "right", "winner", "student"],
]
CONTEXT_HEADERS = [["student", "age"], ["student", "age", "kind"], ["age", "student"]]
TEXT = st.text(alphabet=st.characters(codec="latin-1", exclude_categories=["Cs", "Cc"]), max_size=4)
CHAOS = st.sampled_from(CELLS) | TEXT
IDS = st.sampled_from(["a", "b", "c", "d"])
COLUMN_CELLS = {
    "id": IDS,
    "name": st.sampled_from(["Ann", "Bo", "", "Cy"]),
    "x": st.floats(-1e3, 1e3).map(repr) | st.sampled_from(["", "NA", "7", "TRUE"]),
    "kind": st.sampled_from(["p", "q", "r", ""]),
    "left": IDS,
    "right": IDS,
    "winner": IDS | st.sampled_from(["left", "right", "draw", "tie", "", "NA"]),
    "loser": IDS,
    "y": st.sampled_from(["1", "-1", "+1", "0", "", "null"]),
    "student": st.sampled_from(["1", "2", "2.0", "03", "9", ""]),
    "age": st.sampled_from(["20", "31,5", "1.000,5", "x", ""]),
    "venue": st.sampled_from(["in", "out", ""]),
    "duel_id": st.integers(0, 30).map(str),
}


@st.composite
def csv_like(draw: st.DrawFn) -> bytes:
    """Nearly a CSV table: a plausible header and cells, now and then a broken one."""
    header = draw(
        st.sampled_from(ITEM_HEADERS + DUEL_HEADERS + CONTEXT_HEADERS)
        | st.lists(st.sampled_from(NAMES) | TEXT, min_size=1, max_size=5)
    )
    ids = draw(st.permutations(["a", "b", "c", "d"]))  # item ids: mostly unique
    n_rows = draw(st.integers(0, 8))
    rows = []
    for i in range(n_rows):
        row = []
        for name in header:
            if name == "id" and draw(st.integers(0, 9)) > 0:
                row.append(ids[i % 4])
            elif draw(st.integers(0, 9)) == 0:
                row.append(draw(CHAOS))  # a broken cell
            else:
                row.append(draw(COLUMN_CELLS.get(name, CHAOS)))
        rows.append(row)
    if draw(st.integers(0, 5)) == 0:  # now and then a ragged row
        rows.insert(draw(st.integers(0, n_rows)), draw(st.lists(CHAOS, max_size=6)))
    delimiter = draw(st.sampled_from([",", ",", ",", ";", "\t"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(delimiter.join(fields) for fields in [header, *rows])
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "latin-1", "utf-16"]))
    return text.encode(encoding, errors="replace")


@pytest.mark.slow
@FUZZ
@given(csv_like(), csv_like(), st.sampled_from(["error", "drop"]))
def test_csv_like_text_as_items_and_duels(items: bytes, duels: bytes, on_invalid: str) -> None:
    build_or_our_error(items, duels, on_invalid)
    build_or_our_error(items, GOOD_DUELS, on_invalid)
    build_or_our_error(GOOD_ITEMS, duels, on_invalid)


GOOD_KEYED_DUELS = b"student,left,right,winner\n1,a,b,a\n2,b,c,draw\n1.0,c,d,d\n"


@FUZZ_NEW
@given(csv_like(), csv_like(), st.sampled_from(["error", "drop"]))
def test_csv_like_contexts_tables(contexts: bytes, duels: bytes, on_invalid: str) -> None:
    build_or_our_error(GOOD_ITEMS, GOOD_KEYED_DUELS, on_invalid, contexts=contexts)
    build_or_our_error(GOOD_ITEMS, duels, on_invalid, contexts=b"student,age\n1,20\n2,30\n")


def _as_parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _as_xlsx(frame: pd.DataFrame) -> bytes:
    """The frame as a workbook of text cells (openpyxl would store "=0" as a formula,
    which a workbook saved by a spreadsheet program holds with its computed value)."""
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for r, row in enumerate([list(frame.columns), *frame.itertuples(index=False)], start=1):
        for c, value in enumerate(row, start=1):
            if value is None or value == "":
                continue
            cell = sheet.cell(row=r, column=c, value=str(value))
            cell.data_type = "s"
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


@FUZZ_NEW
@given(st.binary(max_size=300), st.sampled_from([b"PK\x03\x04", b"PAR1"]))
def test_any_bytes_behind_a_workbook_or_parquet_signature(raw: bytes, magic: bytes) -> None:
    build_or_our_error(magic + raw, GOOD_DUELS)
    build_or_our_error(GOOD_ITEMS, magic + raw, on_invalid="drop")


@st.composite
def valid_duel_files(draw: st.DrawFn) -> tuple[bytes, bytes, list[tuple[str, str, str]]]:
    n_items = draw(st.integers(2, 8))
    ids = [f"i{k}" for k in range(n_items)]
    values = draw(
        st.lists(st.floats(-1e6, 1e6) | st.none(), min_size=n_items, max_size=n_items).filter(
            lambda v: any(x is not None for x in v)
        )
    )
    items = "id,x\n" + "".join(
        f"{i},{'' if v is None else repr(v)}\n" for i, v in zip(ids, values, strict=True)
    )
    pair = st.tuples(st.sampled_from(ids), st.sampled_from(ids)).filter(lambda p: p[0] != p[1])
    duels = draw(st.lists(st.tuples(pair, st.booleans()), min_size=1, max_size=20))
    rows = [(left, right, left if left_won else right) for (left, right), left_won in duels]
    text = "left,right,winner\n" + "".join(",".join(row) + "\n" for row in rows)
    return items.encode(), text.encode(), rows


@pytest.mark.slow
@FUZZ
@given(valid_duel_files(), st.integers(0, 2**32 - 1))
def test_valid_files_build_and_keep_every_outcome(
    files: tuple[bytes, bytes, list[tuple[str, str, str]]], seed: int
) -> None:
    items, duels, rows = files
    data = build_duel_data(
        read_table(items, file_name="items.csv"),
        read_table(duels, file_name="duels.csv"),
        name="fuzz",
        seed=seed,
    )
    assert data.n_duels == len(rows)
    winners = data.item_ids[data.winners()].tolist()
    assert winners == [rows[int(d) - 1][2] for d in data.duel_ids]
    pairs = {
        frozenset(p) for p in zip(data.item_ids[data.left], data.item_ids[data.right], strict=True)
    }
    assert pairs == {frozenset(row[:2]) for row in rows}


SAFE_TEXT = st.text(
    alphabet=st.characters(categories=["L", "N", "P", "S", "Zs"], exclude_characters="\x85"),
    max_size=8,
) | st.sampled_from(sorted(MISSING_TOKENS))


@st.composite
def written_tables(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    n_columns = draw(st.integers(2, 4))
    header = draw(
        st.lists(
            st.text(alphabet="abcdefgh_ ,\"'", min_size=1, max_size=6).filter(
                lambda n: (
                    n.strip()
                    and n.strip() not in MISSING_TOKENS
                    and not n.strip().replace(".", "").isdigit()
                )
            ),
            min_size=n_columns,
            max_size=n_columns,
            unique_by=lambda n: n.strip(),
        )
    )
    rows = draw(
        st.lists(
            st.lists(SAFE_TEXT | st.just("a\nb"), min_size=n_columns, max_size=n_columns),
            min_size=1,
            max_size=10,
        )
    )
    return header, rows


@pytest.mark.slow
@FUZZ
@given(written_tables())
def test_tables_written_by_the_csv_module_read_back_exactly(
    table: tuple[list[str], list[list[str]]],
) -> None:
    header, rows = table
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *rows])

    def clean(cell: str) -> str | None:
        return None if cell.strip() in MISSING_TOKENS else cell.strip()

    kept = [row for row in rows if any(cell.strip() for cell in row)]
    try:
        result = read_table(buffer.getvalue().encode(), file_name="t.csv", decimal=None)
    except DataValidationError as error:
        assert not kept and "no data rows" in error.reason
        return
    assert list(result.columns) == [name.strip() for name in header]
    expected = pd.DataFrame([[clean(c) for c in row] for row in kept], columns=result.columns)
    assert result.reset_index(drop=True).equals(expected.astype(object))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written_tables(), st.sampled_from([_as_parquet, _as_xlsx]))
def test_tables_as_parquet_or_xlsx_read_like_the_same_csv(
    table: tuple[list[str], list[list[str]]], write
) -> None:
    header, rows = table
    names = [name.strip() for name in header]
    # Spreadsheets keep no line breaks worth testing; NUL-free text is what both hold.
    rows = [[cell.replace("\n", " ") for cell in row] for row in rows]
    frame = pd.DataFrame(rows, columns=names, dtype=object)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([names, *rows])
    try:
        expected = read_table(buffer.getvalue().encode(), file_name="t.csv", decimal=None)
    except DataValidationError:
        return  # no data rows: covered above
    try:
        result = read_any(write(frame), file_name="t")
    except DataValidationError as error:
        assert "no data rows" in error.reason
        return
    assert list(result.columns) == list(expected.columns)
    assert result.to_numpy().tolist() == expected.to_numpy().tolist()
    np.testing.assert_array_equal(result.index, expected.index)


@FUZZ_NEW
@given(
    st.floats(-1e9, 1e9, allow_nan=False).map(lambda v: round(v, 3)),
    st.sampled_from(["eu", "us"]),
)
def test_numbers_with_separators_read_as_their_value(value: float, style: str) -> None:
    text = f"{value:,.3f}"  # 1,234,567.891
    if style == "eu":
        text = text.replace(",", "_").replace(".", ",").replace("_", ".")  # 1.234.567,891
        raw = f"id;x\na;{text}\nb;2\n".encode()
    else:
        raw = f'id,x\na,"{text}"\nb,2\n'.encode()
    cell = read_table(raw, file_name="t.csv")["x"].iloc[0]
    assert float(cell) == pytest.approx(value, abs=1e-9)
