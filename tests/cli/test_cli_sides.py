"""`prefshap explain --what sides` and `--what interactions`: layouts and numbers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.reference import item_value_of_players, random_preference_function
from prefshap_core.models.model_file import save_model

GROUPS = [("a", 1), ("type", 3), ("b", 1), ("colour", 2)]
NAMES = [g for g, _ in GROUPS]


@pytest.fixture(scope="module", params=["gpm", "cgpm"])
def model_file(request, tmp_path_factory):
    fn = random_preference_function(request.param, n_items=12, groups=GROUPS, seed=7, levels=2)
    path = tmp_path_factory.mktemp("models") / f"{request.param}.npz"
    save_model(fn, path)
    return path, fn


def duels_csv(tmp_path, fn, name="duels.csv", swap=False, **extra):
    rng = np.random.default_rng(0)
    ids = np.asarray(fn.item_ids)
    left, right = rng.choice(ids, 8), rng.choice(ids, 8)
    if swap:
        left, right = right, left
    table = pd.DataFrame({"left": left, "right": right, **extra})
    table.to_csv(tmp_path / name, index=False)
    return tmp_path / name, table


def explain(model, duels, out, *extra):
    return main(["explain", "--model", str(model), "--duels", str(duels), "--out", str(out),
                 "--quiet", *extra])  # fmt: skip


def test_sides_layout_values_and_swap(tmp_path, model_file):
    path, fn = model_file
    duels, table = duels_csv(tmp_path, fn, duel_id=[f"d{k}" for k in range(8)])
    table["winner"] = table["left"]
    table.to_csv(duels, index=False)
    assert explain(path, duels, tmp_path / "a.csv", "--what", "sides") == 0
    a = pd.read_csv(tmp_path / "a.csv")
    left_cols, right_cols = [f"left:{g}" for g in NAMES], [f"right:{g}" for g in NAMES]
    assert list(a.columns) == [
        "left", "right", "duel_id", "winner", "output", "base_value", *left_cols, *right_cols
    ]  # fmt: skip
    want = Explainer(fn, ExplainOptions(what="sides"))(table["left"], table["right"])
    np.testing.assert_allclose(a[left_cols + right_cols].to_numpy(), want.values, atol=1e-13)
    np.testing.assert_allclose(a[left_cols + right_cols].sum(axis=1), a["output"], atol=1e-10)
    assert (a["base_value"] == 0).all()
    swapped, _ = duels_csv(tmp_path, fn, name="swapped.csv", swap=True)
    assert explain(path, swapped, tmp_path / "b.csv", "--what", "sides") == 0
    b = pd.read_csv(tmp_path / "b.csv")
    np.testing.assert_allclose(
        a[left_cols].to_numpy(), -b[right_cols].to_numpy(), atol=1e-12, rtol=0
    )


def test_sides_sampled_writes_standard_errors(tmp_path, model_file):
    path, fn = model_file
    duels, _ = duels_csv(tmp_path, fn)
    assert explain(path, duels, tmp_path / "s.csv", "--what", "sides", "--samples", "40") == 0
    s = pd.read_csv(tmp_path / "s.csv")
    players = [f"left:{g}" for g in NAMES] + [f"right:{g}" for g in NAMES]
    assert list(s.columns) == [
        "left", "right", "output", "base_value", *players, *(f"se:{p}" for p in players)
    ]  # fmt: skip
    assert (s[[f"se:{p}" for p in players]] >= 0).all().all()


def direct_sii(value, p: int) -> np.ndarray:
    """Grabisch-Roubens by its sum over subsets, pairs i < j in order."""
    out = []
    for i, j in itertools.combinations(range(p), 2):
        others = [k for k in range(p) if k not in (i, j)]
        total = 0.0
        for size in range(p - 1):
            weight = math.factorial(size) * math.factorial(p - size - 2) / math.factorial(p - 1)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                total += weight * (value(s | {i, j}) - value(s | {i}) - value(s | {j}) + value(s))
        out.append(total)
    return np.array(out)


def test_interactions_layout_and_values(tmp_path, model_file):
    path, fn = model_file
    duels, table = duels_csv(tmp_path, fn)
    assert explain(path, duels, tmp_path / "i.csv", "--what", "interactions", "--exact") == 0
    inter = pd.read_csv(tmp_path / "i.csv")
    pairs = [f"{a}*{b}" for a, b in itertools.combinations(NAMES, 2)]
    assert list(inter.columns) == ["left", "right", "output", "base_value", *pairs]
    np.testing.assert_allclose(
        inter["output"], fn.decision_for_ids(table["left"], table["right"]), atol=1e-12
    )
    index = {str(i): k for k, i in enumerate(fn.item_ids)}
    for row in range(3):  # the slow reference (C-GPM: the context-averaged game)
        a, b = index[table["left"][row]], index[table["right"][row]]
        value = item_value_of_players(fn, fn.items[a], fn.items[b], fn.cme_lambda)
        want = direct_sii(value, len(NAMES))
        np.testing.assert_allclose(inter.loc[row, pairs].to_numpy(float), want, atol=1e-8)
    assert np.abs(inter[pairs].to_numpy()).max() > 1e-4


def test_interactions_refuse_above_16_groups_and_samples(tmp_path, capsys):
    groups = [(f"g{k}", 1) for k in range(17)]
    fn = random_preference_function("gpm", n_items=6, n_centres=4, groups=groups, seed=1)
    save_model(fn, tmp_path / "wide.npz")
    duels, _ = duels_csv(tmp_path, fn)
    capsys.readouterr()
    assert explain(tmp_path / "wide.npz", duels, tmp_path / "x.csv", "--what", "interactions") == 2
    err = capsys.readouterr().err
    assert err.startswith("prefshap explain: error: ") and "limited to 16 groups" in err
    assert "the model has 17" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()
    code = explain(tmp_path / "wide.npz", duels, tmp_path / "x.csv",
                   "--what", "interactions", "--samples", "10")  # fmt: skip
    assert code == 2 and "always exact" in capsys.readouterr().err
