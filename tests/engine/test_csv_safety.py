"""CSV safety: no CSV the product writes runs a formula when opened."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard.components.export import export_name
from prefshap_core.cli import main
from prefshap_core.csv_safety import neutralise, safe_file_name, to_csv_bytes
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain.explanation import Explanation
from prefshap_core.models.model_file import save_model
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.plots import explanation_to_csv

ATTACKS = [
    "=1+1",
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1)",
    "\t=x",
    "\r=x",
    "-inf",
    "=HYPERLINK(x)",
]


def _is_safe(text: str) -> bool:
    if not text.startswith(("=", "+", "-", "@", "\t", "\r")):
        return True
    try:
        return np.isfinite(float(text))
    except ValueError:
        return False


@pytest.mark.parametrize("attack", ATTACKS)
def test_formula_cells_get_a_quote(attack: str) -> None:
    assert neutralise(attack) == "'" + attack


@pytest.mark.parametrize("number", ["-5", "+1", "-1e3", "-0.25", "12", "plain", "a=b"])
def test_numbers_and_plain_text_round_trip(number: str) -> None:
    assert neutralise(number) == number


def test_frames_cells_and_headers_are_neutralised_numbers_untouched() -> None:
    frame = pd.DataFrame({"=h": ["=1", "-7", "ok"], "x": [-1.5, 2.0, 3.0]})
    back = pd.read_csv(io.BytesIO(to_csv_bytes(frame)), dtype=str, keep_default_na=False)
    assert list(back.columns) == ["'=h", "x"]
    assert back["'=h"].tolist() == ["'=1", "-7", "ok"]
    assert back["x"].tolist() == ["-1.5", "2.0", "3.0"]


def test_download_file_names_are_reduced() -> None:
    for raw in ["../../etc/passwd", "=evil\r\n.csv", "a b/c\\d.csv", "", ".hidden"]:
        name = safe_file_name(raw)
        assert name and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
        assert not name.startswith(".")
    assert safe_file_name("-1_wins.csv") == "1_wins.csv"
    name = export_name("=x/../y", "waterfall", "@id", "png")
    assert name == "x-y-waterfall-id.png"


def _function() -> PreferenceFunction:
    rng = np.random.default_rng(0)
    space = FeatureSpace(("=g", "-3"), ("=g", "-3"), np.arange(2), np.zeros(2), np.ones(2))
    items = rng.normal(size=(3, 2))
    return PreferenceFunction(
        kind="gpm", item_space=space, item_ids=np.array(["=1+1", "@x", "-5"]), items=items,
        lengthscales=np.ones(2), centres_left=items[[0, 1]], centres_right=items[[1, 2]],
        alpha=np.array([0.5, -0.3]), cme_lambda=1e-2,
    )  # fmt: skip


def test_cli_explain_output_is_formula_safe(tmp_path: Path) -> None:
    model = save_model(_function(), tmp_path / "m.npz")
    duels = tmp_path / "duels.csv"
    pd.DataFrame({"left": ["=1+1", "-5"], "right": ["@x", "=1+1"]}).to_csv(duels, index=False)
    out = tmp_path / "out.csv"
    assert main(["explain", "--model", str(model), "--duels", str(duels),
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    cells = [*table.columns, *table["left"], *table["right"]]
    assert all(_is_safe(c) for c in cells)
    assert table["left"].tolist() == ["'=1+1", "-5"]  # the negative id round-trips
    assert "'=g" in table.columns and "-3" in table.columns


def test_explanation_csv_is_formula_safe() -> None:
    expl = Explanation(
        values=np.array([[0.1, -0.2]]), base_values=np.zeros(1), outputs=np.array([-0.1]),
        data=np.zeros((1, 2)), player_names=("=g", "@h"), what="items", orientation="left",
        duel_ids=np.array(["=d"]), left_ids=np.array(["+a"]), right_ids=np.array(["-4"]),
        winners=np.array([1]),
    )  # fmt: skip
    table = pd.read_csv(io.BytesIO(explanation_to_csv(expl)), dtype=str, keep_default_na=False)
    assert all(_is_safe(c) for c in [*table.columns, *table.iloc[0].tolist()])
    assert table["right"].tolist() == ["-4"]
