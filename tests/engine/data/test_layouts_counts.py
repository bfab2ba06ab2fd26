"""Count tables (wins per pair, as prefmod and BradleyTerry2 publish them) read as
weighted duels: each count is that many duels, a row's duels stay in one split part."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data, load_directory
from prefshap_core.data.duel_data import split_duels
from prefshap_core.data.layouts.loading import build_from_tables, load_files
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.errors import DataValidationError
from prefshap_core.models.estimators import GPM
from prefshap_core.paths import repo_root
from prefshap_core.workflow.fingerprints import data_fingerprint

FIT = dict(n_centres=40, lengthscale_scale=2.0, penalty_path=(1e-3, 1e-5), cg_iterations=(10, 15))
TEAMS = ["Baltimore", "Boston", "Cleveland", "Detroit", "Milwaukee", "New York", "Toronto"]


def teams() -> pd.DataFrame:
    return pd.DataFrame({"team": TEAMS, "payroll": [4.1, 5.0, 3.2, 4.4, 2.9, 6.1, 3.8],
                         "city_size": [2.8, 4.5, 2.1, 4.3, 1.6, 19.0, 5.6]})  # fmt: skip


def baseball() -> pd.DataFrame:
    """BradleyTerry2's `baseball` layout: one row per home/away pairing, wins of each."""
    rng = np.random.default_rng(1)
    rows = [(h, a, int(rng.integers(0, 5)), int(rng.integers(0, 5)))
            for h in TEAMS for a in TEAMS if h != a]  # fmt: skip
    return pd.DataFrame(rows, columns=["home.team", "away.team", "home.wins", "away.wins"])


def judged() -> pd.DataFrame:
    """prefmod-like: one row per judge and pair, wins of each side and ties, and a total."""
    rng = np.random.default_rng(2)
    rows = []
    for judge in ("j1", "j2", "j3", "j4"):
        for i, a in enumerate(TEAMS):
            for b in TEAMS[i + 1 :]:
                w1, w2, t = (int(v) for v in rng.integers(0, 3, 3))
                rows.append((judge, a, b, w1, w2, t, w1 + w2 + t))
    return pd.DataFrame(rows, columns=["judge", "item1", "item2", "win1", "win2", "tied", "total"])


def by_hand(table: pd.DataFrame, left: str, right: str, counts: list[str]) -> pd.DataFrame:
    """The 6-line reshaping a user wrote: each count as that many long rows."""
    rows = []
    for number, (_, row) in enumerate(table.iterrows(), start=1):
        k = 0
        for column, y in zip(counts, (1, -1, 0), strict=False):
            for _ in range(int(row[column])):
                k += 1
                rows.append((row[left], row[right], y, f"{number}.{k}"))
    return pd.DataFrame(rows, columns=["left", "right", "y", "duel_id"])


def baseball_by_hand(table: pd.DataFrame) -> pd.DataFrame:
    return by_hand(table, "home.team", "away.team", ["home.wins", "away.wins"])


