"""The long layout read as published: the id column the duels reference, R row names,
the column-mapping overrides, and `prefshap train --items/--duels`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.csv_io import read_table, reading_row_names
from prefshap_core.data.layouts.loading import build_from_tables, load_files
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.errors import DataProblems, DataValidationError
from prefshap_core.models.estimators import GPM

FIT = dict(n_centres=60, lengthscale_scale=2.0, penalty_path=(1e-3, 1e-5), cg_iterations=(10, 15))
CLI_FAST = ["--n-centres", "60", "--lengthscale-scale", "2", "--quiet"]


def _csv(text: str, name: str) -> pd.DataFrame:
    with reading_row_names():
        return read_table(text.encode(), file_name=name)


def lizard_tables(n: int = 77, m: int = 240) -> tuple[str, str]:
    """An animal-contest study: traits with a numeric `id` next to the text `lizard` id,
    contests as winner / loser columns of lizard ids."""
    rng = np.random.default_rng(4)
    names = [f"lizard{k:03d}" for k in range(1, n + 1)]
    svl, mass = rng.normal(80, 6, n).round(1), rng.normal(12, 2, n).round(2)
    traits = "id,lizard,svl,mass\n" + "".join(
        f"{k + 1},{names[k]},{svl[k]},{mass[k]}\n" for k in range(n)
    )
    rows = []
    for _ in range(m):
        a, b = rng.choice(n, 2, replace=False)
        w, loser = (a, b) if svl[a] + rng.normal(0, 4) > svl[b] else (b, a)
        rows.append(f"{names[w]},{names[loser]}\n")
    return traits, "winner,loser\n" + "".join(rows)


def _same_arrays(a, b) -> None:
    for name in ("item_ids", "items", "left", "right", "y", "duel_ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.item_space.feature_names == b.item_space.feature_names


def test_lizard_id_next_to_numeric_id_reads_without_renaming():
    traits, contests = lizard_tables()
    items, duels = _csv(traits, "traits.csv"), _csv(contests, "contests.csv")
    # what a user got before: the lizard names taken as a covariate
    with pytest.raises(DataValidationError) as before:
        build_duel_data(items, duels, name="x", items_file="traits.csv")
    assert "the column is categorical with 77 distinct values" in str(before.value)
    data = build_from_tables(items, duels, items_file="traits.csv", duels_file="contests.csv")
    assert data.item_ids[0] == "lizard001" and data.item_space.group_names == ("svl", "mass")
    assert data.report.read_as == ("read as: long table (winner/loser table); item ids: `lizard`")
    assert data.report.mapping.to_json() == {
        "id": "lizard", "left": "winner", "right": "loser", "outcome": None,
        "context_key": None, "weight": None,
    }  # fmt: skip
    assert [c.column for c in data.report.ignored_columns] == ["id"]
    # the hand-reshaped file (lizard renamed to id, numeric id dropped): the same arrays
    by_hand = items.drop(columns=["id"]).rename(columns={"lizard": "id"})
    _same_arrays(data, build_duel_data(by_hand, duels, name="x"))


def test_lizard_ids_renamed_to_name_as_the_old_advice_said():
    traits, contests = lizard_tables()
    items = _csv(traits.replace("id,lizard,", "id,name,", 1), "traits.csv")
    duels = _csv(contests, "contests.csv")
    with pytest.raises(DataProblems) as before:
        build_duel_data(items, duels, name="x", items_file="traits.csv")
    assert "unknown item id" in str(before.value) and "is not an id in traits.csv" in str(
        before.value
    )
    data = build_from_tables(items, duels, items_file="traits.csv")
    assert data.report.mapping.id == "name" and data.item_ids[0] == "lizard001"


def test_id_column_override_is_taken_as_given():
    traits, contests = lizard_tables()
    items, duels = _csv(traits, "traits.csv"), _csv(contests, "contests.csv")
    given = ColumnMapping(id="id", outcome=None)
    with pytest.raises(DataValidationError) as error:  # the lizard names: a covariate again
        build_from_tables(items, duels, mapping=given, items_file="traits.csv")
    assert error.value.column == "lizard" and "categorical with 77 distinct" in str(error.value)
    with pytest.raises(DataProblems) as unknown:
        build_from_tables(items.drop(columns=["lizard"]), duels, mapping=given,
                          items_file="traits.csv", duels_file="contests.csv")  # fmt: skip
    assert str(unknown.value.problems[0]) == (
        "contests.csv, row 1 (line 2), column 'winner': unknown item id: 'lizard076' is not "
        "an id in traits.csv (239 more rows have the same problem); rows 1, 2, 3, 4, 5, ..."
    )
    with pytest.raises(DataValidationError) as missing:
        build_from_tables(items, duels, mapping=ColumnMapping(id="tag"), items_file="traits.csv")
    assert missing.value.column == "tag" and missing.value.reason == (
        "--id-column names a column the file does not have (columns: id, lizard, svl, mass)"
    )


def test_ids_match_after_normalising_numbers():
    items = pd.DataFrame({"code": [1.0, 2.0, 3.0, 4.0], "x": [0.1, 0.5, 0.2, 0.9]})
    duels = pd.DataFrame({"left": ["1", "2 ", "3", "1"], "right": ["2", "3", "4", "4"],
                          "winner": ["1", "3", "4", "4"]})  # fmt: skip
    data = build_from_tables(items, duels)
    assert data.report.mapping.id == "code"
    assert list(data.item_ids) == ["1", "2", "3", "4"] and data.n_duels == 4
    assert data.report.doubt == ""  # one column holds the ids: nothing to check


def test_left_right_outcome_overrides_rename_the_columns():
    items = pd.DataFrame({"id": ["a", "b", "c"], "x": [1.0, 2.0, 3.0]})
    given = pd.DataFrame({"home": ["a", "b", "c"], "away": ["b", "c", "a"], "res": [1, -1, 0]})
    data = build_from_tables(
        items, given, mapping=ColumnMapping(left="home", right="away", outcome="res")
    )
    by_hand = given.rename(columns={"home": "left", "away": "right", "res": "y"})
    _same_arrays(data, build_duel_data(items, by_hand, name="x"))
    assert data.report.mapping.to_json()["outcome"] == "res"


def test_r_style_items_and_contexts_use_their_row_names_as_keys():
    schools = '"","fees","size"\n"Ayr",10,200\n"Bute",12,150\n"Clyde",9,300\n"Dee",11,250\n'
    students = '"","age"\n"101",17\n"102",18\n"103",17\n'
    choices = "student,left,right,winner\n101,Ayr,Bute,Ayr\n102,Bute,Clyde,Clyde\n"
    choices += "103,Clyde,Dee,Dee\n101,Ayr,Dee,Dee\n"
    data = build_from_tables(
        _csv(schools, "schools.csv"), _csv(choices, "choices.csv"),
        contexts=_csv(students, "students.csv"),
    )  # fmt: skip
    assert list(data.item_ids) == ["Ayr", "Bute", "Clyde", "Dee"]
    assert data.context_space.group_names == ("age",)
    assert data.report.mapping.context_key == "student"
    assert "item ids: the unnamed first column (row names)" in data.report.read_as
    assert data.report.doubt == "an unnamed first column (R row names) was taken as a key"


def test_unreferenced_unnamed_column_keeps_the_advice_to_delete_it():
    items = _csv('"",id,x\n1,a,0.5\n2,b,0.7\n3,c,0.1\n', "items.csv")
    duels = _csv("left,right,winner\na,b,a\nb,c,c\n", "duels.csv")
    with pytest.raises(DataValidationError) as error:
        build_from_tables(items, duels)
    assert str(error.value) == (
        "items.csv, column '#1': column 1 of the header row has no name: every column "
        "needs a name (an unnamed first column is often an index written by a spreadsheet "
        "or pandas; delete it)"
    )
    with pytest.raises(DataValidationError):  # plain readers keep rejecting it
        read_table(b'"",id,x\n1,a,0.5\n', file_name="items.csv")


def test_cli_reads_item_and_duel_files_with_no_renaming(tmp_path, capsys):
    traits, contests = lizard_tables()
    (tmp_path / "traits.csv").write_text(traits)
    (tmp_path / "contests.csv").write_text(contests)
    out = tmp_path / "m.npz"
    code = main(["train", "--model", "gpm", "--items", str(tmp_path / "traits.csv"), "--duels",
                 str(tmp_path / "contests.csv"), "--out", str(out), *CLI_FAST])  # fmt: skip
    assert code == 0
    line = json.loads(capsys.readouterr().out)
    assert line["layout"] == "long"
    assert line["mapping"] == {"id": "lizard", "left": "winner", "right": "loser",
                               "outcome": None, "context_key": None, "weight": None}  # fmt: skip


def test_data_and_duels_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as both:
        main(["train", "--data", "sample", "--duels", "d.csv", "--out", "m.npz"])
    assert both.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--out", "m.npz"])
    assert "one of the arguments --data --duels is required" in capsys.readouterr().err


def test_python_loader_and_trained_model_equal_the_hand_reshaped_file(tmp_path):
    traits, contests = lizard_tables()
    (tmp_path / "traits.csv").write_text(traits)
    (tmp_path / "contests.csv").write_text(contests)
    data = load_files(tmp_path / "contests.csv", tmp_path / "traits.csv", name="x")
    by_hand = pd.read_csv(tmp_path / "traits.csv").drop(columns=["id"])
    by_hand.rename(columns={"lizard": "id"}).to_csv(tmp_path / "items.csv", index=False)
    hand = load_files(tmp_path / "contests.csv", tmp_path / "items.csv", name="x")
    _same_arrays(data, hand)
    g = GPM(seed=1, **FIT).fit(data).decision_function(data)
    g_hand = GPM(seed=1, **FIT).fit(hand).decision_function(hand)
    np.testing.assert_allclose(g, g_hand, rtol=0, atol=1e-12)


def test_paired_item_columns_with_a_winner_read_as_left_and_right():
    items = pd.DataFrame({"player": ["a", "b", "c"], "x": [1.0, 2.0, 3.0]})
    given = pd.DataFrame({"player1": ["a", "b", "c"], "player2": ["b", "c", "a"],
                          "winner": ["a", "c", "c"]})  # fmt: skip
    data = build_from_tables(items, given)
    by_hand = given.rename(columns={"player1": "left", "player2": "right"})
    _same_arrays(data, build_duel_data(items, by_hand, name="x", id_column="player"))
    assert data.report.mapping.to_json()["left"] == "player1"


def test_mapping_from_form_texts():
    texts = {"id": "lizard", "left": "  ", "counts": "w1, w2"}
    assert ColumnMapping.from_texts(texts) == ColumnMapping(id="lizard", counts=("w1", "w2"))
    with pytest.raises(ValueError, match="not a part of the column mapping: item"):
        ColumnMapping.from_texts({"item": "x"})


def test_unknown_id_under_mapped_columns_names_the_users_column():
    items = pd.DataFrame({"id": ["p1", "p2", "p3"], "speed": [1.0, 2.0, 3.0]})
    games = pd.DataFrame({"home": ["p1", "p2", "p9"], "away": ["p2", "p3", "p1"],
                          "res": ["1", "-1", "1"]})  # fmt: skip
    sides = ColumnMapping(left="home", right="away", outcome="res")
    with pytest.raises(DataProblems) as error:
        build_from_tables(
            items, games, mapping=sides, items_file="items.csv", duels_file="games.csv"
        )
    assert str(error.value) == (
        "games.csv, row 3 (line 4), column 'home': unknown item id: 'p9' is not an id in items.csv"
    )
    games.loc[2, "home"] = "p1"
    with pytest.raises(DataProblems) as itself:
        build_from_tables(
            items, games, mapping=sides, items_file="items.csv", duels_file="games.csv"
        )
    assert str(itself.value) == (
        "games.csv, row 3 (line 4), column 'away': an item duels itself: home and away are "
        "both 'p1'"
    )


def test_context_key_without_a_contexts_table_is_an_error():
    items = pd.DataFrame({"id": ["p1", "p2", "p3"], "speed": [1.0, 2.0, 3.0]})
    duels = pd.DataFrame({"left": ["p1", "p2"], "right": ["p2", "p3"], "y": ["1", "-1"],
                          "student": ["s1", "s2"]})  # fmt: skip
    with pytest.raises(DataValidationError) as error:
        build_from_tables(items, duels, mapping=ColumnMapping(context_key="student"),
                          duels_file="duels.csv")  # fmt: skip
    assert str(error.value) == (
        "duels.csv, column 'student': --context-key needs --contexts: the key joins a "
        "contexts table's covariates to the duels; without a contexts table, leave "
        "--context-key out"
    )


def test_context_key_without_contexts_from_the_cli(tmp_path, capsys):
    (tmp_path / "items.csv").write_text("id,speed\np1,1\np2,2\np3,3\n")
    (tmp_path / "duels.csv").write_text("left,right,y,student\np1,p2,1,s1\np2,p3,-1,s2\n")
    code = main(["train", "--model", "gpm", "--items", str(tmp_path / "items.csv"), "--duels",
                 str(tmp_path / "duels.csv"), "--context-key", "student",
                 "--out", str(tmp_path / "m.npz"), *CLI_FAST])  # fmt: skip
    assert code != 0
    assert "--context-key needs --contexts" in capsys.readouterr().err
