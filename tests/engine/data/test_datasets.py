"""Built-in datasets: generators follow their stated mechanism; real loaders load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from prefshap_core import paths
from prefshap_core.data.build import load_directory
from prefshap_core.datasets.real import chameleons, pokemon, tennis
from prefshap_core.datasets.registry import DATASET_NAMES, available_datasets, load_dataset
from prefshap_core.datasets.sample_data import write_sample_data
from prefshap_core.datasets.synthetic import gpm_generated, gpm_generated_tables, synthetic_clusters
from prefshap_core.errors import DatasetUnavailableError
from prefshap_core.paths import repo_root


# -- synthetic clusters ------------------------------------------------------------
def test_synthetic_clusters_default_shape_and_features() -> None:
    data = synthetic_clusters()
    assert (data.n_items, data.n_duels) == (1000, 40000)
    # The paper's encoding: 4 continuous features and 3 binary cluster indicators,
    # each its own player; the "cluster" label stays in raw_items for selections.
    names = ("x0", "x_AB", "x_AC", "x_BC", "cluster_A", "cluster_B", "cluster_C")
    assert data.item_space.feature_names == names
    assert data.item_space.group_names == names
    one_hot = data.raw_items[["cluster_A", "cluster_B", "cluster_C"]].to_numpy()
    assert np.array_equal(one_hot.sum(1), np.ones(1000))
    assert np.array_equal(
        one_hot.argmax(1), data.raw_items["cluster"].map({"A": 0, "B": 1, "C": 2}).to_numpy()
    )
    assert set(data.raw_items["cluster"]) == {"A", "B", "C"}
    assert not data.has_context
    assert 0.48 < np.mean(data.y > 0) < 0.52


def test_synthetic_clusters_outcome_rule_on_raw_features() -> None:
    data = synthetic_clusters(n_items=80, n_duels=600, seed=7)
    raw = data.raw_items
    for left, right, y in zip(data.left, data.right, data.y, strict=True):
        a, b = raw.iloc[left], raw.iloc[right]
        assert a["id"] != b["id"]
        if a["cluster"] == b["cluster"]:
            feature = "x0"
        else:
            feature = "x_" + "".join(sorted((a["cluster"], b["cluster"])))
        assert (a[feature] > b[feature]) == (y > 0)


def test_synthetic_clusters_model_space_matches_raw_items() -> None:
    data = synthetic_clusters(n_items=50, n_duels=100, seed=1)
    raw = data.item_space.to_raw(data.items)
    np.testing.assert_allclose(raw[:, :4], data.raw_items[["x0", "x_AB", "x_AC", "x_BC"]])
    one_hot = data.raw_items["cluster"].to_numpy()[:, None] == np.array(["A", "B", "C"])
    np.testing.assert_allclose(raw[:, 4:], one_hot.astype(float), atol=1e-12)


def test_synthetic_clusters_is_seeded() -> None:
    first, again = synthetic_clusters(200, 500, seed=2), synthetic_clusters(200, 500, seed=2)
    other = synthetic_clusters(200, 500, seed=3)
    np.testing.assert_array_equal(first.items, again.items)
    np.testing.assert_array_equal(first.y, again.y)
    np.testing.assert_array_equal(first.left, again.left)
    assert not np.array_equal(first.items, other.items)


# -- GPM-generated ------------------------------------------------------------------
def test_gpm_generated_shape_and_learnable_outcomes() -> None:
    data = gpm_generated()
    assert (data.n_items, data.n_duels, data.items.shape[1]) == (300, 6000, 10)
    items, duels, truth = gpm_generated_tables()
    np.testing.assert_allclose(truth.g.std(), 3.0)
    # x ~ N(0, 0.1 I): sample variance near 0.1 on every feature
    np.testing.assert_allclose(items.drop(columns="id").var(ddof=0), 0.1, rtol=0.25)
    agreement = np.mean(np.sign(truth.g) == duels["y"].to_numpy())
    assert agreement > 0.75  # y ~ Bernoulli(sigmoid(g)) with sd(g) = 3
    winners = dict(zip(data.duel_ids, data.item_ids[data.winners()], strict=True))
    expected = np.where(duels["y"] > 0, duels["left"], duels["right"])
    assert [winners[str(r + 1)] for r in range(len(duels))] == expected.tolist()


def test_gpm_generated_g_is_a_gpm_of_the_first_two_features_only() -> None:
    items, duels, truth = gpm_generated_tables(n_items=40, n_duels=150, d=6, seed=4)
    x = items.drop(columns="id").to_numpy(copy=True)
    x[:, 2:] = np.random.default_rng(9).normal(size=(40, 4))  # noise features: irrelevant
    row = {item: i for i, item in enumerate(items["id"])}

    def k(a: int, b: int) -> float:
        diff = (x[a, :2] - x[b, :2]) / np.sqrt(0.1)
        return float(np.exp(-0.5 * diff @ diff))

    for j, (left, right) in enumerate(zip(duels["left"], duels["right"], strict=True)):
        l, r = row[left], row[right]
        direct = sum(
            a * (k(cl, l) * k(cr, r) - k(cl, r) * k(cr, l))
            for a, cl, cr in zip(truth.alpha, truth.centre_left, truth.centre_right, strict=True)
        )
        assert direct == pytest.approx(truth.g[j], abs=1e-12)


def test_data_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFSHAP_DATA_DIR", "/somewhere/data")
    assert paths.data_dir() == Path("/somewhere/data")
    monkeypatch.delenv("PREFSHAP_DATA_DIR")
    assert paths.data_dir() == (repo_root().parent / "shared" / "data").resolve()


# -- registry -----------------------------------------------------------------------
def test_available_datasets_explains_what_is_missing(tmp_path: Path) -> None:
    infos = {info.name: info for info in available_datasets(tmp_path)}
    assert tuple(infos) == DATASET_NAMES
    assert infos["synthetic"].available and infos["gpm_synthetic"].available
    for name in ("chameleons", "pokemon", "tennis"):
        assert not infos[name].available
        assert str(tmp_path / name) in infos[name].reason and "http" in infos[name].reason
    with pytest.raises(DatasetUnavailableError, match=r"predictors\.csv"):
        load_dataset("chameleons", data_dir=tmp_path)


def test_load_dataset_by_name_and_by_folder(tmp_path: Path) -> None:
    small = load_dataset("synthetic", seed=1, n_items=30, n_duels=100)
    assert (small.n_items, small.n_duels) == (30, 100)
    assert load_dataset("gpm_synthetic", n_items=20, n_duels=50).n_items == 20
    write_sample_data(tmp_path)
    assert load_dataset(str(tmp_path)).n_duels == 800
    with pytest.raises(DatasetUnavailableError, match="no dataset 'nope'"):
        load_dataset("nope")


# -- sample data --------------------------------------------------------------------
def test_committed_sample_data_is_what_the_generator_writes(tmp_path: Path) -> None:
    committed = repo_root() / "sample_data"
    for written in write_sample_data(tmp_path):
        assert written.read_bytes() == (committed / written.name).read_bytes()
        assert written.stat().st_size < 50_000


def test_sample_data_loads_with_context_and_reported_imputation() -> None:
    data = load_directory(repo_root() / "sample_data")
    assert (data.n_items, data.n_duels) == (60, 800)
    assert data.item_space.group_names == ("speed", "power", "stamina", "style")
    assert sorted(data.context_labels.tolist()) == ["indoor", "outdoor"]
    assert {note.column for note in data.report.imputed} == {"speed", "stamina", "style"}


# -- real data (needs the data directory) ------------------------------------------
@pytest.mark.realdata
def test_chameleons(data_dir: Path) -> None:
    data = chameleons(data_dir=data_dir)
    assert (data.n_items, data.n_duels) == (35, 106)
    assert data.item_space.group_names == (
        "ch.res", "jl.res", "tl.res", "mass.res", "SVL", "prop.main", "prop.patch",
    )  # fmt: skip
    assert data.report.dropped_duels == 0


@pytest.mark.realdata
def test_pokemon(data_dir: Path) -> None:
    data = pokemon(data_dir=data_dir)
    assert (data.n_items, data.n_duels) == (800, 50000)
    space = data.item_space
    assert space.group_names == (
        "HP", "Attack", "Defense", "Sp. Atk", "Sp. Def", "Speed", "Type", "Legendary",
    )  # fmt: skip
    types = space.to_raw(data.items)[:, space.group_columns("Type")]
    assert len(space.group_columns("Type")) == 18
    assert set(np.round(types.sum(axis=1)).tolist()) == {1.0, 2.0}  # one or two types
    legendary = space.to_raw(data.items)[:, space.group_columns("Legendary")[0]]
    assert set(np.round(legendary, 9).tolist()) == {0.0, 1.0}
    assert "Pikachu" in data.labels.tolist()


@pytest.mark.realdata
def test_tennis(data_dir: Path) -> None:
    data = tennis(data_dir=data_dir)
    assert data.n_items == 3433 and data.n_duels == 96331
    assert data.report.dropped_duels == 148  # matches with a player missing from overviews
    assert data.item_space.group_names == (
        "birth_year", "height_cm", "weight_kg", "turned_pro_age", "handedness", "backhand",
    )  # fmt: skip
    djokovic = data.item_index("d643")
    assert data.labels[djokovic] == "Novak Djokovic"
    raw = data.raw_items.iloc[djokovic]
    assert (raw["birth_year"], raw["height_cm"], raw["turned_pro_age"]) == (1987, 188, 16)
    his = (data.left == djokovic) | (data.right == djokovic)
    assert his.sum() > 900
    losses = his & (data.losers() == djokovic)
    assert losses.sum() > 100
    labels = set(data.context_labels[data.context_index[losses]].tolist())
    assert {"Outdoor / Clay", "Indoor / Hard"} <= labels
    imputed = {note.column: note.n_missing for note in data.report.imputed}
    assert imputed["height_cm"] > 0 and imputed["turned_pro_age"] > 0
    assert np.isfinite(data.items).all() and np.isfinite(data.contexts).all()