def _same_arrays(a, b) -> None:
    for name in ("item_ids", "items", "left", "right", "y", "duel_ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_home_away_counts_equal_the_hand_reshaped_duels():
    table = baseball()
    data = build_from_tables(teams(), table, name="b")
    hand = build_duel_data(teams(), baseball_by_hand(table), name="b", id_column="team")
    _same_arrays(data, hand)
    assert data.report.layout == "counts"
    assert data.report.mapping.to_json() == {
        "id": "team", "left": "home.team", "right": "away.team", "outcome": None,
        "context_key": None, "weight": "home.wins,away.wins",
    }  # fmt: skip
    assert data.report.read_as == (
        f"read as: count table; 42 rows -> {data.n_duels} duels (wins in `home.wins`/"
        "`away.wins`); item ids: `team`"
    )
    # W-L records count every win: a team's wins are its rows' win counts
    wins = np.bincount(data.winners(), minlength=len(TEAMS))
    expected = [table.loc[table["home.team"] == t, "home.wins"].sum()
                + table.loc[table["away.team"] == t, "away.wins"].sum() for t in TEAMS]  # fmt: skip
    np.testing.assert_array_equal(wins, expected)


def test_a_count_of_two_is_the_duel_twice():
    table = pd.DataFrame({"item1": ["Boston"], "item2": ["Toronto"], "win1": [2], "win2": [0]})
    names = {"home.team": "item1", "away.team": "item2", "home.wins": "win1", "away.wins": "win2"}
    table = pd.concat([table, baseball().rename(columns=names)])
    data = build_from_tables(teams(), table.reset_index(drop=True), name="b")
    first = data.duel_groups == 1
    assert first.sum() == 2
    pairs = {frozenset(p) for p in zip(data.left[first], data.right[first], strict=True)}
    assert len(pairs) == 1
    assert set(data.y[first] * np.where(data.left[first] == TEAMS.index("Boston"), 1, -1)) == {1}


def test_judges_rows_leftovers_set_aside_and_judge_as_context_key():
    table = judged()
    data = build_from_tables(teams(), table, name="j")
    assert not data.has_context  # neither the judge nor the total become covariates
    assert [c.describe() for c in data.report.ignored_columns] == [
        "duels column 'judge' is not used: a count table's extra column is not a context "
        "covariate (name it to use it anyway: --use-column)",
        "duels column 'total' is not used: a count table's extra column is not a context "
        "covariate (name it to use it anyway: --use-column)",
    ]
    judges = pd.DataFrame({"judge": ["j1", "j2", "j3", "j4"], "age": [21, 35, 48, 62]})
    joined = build_from_tables(teams(), table, contexts=judges, name="j")
    assert joined.context_space.group_names == ("age",)
    assert joined.report.mapping.context_key == "judge"
    assert "; judge `judge` -> context key" in joined.report.read_as
    hand = by_hand(table, "item1", "item2", ["win1", "win2", "tied"])
    hand["judge"] = np.repeat(table["judge"].to_numpy(), table["total"].to_numpy())
    _same_arrays(joined, build_duel_data(teams(), hand, contexts=judges, name="j",
                                         id_column="team"))  # fmt: skip
    assert joined.n_ties == table["tied"].sum()


def test_count_columns_override_and_bad_counts():
    table = baseball().rename(columns={"home.wins": "h", "away.wins": "a"})
    mapping = ColumnMapping(left="home.team", right="away.team", counts=("h", "a"))
    data = build_from_tables(teams(), table, mapping=mapping, name="b")
    assert data.n_duels == table[["h", "a"]].to_numpy().sum()
    table["h"] = table["h"].astype(float)
    table.loc[3, "h"] = 1.5
    with pytest.raises(DataValidationError) as error:
        build_from_tables(teams(), table, mapping=mapping, name="b", duels_file="bb.csv")
    assert str(error.value) == (
        "bb.csv, row 4 (line 5), column 'h': a count must be a whole number, 0 or more: got '1.5'"
    )


def test_split_keeps_a_rows_duels_together_and_groups_enter_the_fingerprint():
    data = build_from_tables(teams(), judged(), name="j")
    split = split_duels(data.n_duels, 0, groups=data.duel_groups)
    parts = [set(data.duel_groups[p].tolist()) for p in (split.train, split.validation, split.test)]
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    assert sorted(np.concatenate([split.train, split.validation, split.test])) == list(
        range(data.n_duels)
    )
    assert abs(len(split.test) - 0.1 * data.n_duels) < 12
    from dataclasses import replace

    assert data_fingerprint(data) != data_fingerprint(replace(data, duel_groups=None))
    # data without groups keeps the fingerprint it had before count tables existed
    assert data_fingerprint(load_directory(repo_root() / "sample_data")) == "e3e39b7c112d31c34c5f"


def test_trained_model_equals_the_hand_reshaped_one():
    table = baseball()
    data = build_from_tables(teams(), table, name="b")
    hand = build_duel_data(teams(), baseball_by_hand(table), name="b", id_column="team")
    split = split_duels(data.n_duels, 0, groups=data.duel_groups)
    g = GPM(seed=1, **FIT).fit(data, split.train, split.validation).decision_function(data)
    g_hand = GPM(seed=1, **FIT).fit(hand, split.train, split.validation).decision_function(hand)
    np.testing.assert_allclose(g, g_hand, rtol=0, atol=1e-12)


def test_cli_trains_on_a_count_table(tmp_path, capsys):
    teams().to_csv(tmp_path / "teams.csv", index=False)
    judged().to_csv(tmp_path / "counts.csv", index=False)
    args = ["train", "--model", "gpm", "--items", str(tmp_path / "teams.csv"), "--duels",
            str(tmp_path / "counts.csv"), "--out", str(tmp_path / "m.npz"),
            "--n-centres", "40", "--lengthscale-scale", "2", "--quiet"]  # fmt: skip
    assert main(args) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["layout"] == "counts"
    assert line["mapping"]["weight"] == "win1,win2,tied" and line["mapping"]["left"] == "item1"
    assert line["ties"] == judged()["tied"].sum()
    data = load_files(tmp_path / "counts.csv", tmp_path / "teams.csv")
    assert data.n_duels == judged()["total"].sum()


def test_cross_validation_folds_keep_a_rows_duels_together():
    from prefshap_core.data.duel_data import group_folds, group_holdout

    groups = build_from_tables(teams(), judged(), name="j").duel_groups
    folds = group_folds(groups, [0, 3], 5)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(groups)))
    seen = [set(groups[f].tolist()) for f in folds]
    assert all(not (a & b) for i, a in enumerate(seen) for b in seen[i + 1 :])
    rest = np.setdiff1d(np.arange(len(groups)), folds[0])
    fit_on, tune_on = group_holdout(groups, rest, [0, 4, 0])
    assert not set(groups[fit_on].tolist()) & set(groups[tune_on].tolist())
    assert sorted(np.concatenate([fit_on, tune_on]).tolist()) == rest.tolist()


