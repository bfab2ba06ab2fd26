"""Duel data as users have it: ties, missing outcomes, winner/loser, contexts.csv,
id-like columns, lenient and strict problem reports, decimal commas, xlsx, parquet."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from prefshap_core.data.build import build_duel_data, load_directory
from prefshap_core.data.csv_io import read_table
from prefshap_core.data.readers import read_any
from prefshap_core.errors import DataProblems, DataValidationError
from prefshap_core.kernels.operator import dense_operator
from prefshap_core.metrics import classification_metrics, log_loss, roc_auc
from prefshap_core.solvers.logistic import fit_logistic, logistic_loss
from prefshap_core.solvers.options import SolverOptions

ITEMS = "id,speed,style\na,1.5,x\nb,2,y\nc,3,x\nd,4,y\n"


def table(text: str, file_name: str) -> pd.DataFrame:
    return read_table(text.encode(), file_name=file_name)


def build(duels: str, items: str = ITEMS, contexts: str | None = None, **options: object):
    return build_duel_data(
        table(items, "items.csv"),
        table(duels, "duels.csv"),
        contexts=None if contexts is None else table(contexts, "contexts.csv"),
        name="t",
        **options,
    )


def outcomes(data) -> list[tuple[str, str, int]]:
    """(left, right, y) in the file's orientation: undo the seeded swap."""
    out = {}
    for k, duel in enumerate(data.duel_ids):
        a, b, y = data.item_ids[data.left[k]], data.item_ids[data.right[k]], int(data.y[k])
        out[duel] = (a, b, y) if a < b else (b, a, -y)
    return [out[d] for d in sorted(out, key=int)]


# -- outcome forms -------------------------------------------------------------------
def test_ties_from_y_zero_and_from_draw_or_tie_words() -> None:
    by_y = build("left,right,y\na,b,1\nb,c,0\nc,d,-1\na,d,0\n")
    by_word = build("left,right,winner\na,b,a\nb,c,draw\nc,d,d\na,d,TIE\n")
    expected = [("a", "b", 1), ("b", "c", 0), ("c", "d", -1), ("a", "d", 0)]
    assert outcomes(by_y) == outcomes(by_word) == expected
    assert by_y.report.ties == by_y.n_ties == 2
    assert any("2 ties" in note for note in by_y.report.notes)


def test_rows_without_outcome_are_skipped_and_reported_even_in_strict_mode() -> None:
    data = build("left,right,winner\na,b,a\nb,c,\nc,d,NA\na,d,null\nb,d,NaN\nc,a,c\n")
    assert sorted(data.duel_ids.tolist(), key=int) == ["1", "6"]
    assert data.report.skipped_duels == 4 and data.report.dropped_duels == 0
    rejected = data.report.rejected
    assert rejected["row"].tolist() == [2, 3, 4, 5]
    assert set(rejected["reason"]) == {"the outcome is missing (skipped)"}


def test_winner_loser_columns_are_ids_with_orientation_randomised() -> None:
    pairs = [("a", "b"), ("c", "d"), ("b", "c"), ("d", "a")] * 25
    duels = "winner,loser,venue\n" + "".join(f"{w},{v},in\n" for w, v in pairs)
    data = build(duels)
    winners = data.item_ids[data.winners()].tolist()
    order = np.argsort(data.duel_ids.astype(int))
    assert [winners[k] for k in order] == [w for w, _ in pairs]
    assert 0.3 < np.mean(data.y > 0) < 0.7  # the swap is seeded, not always left
    assert data.context_space.group_names == ("venue",)


def test_a_loser_column_with_left_and_right_is_refused() -> None:
    with pytest.raises(DataValidationError, match="'loser' column goes with") as info:
        build("left,right,winner,loser\na,b,a,b\n")
    assert info.value.column == "loser"


