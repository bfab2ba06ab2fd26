"""`prefshap train` / `prefshap explain` on real-world duel files: --lenient,
--rejected-out, --use-column, the skipped / ties / cv fields of the JSON line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.models.model_file import load_model

FAST = ["--n-centres", "60", "--lengthscale-scale", "2", "--quiet"]


@pytest.fixture()
def folder(tmp_path):
    """40 items, 120 duels with a few ties, three bad rows and one with no outcome."""
    rng = np.random.default_rng(0)
    n = 40
    speed = rng.normal(size=n).round(2)
    items = pd.DataFrame({"id": [f"p{k}" for k in range(n)], "speed": speed,
                          "member_id": np.arange(1000, 1000 + n)})  # fmt: skip
    rows = []
    for _ in range(120):
        a, b = rng.choice(n, 2, replace=False)
        gap = speed[a] - speed[b]
        rows.append((f"p{a}", f"p{b}", "draw" if abs(gap) < 0.05 else f"p{a if gap > 0 else b}"))
    rows += [("p1", "nobody", "p1"), ("p2", "p2", "p2"), ("p3", "p4", "p9"), ("p5", "p6", "")]
    (tmp_path / "data").mkdir()
    items.to_csv(tmp_path / "data" / "items.csv", index=False)
    pd.DataFrame(rows, columns=["left", "right", "winner"]).to_csv(
        tmp_path / "data" / "duels.csv", index=False
    )
    return tmp_path / "data"


def test_strict_train_exits_2_listing_every_problem(folder, tmp_path, capsys):
    code = main(
        ["train", "--model", "gpm", "--data", str(folder), "--out", str(tmp_path / "m.npz"), *FAST]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert "3 kinds of problem in duels.csv" in error
    for reason in ("unknown item id", "an item duels itself", "the winner is not one"):
        assert reason in error


def test_lenient_train_writes_rejected_rows_and_counts_skipped_ties_and_cv(
    folder, tmp_path, capsys
):
    out = tmp_path / "m.npz"
    code = main(
        ["train", "--model", "gpm", "--data", str(folder), "--out", str(out), "--lenient", *FAST]
    )
    assert code == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out.strip().splitlines()[-1])
    rejected = pd.read_csv(tmp_path / "m.rejected.csv")
    assert rejected["line"].tolist() == [122, 123, 124, 125]
    assert rejected["reason"].tolist()[-1] == "the outcome is missing (skipped)"
    assert "4 rows rejected or skipped" in captured.err
    assert report["skipped"] == 4
    duels = pd.read_csv(folder / "duels.csv", keep_default_na=False)
    assert report["ties"] == int((duels["winner"] == "draw").sum()) > 0
    assert set(report["cv"]) == {"roc_auc_mean", "roc_auc_sd", "folds"}
    assert report["cv"]["folds"] == 5 and 0.5 < report["cv"]["roc_auc_mean"] <= 1.0
    assert report["n_test"] < 200 and "held-out test duels" in report["summary"]
    assert load_model(out).item_space.group_names == ("speed",)  # member_id: id-like


def test_use_column_and_rejected_out(folder, tmp_path, capsys):
    out, rejected = tmp_path / "m.npz", tmp_path / "elsewhere" / "bad.csv"
    args = ["train", "--model", "gpm", "--data", str(folder), "--out", str(out), "--lenient",
            "--rejected-out", str(rejected), "--use-column", "member_id", *FAST]  # fmt: skip
    assert main(args) == 0
    assert rejected.is_file()
    assert load_model(out).item_space.group_names == ("speed", "member_id")


def test_explain_lenient_skips_rows_it_cannot_explain(folder, tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert (
        main(
            [
                "train",
                "--model",
                "gpm",
                "--data",
                str(folder),
                "--out",
                str(model),
                "--lenient",
                *FAST,
            ]
        )
        == 0
    )
    duels = pd.DataFrame({"left": ["p1", "zz", "p3"], "right": ["p2", "p2", "p4"]})
    duels.to_csv(tmp_path / "q.csv", index=False)
    out = tmp_path / "shap.csv"
    args = ["explain", "--model", str(model), "--duels", str(tmp_path / "q.csv"),
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(args) == 2  # strict: the unknown id stops it
    assert main([*args, "--lenient"]) == 0
    assert pd.read_csv(out)["left"].tolist() == ["p1", "p3"]
    rejected = pd.read_csv(tmp_path / "shap.rejected.csv")
    assert rejected["row"].tolist() == [2] and rejected["column"].tolist() == ["left"]


def test_explain_json_counts_skipped_rows_and_ties(folder, tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert (
        main(
            [
                "train",
                "--model",
                "gpm",
                "--data",
                str(folder),
                "--out",
                str(model),
                "--lenient",
                *FAST,
            ]
        )
        == 0
    )
    duels = pd.DataFrame(
        {"left": ["p1", "zz", "p3", "p5"], "right": ["p2", "p2", "p4", "p6"],
         "winner": ["draw", "p2", "p3", "Tie"]}
    )  # fmt: skip
    duels.to_csv(tmp_path / "q.csv", index=False)
    out = tmp_path / "shap.csv"
    capsys.readouterr()
    args = ["explain", "--model", str(model), "--duels", str(tmp_path / "q.csv"),
            "--out", str(out), "--lenient"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["skipped"] == 1 and summary["ties"] == 2
    table = pd.read_csv(out)
    assert table["winner"].tolist() == ["draw", "p3", "Tie"]  # as given, ties left vs right
