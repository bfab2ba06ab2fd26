"""Wide choice tables (both alternatives' attributes on each row, a choice column): the
items are the distinct attribute combinations, the rows the duels."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.layouts.loading import build_from_tables, load_files
from prefshap_core.errors import DataValidationError
from prefshap_core.models.estimators import GPM

FIT = dict(n_centres=40, lengthscale_scale=2.0, penalty_path=(1e-3, 1e-5), cg_iterations=(10, 15))
ATTRIBUTES = ("price", "time", "change", "comfort")


def travel(n_people: int = 12, per_person: int = 10, seed: int = 0) -> pd.DataFrame:
    """A stated-preference travel experiment laid out as mlogit's `Train` data."""
    rng = np.random.default_rng(seed)
    rows = []
    for person in range(1, n_people + 1):
        for _ in range(per_person):
            a = [
                int(rng.choice(v))
                for v in ([1500, 2000, 2400, 3000], [90, 120, 150], [0, 1], [0, 1, 2])
            ]
            b = list(a)
            while b == a:
                b = [
                    int(rng.choice(v))
                    for v in ([1500, 2000, 2400, 3000], [90, 120, 150], [0, 1], [0, 1, 2])
                ]
            utility = lambda x: -x[0] / 500 - x[1] / 30 - x[2] + 0.5 * x[3]  # noqa: E731
            pick = 1 if utility(a) + rng.logistic() > utility(b) + rng.logistic() else 2
            rows.append([person, len(rows) + 1, f"choice{pick}", *a, *b])
    columns = (
        ["id", "choiceid", "choice"] + [f"{x}1" for x in ATTRIBUTES] + [f"{x}2" for x in ATTRIBUTES]
    )
    return pd.DataFrame(rows, columns=columns)


def people(n_people: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"id": np.arange(1, n_people + 1), "age": rng.integers(18, 70, n_people),
                         "income": rng.normal(30, 8, n_people).round(1)})  # fmt: skip


