"""Fuzzing the whole path from uploaded bytes to DuelData.

Any input gives either data or our DataValidationError, never another exception.
Well-formed tables written by Python's csv module read back exactly.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefshap_core.data import build_duel_data, read_table, split_duels
from prefshap_core.data.csv_io import MISSING_TOKENS
from prefshap_core.errors import DataValidationError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD_ITEMS = b"id,name,x,kind\na,A,1,p\nb,B,2,q\nc,C,,p\nd,D,4,q\n"
GOOD_DUELS = b"left,right,winner,venue\na,b,a,in\nb,c,c,out\nc,d,d,in\nd,a,a,out\n"

NAMES = ["id", "name", "left", "right", "winner", "y", "duel_id", "x", "kind", "venue", " id"]
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


def build_or_our_error(items: bytes, duels: bytes, on_invalid: str = "error") -> None:
    """Read both files and build; only DataValidationError may escape."""
    try:
        data = build_duel_data(
            read_table(items, file_name="items.csv"),
            read_table(duels, file_name="duels.csv"),
            name="fuzz",
            on_invalid=on_invalid,
        )
    except DataValidationError as error:
        assert error.file in ("items.csv", "duels.csv", None)
        return
    assert data.n_duels >= 1 and np.isfinite(data.items).all()
    assert set(np.unique(data.y).tolist()) <= {-1, 1}
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
]
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
    "winner": IDS | st.sampled_from(["left", "right"]),
    "y": st.sampled_from(["1", "-1", "+1"]),
    "venue": st.sampled_from(["in", "out", ""]),
    "duel_id": st.integers(0, 30).map(str),
}


@st.composite
def csv_like(draw: st.DrawFn) -> bytes:
    """Nearly a CSV table: a plausible header and cells, now and then a broken one."""
    header = draw(
        st.sampled_from(ITEM_HEADERS + DUEL_HEADERS)
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


@FUZZ
@given(csv_like(), csv_like(), st.sampled_from(["error", "drop"]))
def test_csv_like_text_as_items_and_duels(items: bytes, duels: bytes, on_invalid: str) -> None:
    build_or_our_error(items, duels, on_invalid)
    build_or_our_error(items, GOOD_DUELS, on_invalid)
    build_or_our_error(GOOD_ITEMS, duels, on_invalid)


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
        result = read_table(buffer.getvalue().encode(), file_name="t.csv")
    except DataValidationError as error:
        assert not kept and "no data rows" in error.reason
        return
    assert list(result.columns) == [name.strip() for name in header]
    expected = pd.DataFrame([[clean(c) for c in row] for row in kept], columns=result.columns)
    assert result.reset_index(drop=True).equals(expected.astype(object))
