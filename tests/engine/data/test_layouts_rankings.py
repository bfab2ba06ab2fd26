"""Rankings (``event, item, rank``): all pairs within each event, the better rank wins,
equal ranks tie."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.layouts.loading import build_from_tables
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.errors import DataValidationError
from prefshap_core.models.estimators import GPM

FIT = dict(n_centres=40, lengthscale_scale=2.0, penalty_path=(1e-3, 1e-5), cg_iterations=(10, 15))


def drivers(n: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    skill, age = rng.normal(size=n).round(2), rng.integers(20, 40, n)
    return pd.DataFrame({"driver": [f"d{k:02d}" for k in range(n)], "skill": skill, "age": age})


def races(n_races: int = 12, field: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    skill = drivers()["skill"].to_numpy()
    rows = []
    for race in range(1, n_races + 1):
        entrants = rng.choice(len(skill), field, replace=False)
        finish = np.argsort(np.argsort(-(skill[entrants] + rng.normal(0, 1, field)))) + 1
        for d, place in zip(entrants, finish, strict=True):
            rows.append((f"r{race}", f"d{d:02d}", int(place)))
    table = pd.DataFrame(rows, columns=["race", "driver", "rank"]).astype({"rank": object})
    table.loc[3, "rank"] = table.loc[4, "rank"]  # a dead heat
    table.loc[7, "rank"] = None  # did not finish: in no pair
    return table


def by_hand(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for race, group in table.dropna(subset=["rank"]).groupby("race", sort=False):
        entries = list(group.itertuples(index=False))
        k = 0
        for i in range(len(entries)):
            for j in range(i + 1, len(entries)):
                k += 1
                a, b = entries[i], entries[j]
                y = int(np.sign(float(b.rank) - float(a.rank)))
                rows.append((a.driver, b.driver, y, f"{race}:{k}", race))
    return pd.DataFrame(rows, columns=["left", "right", "y", "duel_id", "race"])


def _same_arrays(a, b) -> None:
    for name in ("item_ids", "items", "left", "right", "y", "duel_ids"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_rankings_equal_the_hand_reshaped_pairs():
    table = races()
    data = build_from_tables(drivers(), table, name="r")
    hand = build_duel_data(drivers(), by_hand(table).drop(columns=["race"]), name="r",
                           id_column="driver")  # fmt: skip
    _same_arrays(data, hand)
    assert data.n_ties == 1
    assert data.report.read_as == (
        f"read as: rankings; 12 events `race` ranked by `rank` -> {data.n_duels} pairs; "
        "item ids: `driver`"
    )
    assert data.report.mapping.to_json() == {
        "id": "driver", "left": "driver", "right": "driver", "outcome": "rank",
        "context_key": None, "weight": None,
    }  # fmt: skip
    g = GPM(seed=1, **FIT).fit(data).decision_function(data)
    np.testing.assert_allclose(g, GPM(seed=1, **FIT).fit(hand).decision_function(hand),
                               rtol=0, atol=1e-12)  # fmt: skip


def test_event_as_context_key_with_a_contexts_table():
    table = races()
    tracks = pd.DataFrame({"race": [f"r{k}" for k in range(1, 13)],
                           "wet": [k % 3 == 0 for k in range(1, 13)]})  # fmt: skip
    data = build_from_tables(drivers(), table, contexts=tracks, name="r")
    hand = build_duel_data(drivers(), by_hand(table), contexts=tracks, name="r",
                           id_column="driver")  # fmt: skip
    _same_arrays(data, hand)
    np.testing.assert_array_equal(data.contexts, hand.contexts)
    assert data.report.mapping.context_key == "race"
    assert data.report.read_as.endswith("; event `race` -> context key")


def test_overrides_and_the_item_table_it_needs():
    table = races().rename(columns={"race": "page", "rank": "pos", "driver": "url"})
    mapping = ColumnMapping(event="page", rank="pos")
    data = build_from_tables(drivers(), table, mapping=mapping, name="r")
    assert data.report.layout == "rankings" and data.report.mapping.left == "url"
    with pytest.raises(DataValidationError) as error:
        build_from_tables(None, races(), duels_file="races.csv")
    assert str(error.value) == (
        "races.csv: read as a rankings table, which needs an item table of the items' "
        "covariates (--items FILE): items without covariates are not explainable by features"
    )


def test_cli_trains_and_explains_rankings(tmp_path, capsys):
    drivers().to_csv(tmp_path / "drivers.csv", index=False)
    races().to_csv(tmp_path / "races.csv", index=False)
    model = tmp_path / "m.npz"
    assert main(["train", "--model", "gpm", "--items", str(tmp_path / "drivers.csv"), "--duels",
                 str(tmp_path / "races.csv"), "--out", str(model), "--n-centres", "40",
                 "--lengthscale-scale", "2", "--quiet"]) == 0  # fmt: skip
    line = json.loads(capsys.readouterr().out)
    assert line["layout"] == "rankings" and line["mapping"]["outcome"] == "rank"
    out = tmp_path / "x.csv"
    assert main(["explain", "--model", str(model), "--duels", str(tmp_path / "races.csv"),
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    values = pd.read_csv(out)
    hand = by_hand(races())
    assert values["duel_id"].tolist() == hand["duel_id"].tolist()
    words = {1: "left", -1: "right", 0: "tie"}
    assert values["winner"].tolist() == [words[v] for v in hand["y"]]