def by_hand(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The 8-line script a user wrote: the distinct alternatives, then one duel per row."""

    def name(row, k):
        return "|".join(f"{x}={row[f'{x}{k}']}" for x in ATTRIBUTES)

    items, duels = {}, []
    for _, row in table.iterrows():
        for k in (1, 2):
            items.setdefault(name(row, k), [row[f"{x}{k}"] for x in ATTRIBUTES])
        winner = "left" if row["choice"] == "choice1" else "right"
        duels.append((name(row, 1), name(row, 2), winner, row["choiceid"], row["id"]))
    item_table = pd.DataFrame([[k, *v] for k, v in items.items()], columns=["id", *ATTRIBUTES])
    return item_table, pd.DataFrame(duels, columns=["left", "right", "winner", "duel_id", "id"])


def _same_arrays(a, b) -> None:
    for name in ("item_ids", "items", "left", "right", "y", "duel_ids", "contexts",
                 "context_index"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_wide_table_with_respondents_equals_the_hand_reshaped_files():
    table = travel()
    data = build_from_tables(None, table, contexts=people(), name="t", duels_file="Train.csv")
    items, duels = by_hand(table)
    hand = build_duel_data(items, duels, contexts=people(), name="t")
    _same_arrays(data, hand)
    assert data.item_ids[0] == "price={}|time={}|change={}|comfort={}".format(
        *table.loc[0, ["price1", "time1", "change1", "comfort1"]]
    )
    assert data.report.read_as == (
        f"read as: wide choice table; {len(items):,} distinct alternatives from 4 paired "
        "attributes; respondent `id` -> context key"
    )
    assert data.report.mapping.to_json() == {
        "id": None, "left": "price1", "right": "price2", "outcome": "choice",
        "context_key": "id", "weight": None,
    }  # fmt: skip
    assert data.context_space.group_names == ("age", "income")
    g = GPM(seed=1, **FIT).fit(data).decision_function(data)
    np.testing.assert_allclose(g, GPM(seed=1, **FIT).fit(hand).decision_function(hand),
                               rtol=0, atol=1e-12)  # fmt: skip


def test_respondent_without_contexts_is_set_aside():
    data = build_from_tables(None, travel(), name="t")
    assert not data.has_context
    assert data.report.read_as.endswith("; respondent `id` set aside")
    assert [c.describe() for c in data.report.ignored_columns] == [
        "duels column 'id' is not used: the respondent's id: give a contexts table of their "
        "covariates to use it"
    ]


@pytest.mark.parametrize(
    ("first", "second", "picks"),
    [("_1", "_2", ("1", "2")), (".1", ".2", ("alt1", "alt2")), ("_left", "_right",
     ("left", "right")), ("_a", "_b", ("A", "B"))],
)  # fmt: skip
def test_every_pair_naming_reads_the_same(first, second, picks):
    table = travel(4, 8)
    renamed = table.rename(columns={f"{x}{k}": f"{x}{s}" for x in ATTRIBUTES
                                    for k, s in ((1, first), (2, second))})  # fmt: skip
    renamed["choice"] = np.where(table["choice"] == "choice1", picks[0], picks[1])
    plain = build_from_tables(None, table, name="t")
    data = build_from_tables(None, renamed, name="t")
    _same_arrays(data, plain)
    assert data.report.layout == "wide"


def test_wide_table_messages():
    table = travel(2, 5)
    with pytest.raises(DataValidationError) as items_given:
        build_from_tables(pd.DataFrame({"id": ["a", "b"], "x": [1, 2]}), table,
                          duels_file="Train.csv")  # fmt: skip
    assert str(items_given.value) == (
        "Train.csv: read as a wide choice table (the alternatives' attributes are on each "
        "row), which has no item table: leave out --items"
    )
    table.loc[2, "choice"] = "bus"
    with pytest.raises(DataValidationError) as bad:
        build_from_tables(None, table, duels_file="Train.csv")
    assert str(bad.value) == (
        "Train.csv, row 3 (line 4), column 'choice': the choice 'bus' names neither "
        "alternative (expected a value ending in '1' or '2', as the paired columns do)"
    )


def test_cli_trains_and_explains_a_wide_table(tmp_path, capsys):
    travel().to_csv(tmp_path / "Train.csv", index=False)
    people().to_csv(tmp_path / "people.csv", index=False)
    model = tmp_path / "m.npz"
    assert main(["train", "--duels", str(tmp_path / "Train.csv"), "--contexts",
                 str(tmp_path / "people.csv"), "--out", str(model), "--model", "gpm",
                 "--n-centres", "40", "--lengthscale-scale", "2", "--quiet"]) == 0  # fmt: skip
    line = json.loads(capsys.readouterr().out)
    assert line["layout"] == "wide" and line["mapping"]["context_key"] == "id"
    # new choice sets: alternatives outside the model's pool are explained as covariate rows
    fresh = travel(3, 4, seed=9)
    fresh.loc[0, "price1"] = 2750  # never offered in training
    fresh.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "x.csv"
    assert main(["explain", "--model", str(model), "--duels", str(tmp_path / "new.csv"),
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    values = pd.read_csv(out)
    assert len(values) == len(fresh)
    assert values.loc[0, "left"].startswith("price=2750|time=")
    players = [c for c in values.columns if c in ATTRIBUTES]
    np.testing.assert_allclose(values[players].sum(axis=1), values["output"] - values["base_value"],
                               atol=1e-8)  # fmt: skip
    data = load_files(tmp_path / "Train.csv", contexts=tmp_path / "people.csv")
    assert data.report.layout == "wide"


def test_a_data_folder_with_only_a_wide_duels_table(tmp_path):
    from prefshap_core.data.build import load_directory

    travel().to_csv(tmp_path / "duels.csv", index=False)
    data = load_directory(tmp_path)
    assert data.report.layout == "wide"
    _same_arrays(data, build_from_tables(None, travel(), name=tmp_path.name))