# -- ties in the fit and the metrics ---------------------------------------------------
def test_a_tie_is_two_half_weighted_duels_in_the_logistic_loss() -> None:
    f = torch.tensor([-2.0, 0.3, 5.0], dtype=torch.float64)
    tie = logistic_loss(torch.zeros(3, dtype=torch.float64), f)
    halves = 0.5 * (logistic_loss(torch.ones(3, dtype=torch.float64), f)) + 0.5 * (
        logistic_loss(-torch.ones(3, dtype=torch.float64), f)
    )
    assert float(tie) == pytest.approx(float(halves), rel=1e-14)
    g = np.array([0.4, -1.0, 2.0])
    assert log_loss(np.array([0, 1, -1]), g) == pytest.approx(
        (
            0.5 * np.log1p(np.exp(-0.4))
            + 0.5 * np.log1p(np.exp(0.4))
            + np.log1p(np.exp(1.0))
            + np.log1p(np.exp(2.0))
        )
        / 3
    )


def test_fit_with_a_tie_equals_the_fit_with_it_split_into_a_win_and_a_loss() -> None:
    # Data A: decided rows + ties (y = 0). Data B: every decided row twice, every tie
    # once as a left win and once as a right win. Mean losses are equal, so the
    # minimisers are.
    rng = np.random.default_rng(0)
    n, n_centres = 60, 12
    features = rng.normal(size=(n, 4))
    gram = np.exp(-0.5 * ((features[:, None] - features[None]) ** 2).sum(-1))
    y = np.where(features[:, 0] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    y[rng.choice(n, 10, replace=False)] = 0.0
    centres = np.sort(rng.choice(n, n_centres, replace=False))
    k_a = torch.as_tensor(gram[:, centres])
    copies = np.repeat(np.arange(n), 2)
    y_b = np.where(y[copies] == 0, np.tile([1.0, -1.0], n), y[copies])
    k_b = torch.as_tensor(gram[copies][:, centres])
    options = SolverOptions(
        cg_tolerance=1e-14, max_cg_iterations=400, refine_steps=30, newton_tolerance=1e-22
    )
    penalties = [1e-1, 1e-2]
    fit_a = fit_logistic(dense_operator(k_a, torch.as_tensor(centres)), y, penalties, options)
    fit_b = fit_logistic(dense_operator(k_b, torch.as_tensor(2 * centres)), y_b, penalties, options)
    assert torch.allclose(fit_a.alpha, fit_b.alpha, rtol=1e-6, atol=1e-8)


def test_metrics_leave_ties_out_of_roc_auc_and_accuracy_and_say_so() -> None:
    y = np.array([1, -1, 0, 1, 0, -1])
    g = np.array([2.0, -1.0, 9.0, 0.5, -9.0, 1.0])
    metrics = classification_metrics(y, g)
    decided = y != 0
    assert metrics["roc_auc"] == roc_auc(y[decided], g[decided])
    assert metrics["accuracy"] == pytest.approx(3 / 4)
    assert metrics["ties_excluded"] == 2


# -- contexts.csv ----------------------------------------------------------------------
CONTEXTS = "student,age,country\n1,20,uk\n2.0,31,fr\n03,25,uk\n"


def test_contexts_table_is_joined_on_its_key_as_normalised_text() -> None:
    duels = "student,left,right,winner\n1.0,a,b,a\n2,b,c,c\n3,c,d,d\n1,d,a,a\n"
    data = build(duels, contexts=CONTEXTS)
    assert data.context_space.group_names == ("age", "country")  # the key is no covariate
    by_duel = dict(zip(data.duel_ids, data.raw_duels["age"].astype(str), strict=True))
    assert by_duel == {"1": "20", "2": "31", "3": "25", "4": "20"}


def test_unknown_context_keys_are_an_error_or_dropped_and_duplicates_an_error() -> None:
    duels = "student,left,right,winner\n1,a,b,a\n9,b,c,c\n3,c,d,d\n"
    with pytest.raises(DataValidationError, match="unknown context key: '9' is not a key") as info:
        build(duels, contexts=CONTEXTS)
    assert (info.value.row, info.value.column) == (2, "student")
    data = build(duels, contexts=CONTEXTS, on_invalid="drop")
    assert sorted(data.duel_ids.tolist()) == ["1", "3"]
    assert data.report.rejected["reason"].tolist() == ["unknown context key"]
    with pytest.raises(DataValidationError, match=r"key '1' appears twice: rows 1 and 2") as info:
        build(duels, contexts="student,age\n1,20\n1.0,30\n")
    assert info.value.file == "contexts.csv"


def test_contexts_key_must_be_a_duels_column() -> None:
    with pytest.raises(DataValidationError, match="has no such column") as info:
        build("left,right,winner\na,b,a\n", contexts=CONTEXTS)
    assert (info.value.file, info.value.column) == ("contexts.csv", "student")


def test_load_directory_reads_the_optional_contexts_table(tmp_path: Path) -> None:
    (tmp_path / "items.csv").write_text(ITEMS)
    (tmp_path / "duels.csv").write_text("student,left,right,winner\n1,a,b,a\n2,b,c,c\n")
    (tmp_path / "contexts.csv").write_text(CONTEXTS)
    data = load_directory(tmp_path)
    assert data.context_space.group_names == ("age", "country")


# -- id-like columns -------------------------------------------------------------------
def test_id_like_columns_are_ignored_and_reported_unless_asked_for() -> None:
    n = 30
    items = "id,player_id,number,speed\n" + "".join(
        f"i{k},{100 + k},{7 * k},{k % 5}\n" for k in range(n)
    )
    rng = np.random.default_rng(1)
    rows = [rng.choice(n, 2, replace=False) for _ in range(150)]
    duels = "left,right,winner,match\n" + "".join(
        f"i{p},i{q},i{p},{1000 + m}\n" for m, (p, q) in enumerate(rows)
    )
    data = build(duels, items=items)
    assert data.item_space.group_names == ("speed",)
    assert not data.has_context  # 150 distinct integers in duels.csv: an id
    ignored = {(i.table, i.column) for i in data.report.ignored_columns}
    assert ignored == {("items", "player_id"), ("items", "number"), ("duels", "match")}
    assert any("'player_id' is not used" in note for note in data.report.notes)
    used = build(duels, items=items, use_columns=["number", "match"])
    assert used.item_space.group_names == ("number", "speed")
    assert used.context_space.group_names == ("match",)


# -- lenient and strict ----------------------------------------------------------------
ALL_PROBLEMS = (
    "left,right,winner\n"
    "a,b,a\n"  # 1 fine
    "a,zz,a\n"  # 2 unknown id
    "c,c,c\n"  # 3 self-duel
    "b,d,q\n"  # 4 bad winner
    "qq,d,d\n"  # 5 unknown id again
    "b,c,\n"  # 6 no outcome: skipped
    "c,d,d\n"  # 7 fine
)


def test_strict_lists_every_kind_of_problem_at_once_with_first_rows_and_counts() -> None:
    with pytest.raises(DataProblems) as info:
        build(ALL_PROBLEMS)
    error = info.value
    assert [(p.row, p.column) for p in error.problems] == [
        (2, "right"),
        (3, "right"),
        (4, "winner"),
    ]
    assert (error.row, error.column) == (2, "right")
    text = str(error)
    assert text.startswith("3 kinds of problem in duels.csv:")
    assert "duels.csv, row 2 (line 3), column 'right': unknown item id: 'zz' is not an id" in text
    assert "(1 more row has the same problem); rows 2, 5" in text
    assert "an item duels itself" in text and "the winner is not one of the two items" in text


def test_lenient_drops_and_reports_every_rejected_row_with_its_reason_and_cells() -> None:
    data = build(ALL_PROBLEMS, on_invalid="drop")
    assert sorted(data.duel_ids.tolist()) == ["1", "7"]
    rejected = data.report.rejected
    assert rejected["row"].tolist() == [2, 3, 4, 5, 6]
    assert rejected["line"].tolist() == [3, 4, 5, 6, 7]
    assert rejected["reason"].tolist() == [
        "unknown item id",
        "an item duels itself",
        "the winner is not one of the two items",
        "unknown item id",
        "the outcome is missing (skipped)",
    ]
    assert rejected["left"].tolist() == ["a", "c", "b", "qq", "b"]
    assert data.report.dropped_duels == 4 and data.report.skipped_duels == 1


def test_items_problems_are_listed_at_once() -> None:
    with pytest.raises(DataProblems) as info:
        build("left,right,winner\na,b,a\n", items="id,x\na,1\n,2\na,3\nb,4\n")
    assert [(p.row, p.column) for p in info.value.problems] == [(2, "id"), (3, "id")]


# -- formats -----------------------------------------------------------------------------
def test_decimal_commas_and_thousands_separators() -> None:
    semicolons = read_table(b"id;x;label\na;1.234,5;p\nb;0,25;q\nc;-3;r\n", file_name="i.csv")
    assert semicolons["x"].tolist() == ["1234.5", "0.25", "-3"]
    commas = read_table(b'id,x\na,"1,234,567.5"\nb,2\n', file_name="i.csv")
    assert commas["x"].tolist() == ["1234567.5", "2"]
    chosen = read_table(b"id;x\na;1.5\n", file_name="i.csv", decimal=".")
    assert chosen["x"].tolist() == ["1.5"]
    data = build_duel_data(
        semicolons, table("left,right,winner\na,b,a\nb,c,c\n", "d.csv"), name="t"
    )
    space = data.item_space
    np.testing.assert_allclose(
        data.items[:, 0] * space.scale[0] + space.offset[0], [1234.5, 0.25, -3]
    )


def test_a_column_that_looks_numeric_but_is_not_names_a_cell_and_row() -> None:
    items = "id,x\n" + "".join(f"i{k},{k}.5\n" for k in range(9)) + "i9,fast\n"
    with pytest.raises(DataValidationError, match="'fast' is not a number") as info:
        build("left,right,winner\ni1,i2,i1\n", items=items)
    assert (info.value.row, info.value.column) == (10, "x")


def _xlsx(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_excel(buffer, index=False, engine="openpyxl")
    return buffer.getvalue()


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False, engine="pyarrow")
    return buffer.getvalue()


@pytest.mark.parametrize("write", [_xlsx, _parquet], ids=["xlsx", "parquet"])
def test_xlsx_and_parquet_tables_read_like_their_csv(write) -> None:
    items = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "speed": [1.5, None, 3.0, 4.0],
            "style": ["x", "y", " x", None],
        }
    )
    duels = pd.DataFrame({"left": ["a", "b", "c"], "right": ["b", "c", "d"], "y": [1, 0, -1]})
    from_files = build_duel_data(
        read_any(write(items), file_name="items.x"),
        read_any(write(duels), file_name="duels.x"),
        name="t",
    )
    from_csv = build_duel_data(
        read_table(items.to_csv(index=False).encode(), file_name="items.csv"),
        read_table(duels.to_csv(index=False).encode(), file_name="duels.csv"),
        name="t",
    )
    np.testing.assert_allclose(from_files.items, from_csv.items)
    np.testing.assert_array_equal(from_files.y, from_csv.y)
    assert from_files.item_space.feature_names == from_csv.item_space.feature_names
    assert from_files.report.imputed == from_csv.report.imputed


