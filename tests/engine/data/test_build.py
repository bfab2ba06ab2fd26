"""Encoding covariates and building DuelData: every bad input gets its precise error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefshap_core.analysis.contexts import data_context_labels
from prefshap_core.data.build import build_duel_data, load_directory
from prefshap_core.data.csv_io import read_table
from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.data.encoding.spec import EncodingSpec
from prefshap_core.data.encoding.tables import encode_rows, encode_table
from prefshap_core.errors import DataValidationError

ITEMS = "id,name,speed,style\na,Alpha,1.5,x\nb,Beta,,y\nc,Gamma,3,x\nd,Delta,4,\n"
DUELS = "left,right,winner,venue\na,b,a,home\nb,c,right,away\nc,d,c,\nd,a,left,home\n"


def table(text: str, file_name: str) -> pd.DataFrame:
    return read_table(text.encode(), file_name=file_name)


def build(items: str = ITEMS, duels: str = DUELS, **options: object) -> DuelData:
    return build_duel_data(
        table(items, "items.csv"), table(duels, "duels.csv"), name="t", **options
    )


def build_error(items: str = ITEMS, duels: str = DUELS, **options: object) -> DataValidationError:
    with pytest.raises(DataValidationError) as info:
        build(items, duels, **options)
    return info.value


# -- column kinds, imputation, standardisation ---------------------------------------
def test_numeric_needs_80_percent_numbers_then_other_cells_are_errors() -> None:
    four_of_five = table("id,x\na,1\nb,2\nc,3\nd,4\ne,oops\n", "items.csv")
    with pytest.raises(DataValidationError) as info:
        encode_table(four_of_five, file_name="items.csv", columns=["x"])
    error = info.value
    assert (error.file, error.row, error.column) == ("items.csv", 5, "x")
    assert "'oops' is not a number" in error.reason and "80%" in error.reason

    three_of_five = table("id,x\na,1\nb,2\nc,3\nd,k\ne,oops\n", "items.csv")
    encoded = encode_table(three_of_five, file_name="items.csv", columns=["x"])
    assert encoded.space.feature_names == ("x=1", "x=2", "x=3", "x=k", "x=oops")
    assert encoded.spec.groups[0].kind == "categorical"


def test_non_numeric_error_counts_the_other_bad_cells() -> None:
    rows = "".join(f"i{i},{i}\n" for i in range(20)) + "j,?x\nk,bad\n"
    with pytest.raises(DataValidationError, match=r"1 more cells"):
        encode_table(table("id,x\n" + rows, "f.csv"), file_name="f.csv", columns=["x"])


def test_booleans_are_numeric_and_overrides_win() -> None:
    raw = table("id,legend,code\na,TRUE,1\nb,false,2\nc,True,3\n", "f.csv")
    encoded = encode_table(raw, file_name="f.csv", columns=["legend", "code"], categorical=["code"])
    assert encoded.raw[:, 0].tolist() == [1.0, 0.0, 1.0]
    assert encoded.space.group_names == ("legend", "code")
    assert encoded.space.feature_names[1:] == ("code=1", "code=2", "code=3")
    with pytest.raises(DataValidationError) as info:
        encode_table(raw, file_name="f.csv", columns=["legend"], numeric=["legend", "nope"])
    assert info.value.column == "nope"
    forced = table("id,x\na,1\nb,two\n", "f.csv")
    with pytest.raises(DataValidationError, match="declared numeric") as info:
        encode_table(forced, file_name="f.csv", columns=["x"], numeric=["x"])
    assert (info.value.row, info.value.column) == (2, "x")


def test_one_hot_and_multi_hot_against_direct_construction() -> None:
    raw = table("id,t1,t2,size\na,Fire,Water,1\nb,Grass,,2\nc,Water,Fire,3\n", "p.csv")
    encoded = encode_table(raw, file_name="p.csv", columns=["t1", "t2", "size"],
                           multi_categorical={"Type": ["t1", "t2"]})  # fmt: skip
    assert encoded.space.group_names == ("Type", "size")
    assert encoded.space.feature_names == ("Type=Fire", "Type=Grass", "Type=Water", "size")
    expected = np.array([[1, 0, 1, 1], [0, 1, 0, 2], [1, 0, 1, 3]], dtype=float)
    np.testing.assert_array_equal(encoded.raw, expected)
    assert encoded.space.group_columns("Type").tolist() == [0, 1, 2]


def test_too_many_categories_says_what_to_do() -> None:
    rows = "".join(f"i{i},name{i}\n" for i in range(60))
    with pytest.raises(DataValidationError) as info:
        encode_table(table("id,who\n" + rows, "f.csv"), file_name="f.csv", columns=["who"])
    assert info.value.column == "who"
    assert "60 distinct values" in info.value.reason and "label column" in info.value.reason


def test_imputation_is_reported_and_uses_median_and_most_frequent() -> None:
    raw = table("id,x,c\na,1,p\nb,,q\nc,10,q\nd,4,\ne,,q\n", "f.csv")
    # (40% missing: without the option, x would get a missing indicator instead)
    encoded = encode_table(raw, file_name="f.csv", columns=["x", "c"], missing_indicator_share=None)
    notes = {note.column: note for note in encoded.notes}
    assert notes["x"].n_missing == 2 and notes["x"].filled_with == "median 4"
    assert notes["c"].n_missing == 1 and "'q'" in notes["c"].filled_with
    assert encoded.raw[:, 0].tolist() == [1, 4, 10, 4, 4]
    assert encoded.raw[3, 1:].tolist() == [0, 1]  # d gets the most frequent category q
    assert np.isfinite(encoded.model).all()


def test_entirely_missing_column_is_an_error() -> None:
    with pytest.raises(DataValidationError, match="no values at all") as info:
        encode_table(table("id,x\na,NA\nb,\n", "f.csv"), file_name="f.csv", columns=["x"])
    assert info.value.column == "x"


def test_standardisation_is_on_the_table_and_constant_columns_keep_scale_one() -> None:
    raw = table("id,x,k,c\na,1,5,u\nb,2,5,v\nc,6,5,v\n", "f.csv")
    encoded = encode_table(raw, file_name="f.csv", columns=["x", "k", "c"])
    space = encoded.space
    np.testing.assert_allclose(space.offset, encoded.raw.mean(axis=0))
    np.testing.assert_allclose(encoded.model[:, 0], (np.array([1, 2, 6]) - 3) / np.std([1, 2, 6]))
    assert space.scale[1] == 1.0 and np.all(encoded.model[:, 1] == 0)
    np.testing.assert_allclose(encoded.model.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(encoded.model[:, [0, 2, 3]].std(axis=0), 1)
    np.testing.assert_allclose(space.to_raw(encoded.model), encoded.raw)


def test_encode_rows_reuses_categories_fills_and_scaling() -> None:
    raw = table("id,x,c\na,1,p\nb,,q\nc,10,q\nd,4,r\n", "f.csv")
    fitted = encode_table(raw, file_name="f.csv", columns=["x", "c"], missing_indicator_share=None)
    again = encode_rows(raw, fitted.spec)
    np.testing.assert_array_equal(again.model, fitted.model)
    new = encode_rows(table("x,c\n2,r\n,p\n", "new.csv"), fitted.spec, file_name="new.csv")
    np.testing.assert_allclose(new.raw, [[2, 0, 0, 1], [4, 1, 0, 0]])
    assert [note.n_missing for note in new.notes] == [1]
    for text, row, column, message in [
        ("x,c\n2,p\n3,zz\n", 2, "c", "unknown category 'zz'"),
        ("x,c\nabc,p\n", 1, "x", "not a number"),
    ]:
        with pytest.raises(DataValidationError, match=message) as info:
            encode_rows(table(text, "new.csv"), fitted.spec, file_name="new.csv")
        assert (info.value.file, info.value.row, info.value.column) == ("new.csv", row, column)
    with pytest.raises(DataValidationError, match="needed") as info:
        encode_rows(table("x\n1\n", "new.csv"), fitted.spec, file_name="new.csv")
    assert info.value.column == "c"


def test_spec_rebuilt_from_feature_names_encodes_the_same() -> None:
    raw = table("id,x,c\na,1,p\nb,3,q\nc,10,q\n", "f.csv")
    fitted = encode_table(raw, file_name="f.csv", columns=["x", "c"])
    rebuilt = EncodingSpec.from_feature_space(fitted.space, "items")
    np.testing.assert_array_equal(encode_rows(raw, rebuilt).model, fitted.model)
    with pytest.raises(DataValidationError, match="no fill value"):
        encode_rows(table("x,c\n,p\n", "new.csv"), rebuilt)


# -- building: the happy path ---------------------------------------------------------
def test_build_reads_outcomes_labels_contexts_and_reports() -> None:
    data = build()
    assert data.item_ids.tolist() == ["a", "b", "c", "d"]
    assert data.labels.tolist() == ["Alpha", "Beta", "Gamma", "Delta"]
    assert data.item_space.group_names == ("speed", "style")
    winners = dict(zip(data.duel_ids, data.item_ids[data.winners()], strict=True))
    assert winners == {"1": "a", "2": "c", "3": "c", "4": "d"}
    assert data.raw_duels["winner"].tolist() == [winners[d] for d in data.duel_ids]
    # contexts: unique rows, per-duel index, readable labels; a quarter of the venues
    # are missing, so the missing one is marked by an indicator (not made "home")
    assert sorted(data.context_labels.tolist()) == ["away", "home", "venue ?"]
    assert data.context_labels[data.context_index].tolist() == ["home", "away", "venue ?", "home"]
    assert data.context_weights().sum() == 4
    imputed = {(n.table, n.column): n.n_missing for n in data.report.imputed}
    assert imputed == {("items", "speed"): 1, ("items", "style"): 1, ("context", "venue"): 1}
    assert data.item_encoding is not None and data.context_encoding is not None


def test_y_column_and_left_right_words_give_the_same_winners() -> None:
    by_id = build(duels="left,right,winner\na,b,a\nb,c,c\nc,d,d\n")
    by_word = build(duels="left,right,winner\na,b,left\nb,c,Right\nc,d,right\n")
    by_y = build(duels="left,right,y\na,b,1\nb,c,-1\nc,d,+1\n")
    assert by_id.winners().tolist() == by_word.winners().tolist() == [0, 2, 3]
    assert by_y.item_ids[by_y.winners()].tolist() == ["a", "c", "c"]
    assert not by_id.has_context


def test_orientation_is_randomised_seeded_and_keeps_every_outcome() -> None:
    rng = np.random.default_rng(5)
    ids = [f"i{k}" for k in range(30)]
    pairs = [rng.choice(30, size=2, replace=False) for _ in range(2000)]
    duels = "left,right,winner\n" + "".join(f"i{p},i{q},i{p}\n" for p, q in pairs)
    items = "id,x\n" + "".join(f"{i},{k / 2}\n" for k, i in enumerate(ids))  # not id-like
    data = build(items, duels, seed=3)
    assert 0.45 < np.mean(data.y > 0) < 0.55  # winner was always left in the file
    assert data.report.orientation_flipped == int(np.sum(data.y < 0))
    winner_of = {str(r + 1): f"i{p}" for r, (p, _) in enumerate(pairs)}
    assert data.item_ids[data.winners()].tolist() == [winner_of[d] for d in data.duel_ids]
    same = build(items, duels, seed=3)
    other = build(items, duels, seed=4)
    np.testing.assert_array_equal(same.y, data.y)
    np.testing.assert_array_equal(same.left, data.left)
    assert not np.array_equal(other.y, data.y)


def test_duel_ids_from_the_duel_id_column_survive_dropping() -> None:
    duels = "duel_id,left,right,winner\nm1,a,b,a\nm2,a,zz,a\nm3,c,d,d\n"
    data = build(duels=duels, on_invalid="drop")
    assert data.duel_ids.tolist() == ["m1", "m3"]
    assert data.report.dropped_duels == 1
    assert data.report.dropped_reasons == (
        "1 row: unknown item id (first: row 2, column 'right', 'zz' is not an id in items.csv)",
    )


# -- building: every bad input, located ----------------------------------------------
@pytest.mark.parametrize(
    ("duels", "row", "column", "message"),
    [
        ("left,right,winner\na,b,a\nzz,b,b\nqq,c,c\n", 2, "left", "unknown item id: 'zz'"),
        ("left,right,winner\na,b,a\nb,c,b\nc,c,c\n", 3, "right", "an item duels itself"),
        ("left,right,winner\na,b,c\n", 1, "winner", "winner 'c' is neither the left item"),
        ("left,right,y\na,b,1\nb,c,2\n", 2, "y", "y must be 1 (left won), -1 (right won) or 0"),
        ("left,right,y\na,b,yes\n", 1, "y", "got 'yes'"),
        ("left,right,winner\na,,a\n", 1, "right", "the right item id is missing"),
        ("duel_id,left,right,winner\nx,a,b,a\ny,b,c,b\nx,c,d,c\n", 3, "duel_id", "row 1"),
    ],
)
def test_bad_duel_rows_are_located(duels: str, row: int, column: str, message: str) -> None:
    error = build_error(duels=duels)
    assert (error.file, error.row, error.column) == ("duels.csv", row, column)
    assert message in error.reason


def test_error_counts_the_other_rows_with_the_same_problem() -> None:
    error = build_error(duels="left,right,winner\na,b,a\nb,zz,b\nqq,c,c\nd,a,d\nc,q2,c\n")
    assert error.row == 2 and error.column == "right"
    assert "(2 more rows have the same problem)" in error.reason


def test_no_valid_duel_rows() -> None:
    error = build_error(duels="left,right,winner\nzz,a,a\nb,b,b\n", on_invalid="drop")
    assert error.file == "duels.csv" and "no valid duel rows" in error.reason
    assert "unknown item id" in error.reason and "duels itself" in error.reason


@pytest.mark.parametrize(
    ("items", "row", "column", "message"),
    [
        ("id,x\na,1\nb,2\na,3\n", 3, "id", "item id 'a' appears twice: rows 1 and 3"),
        ("id,x\na,1\n,2\n", 2, "id", "the item id is missing"),
        ("id,x\na,1\nb,2\nc,3\nd,4\ne,fast\n", 5, "x", "'fast' is not a number"),
        ("key,x\na,1\nb,2\n", None, "id", "there is no 'id' column"),
    ],
)
def test_bad_items_are_located(items: str, row: int | None, column: str, message: str) -> None:
    error = build_error(items=items, duels="left,right,winner\na,b,a\n")
    assert (error.file, error.row, error.column) == ("items.csv", row, column)
    assert message in error.reason


@pytest.mark.parametrize(
    ("duels", "column", "message"),
    [
        ("right,winner\nb,a\n", "left", "there is no 'left' column"),
        ("left,right,venue\na,b,x\n", None, "neither is present"),
        ("left,right,winner,y\na,b,a,1\n", None, "both are present"),
    ],
)
def test_duels_file_structure_errors(duels: str, column: str | None, message: str) -> None:
    error = build_error(duels=duels)
    assert error.file == "duels.csv" and error.column == column and message in error.reason


def test_empty_and_headerless_files_fail_before_building() -> None:
    with pytest.raises(DataValidationError, match=r"duels\.csv: the file is empty"):
        table("", "duels.csv")
    with pytest.raises(DataValidationError, match="looks like data"):
        table("1,2,1\n2,3,3\n", "duels.csv")


def test_too_few_duels_to_split() -> None:
    data = build(duels="left,right,winner\na,b,a\nb,c,c\n")
    with pytest.raises(DataValidationError, match="too few duels to split"):
        split_duels(data.n_duels, seed=0)


def test_label_and_context_options() -> None:
    data = build(label_column="style", context_columns=[])
    assert data.labels.tolist()[:2] == ["x", "y"] and not data.has_context
    assert data.item_space.group_names == ("name", "speed")
    with pytest.raises(DataValidationError, match="no such column") as info:
        build(context_columns=["weather"])
    assert info.value.column == "weather"
    with pytest.raises(DataValidationError, match="one of left") as info:
        build(context_columns=["winner"])


def test_numeric_context_columns_get_readable_labels() -> None:
    duels = "left,right,winner,venue,temp\na,b,a,home,20\nb,c,c,away,25.5\nc,d,d,home,20\n"
    data = build(duels=duels)
    assert data.context_space.group_names == ("venue", "temp")
    assert sorted(data.context_labels.tolist()) == ["away / temp 25.5", "home / temp 20"]
    weights = dict(zip(data.context_labels, data.context_weights(), strict=True))
    assert weights == {"away / temp 25.5": 1.0, "home / temp 20": 2.0}
    # what the pages show: every value beside its column
    named = data_context_labels(data)
    assert sorted(named.tolist()) == ["venue = away, temp = 25.5", "venue = home, temp = 20"]
    assert named[data.context_index].tolist() == [
        "venue = home, temp = 20", "venue = away, temp = 25.5", "venue = home, temp = 20"
    ]  # fmt: skip


def test_load_directory_needs_both_files(tmp_path: Path) -> None:
    (tmp_path / "items.csv").write_text(ITEMS)
    with pytest.raises(DataValidationError, match=r"needs items\.csv and duels\.csv") as info:
        load_directory(tmp_path)
    assert info.value.file == "duels.csv"
    (tmp_path / "duels.csv").write_text(DUELS)
    data = load_directory(tmp_path, seed=1)
    assert data.name == tmp_path.name and data.n_duels == 4


def test_item_columns_choose_the_covariates_and_keep_the_rest_for_display() -> None:
    items = pd.DataFrame({"id": ["a", "b", "c"], "h": ["1", "2", "3"], "team": ["x", "y", "x"]})
    duels = pd.DataFrame(
        {"left": ["a", "b", "c"], "right": ["b", "c", "a"], "winner": ["a", "c", "a"]}
    )
    data = build_duel_data(items, duels, name="t", item_columns=["h"])
    assert data.item_space.feature_names == ("h",)
    assert list(data.raw_items["team"]) == ["x", "y", "x"]
    with pytest.raises(DataValidationError, match=r"item columns \['nope'\]"):
        build_duel_data(items, duels, name="t", item_columns=["nope"])