def test_counts_beyond_the_limit_are_refused_before_any_duel_is_made():
    table = baseball()
    table.loc[0, "home.wins"] = 10**12
    with pytest.raises(DataValidationError) as error:
        build_from_tables(teams(), table, duels_file="bb.csv")
    total = int(table[["home.wins", "away.wins"]].to_numpy().sum())
    assert str(error.value) == (
        f"bb.csv: the counts add up to {total:,} duels, more than the 20,000,000 this "
        "reader holds; is a count column really a count?"
    )


def test_parquet_and_xlsx_count_tables_read_as_the_csv(tmp_path):
    teams().to_csv(tmp_path / "teams.csv", index=False)
    judged().to_csv(tmp_path / "counts.csv", index=False)
    judged().to_parquet(tmp_path / "counts.parquet", index=False)
    teams().to_excel(tmp_path / "teams.xlsx", index=False)
    plain = load_files(tmp_path / "counts.csv", tmp_path / "teams.csv", name="c")
    for duels, items in (("counts.parquet", "teams.csv"), ("counts.csv", "teams.xlsx")):
        data = load_files(tmp_path / duels, tmp_path / items, name="c")
        _same_arrays(data, plain)
        np.testing.assert_array_equal(data.duel_groups, plain.duel_groups)


def test_unknown_id_in_a_count_table_names_the_users_column():
    duels = pd.DataFrame(
        {
            "item1": ["Boston", "Gotham"],
            "item2": ["Toronto", "Boston"],
            "win1": [2, 3],
            "win2": [1, 0],
        }
    )
    with pytest.raises(DataValidationError) as error:
        build_from_tables(teams(), duels, items_file="teams.csv", duels_file="counts.csv")
    # one message per file row, though the row's 3 wins are 3 duels
    assert str(error.value) == (
        "counts.csv, row 2 (line 3), column 'item1': unknown item id: 'Gotham' is not an "
        "id in teams.csv"
    )
    assert error.value.column == "item1"
