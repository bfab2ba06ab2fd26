"""The missing-indicator off-switch, end to end: build_duel_data, the loaders and
``prefshap train --no-missing-indicators`` (the dashboard's checkbox: its own test)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data, load_directory
from prefshap_core.datasets.real import tennis
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.models.model_file import load_model

N_ITEMS = 30
FAST = ["--n-centres", "40", "--lengthscale-scale", "2", "--penalty", "0.01", "--quiet"]


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """30 items: ``h`` 40 % missing (12 of 30), ``hand`` 10 % missing, ``w`` complete."""
    rng = np.random.default_rng(3)
    h = rng.normal(180, 8, N_ITEMS).round(1)
    h_given = h.copy()
    h_given[::5] = np.nan  # 6 cells
    h_given[1::5] = np.nan  # 6 more: 12 of 30 = 40 %
    hand = np.array(["L", "R"] * (N_ITEMS // 2), dtype=object)
    hand[[2, 13, 24]] = None  # 10 %: below the share, filled with the mode
    items = pd.DataFrame(
        {"id": [f"p{k}" for k in range(N_ITEMS)], "h": h_given, "hand": hand,
         "w": rng.normal(75, 5, N_ITEMS).round(1)}
    )  # fmt: skip
    pairs = [(a, b) for a in range(N_ITEMS) for b in range(a + 1, N_ITEMS)][::3]
    duels = pd.DataFrame(
        [(f"p{a}", f"p{b}", f"p{a if h[a] > h[b] else b}") for a, b in pairs],
        columns=["left", "right", "winner"],
    )
    return items, duels


def test_a_mostly_missing_column_gets_an_indicator_unless_switched_off() -> None:
    items, duels = _tables()
    on = build_duel_data(items, duels, name="t")
    off = build_duel_data(items, duels, name="t", missing_indicators=False)

    assert "h (missing)" in on.item_space.feature_names
    assert on.item_space.feature_group[on.item_space.feature_names.index("h (missing)")] == 0
    assert off.item_space.feature_names == ("h", "hand=L", "hand=R", "w")
    assert not any("(missing)" in n for n in off.item_space.feature_names)
    assert off.item_space.group_names == on.item_space.group_names == ("h", "hand", "w")

    present = items["h"].dropna().to_numpy()
    notes_on = {n.column: n.filled_with for n in on.report.imputed}
    notes_off = {n.column: n.filled_with for n in off.report.imputed}
    assert notes_on["h"] == f"mean {np.mean(present):g}, marked in 'h (missing)'"
    assert notes_off["h"] == f"median {np.median(present):g}"  # the module's documented fill
    # Below the share nothing changes: the mode either way.
    mode = items["hand"].value_counts().idxmax()  # R: 14 of the 27 given
    assert notes_on["hand"] == notes_off["hand"] == f"most frequent category {mode!r}"
    # The median really is what the missing rows hold (raw units, before standardising).
    raw_h = off.items[:, 0] * off.item_space.scale[0] + off.item_space.offset[0]
    missing = items["h"].isna().to_numpy()
    np.testing.assert_allclose(raw_h[missing], np.median(present))
    np.testing.assert_allclose(raw_h[~missing], items["h"].to_numpy()[~missing])
    # Said in the notes when off; not when on (the imputation notes say "marked in").
    assert any("missing indicators off" in n for n in off.report.notes)
    assert not any("missing indicators off" in n for n in on.report.notes)


def test_context_columns_follow_the_switch_too() -> None:
    items, duels = _tables()
    venue = np.array(["in", "out", None, None], dtype=object)
    duels["venue"] = venue[np.arange(len(duels)) % 4]  # 50 % missing
    on = build_duel_data(items, duels, name="t")
    off = build_duel_data(items, duels, name="t", missing_indicators=False)
    assert on.context_space.feature_names == ("venue=in", "venue=out", "venue (missing)")
    assert off.context_space.feature_names == ("venue=in", "venue=out")
    assert {n.column: n.filled_with for n in off.report.imputed}["venue"].startswith(
        "most frequent category"
    )


def test_the_loaders_pass_the_switch_through(tmp_path: Path) -> None:
    items, duels = _tables()
    items.to_csv(tmp_path / "items.csv", index=False)
    duels.to_csv(tmp_path / "duels.csv", index=False)
    for data in (
        load_directory(tmp_path, missing_indicators=False),
        load_dataset(tmp_path, missing_indicators=False),
    ):
        assert "h (missing)" not in data.item_space.feature_names
    assert "h (missing)" in load_dataset(tmp_path).item_space.feature_names
    # Generators take it as well (their tables have no missing cells: same data).
    kept = load_dataset("synthetic", n_items=40, n_duels=100, missing_indicators=False)
    plain = load_dataset("synthetic", n_items=40, n_duels=100)
    np.testing.assert_array_equal(kept.items, plain.items)
    assert load_dataset("gpm_synthetic", n_items=30, n_duels=60, missing_indicators=False)


@pytest.mark.slow
def test_tennis_without_indicators(data_dir: Path) -> None:
    on, off = tennis(data_dir=data_dir), tennis(data_dir=data_dir, missing_indicators=False)
    assert "height_cm (missing)" in on.item_space.feature_names
    assert not any("(missing)" in n for n in off.item_space.feature_names)
    assert off.item_space.group_names == on.item_space.group_names
    fills = {n.column: n.filled_with for n in off.report.imputed}
    assert fills["height_cm"].startswith("median ") and "marked" not in fills["height_cm"]


@pytest.mark.parametrize("switch", [[], ["--no-missing-indicators"]], ids=["default", "off"])
def test_train_flag_writes_a_model_file_without_indicator_columns(
    switch: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items, duels = _tables()
    folder = tmp_path / "data"
    folder.mkdir()
    items.to_csv(folder / "items.csv", index=False)
    duels.to_csv(folder / "duels.csv", index=False)
    out = tmp_path / "m.npz"
    code = main(
        ["train", "--model", "gpm", "--data", str(folder), "--out", str(out), *switch, *FAST]
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["out"] == str(out)
    names = load_model(out).item_space.feature_names
    if switch:
        assert names == ("h", "hand=L", "hand=R", "w")
    else:
        assert "h (missing)" in names


def test_train_help_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--no-missing-indicators" in capsys.readouterr().out
