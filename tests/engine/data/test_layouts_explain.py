"""`prefshap explain --duels` reads every outcome layout `prefshap train` reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main

ITEMS = "id,tag,speed,power\n" + "".join(
    f"{k},p{k},{(k * 37) % 11 / 10},{(k * 17) % 7 / 10}\n" for k in range(1, 21)
)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("m")
    rng = np.random.default_rng(0)
    pairs = [rng.choice(20, 2, replace=False) + 1 for _ in range(150)]
    (folder / "items.csv").write_text(ITEMS)
    (folder / "duels.csv").write_text("winner,loser\n" + "".join(f"p{a},p{b}\n" for a, b in pairs))
    out = folder / "m.npz"
    assert main(["train", "--model", "gpm", "--items", str(folder / "items.csv"), "--duels",
                 str(folder / "duels.csv"), "--out", str(out), "--n-centres", "40",
                 "--lengthscale-scale", "2", "--quiet"]) == 0  # fmt: skip
    return out


def _explain(model, tmp_path, text: str, *flags: str) -> pd.DataFrame:
    (tmp_path / "d.csv").write_text(text)
    out = tmp_path / "x.csv"
    code = main(["explain", "--model", str(model), "--duels", str(tmp_path / "d.csv"),
                 "--out", str(out), "--quiet", *flags])  # fmt: skip
    assert code == 0
    return pd.read_csv(out)


def test_winner_loser_layout_is_explained_with_the_winner_on_the_left(model, tmp_path):
    values = _explain(model, tmp_path, "winner,loser\np1,p2\np3,p4\n")
    assert values[["left", "right", "winner"]].values.tolist() == [
        ["p1", "p2", "left"], ["p3", "p4", "left"]
    ]  # fmt: skip
    plain = _explain(model, tmp_path, "left,right,winner\np1,p2,p1\np3,p4,p3\n")
    np.testing.assert_array_equal(values[["speed", "power"]], plain[["speed", "power"]])


def test_y_outcomes_and_mapped_columns(model, tmp_path):
    flags = ["--left-column", "a", "--right-column", "b", "--outcome-column", "res"]
    values = _explain(model, tmp_path, "a,b,res\np1,p2,-1\np3,p4,0\n", *flags)
    assert values["winner"].tolist() == ["right", "tie"]


def test_count_tables_give_one_duel_per_row(model, tmp_path):
    values = _explain(model, tmp_path, "item1,item2,win1,win2\np1,p2,3,1\np5,p6,0,2\n")
    assert values[["left", "right"]].values.tolist() == [["p1", "p2"], ["p5", "p6"]]