def test_broken_workbook_and_parquet_are_our_errors() -> None:
    with pytest.raises(DataValidationError, match=r"not a readable \.xlsx workbook"):
        read_any(b"PK\x03\x04garbage", file_name="items.xlsx")
    with pytest.raises(DataValidationError, match="not a readable parquet file"):
        read_any(b"PAR1garbage", file_name="items.parquet")


def test_load_directory_takes_xlsx_and_parquet_tables(tmp_path: Path) -> None:
    (tmp_path / "items.xlsx").write_bytes(_xlsx(pd.read_csv(io.StringIO(ITEMS))))
    duels = pd.DataFrame({"winner": ["a", "c"], "loser": ["b", "d"]})
    (tmp_path / "duels.parquet").write_bytes(_parquet(duels))
    data = load_directory(tmp_path)
    assert data.n_duels == 2 and data.item_space.group_names == ("speed", "style")


def test_item_records_show_wins_losses_ties_and_winner_views_leave_ties_out() -> None:
    from prefshap_core.workflow.items import item_record
    from prefshap_core.workflow.selections import duels_of_item

    data = build("left,right,y\na,b,1\nb,a,0\nc,a,-1\na,d,0\nd,a,1\n")
    record = item_record(data, "a")
    assert (record.wins, record.losses, record.ties, record.wlt) == (2, 1, 2, "2-1-2")
    assert sorted(record.duels["result"]) == ["lost", "tie", "tie", "won", "won"]
    ties = duels_of_item(data, "a", "ties")
    assert sorted(data.duel_ids[ties].astype(int).tolist()) == [2, 4]
    assert len(duels_of_item(data, "a", "losses")) == 1
    assert set(data.decided().tolist()) == set(np.flatnonzero(data.y != 0).tolist())
