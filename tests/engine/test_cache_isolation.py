"""Cache isolation: the cache never serves one upload's entry for another."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cache import DiskCache, explanation_key
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain import ExplainOptions
from prefshap_core.paths import repo_root
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

SETTINGS = TrainSettings(
    n_centres=40, penalty=1e-3, lengthscale_scale=1.0, cme_lambda=1e-2, baseline=False
)


def _build(items: pd.DataFrame, duels: pd.DataFrame):
    return build_duel_data(items, duels, name="upload (items.csv + duels.csv)")


@pytest.fixture(scope="module")
def variants():
    """A base upload and three variants equal to it in model space."""
    folder = repo_root() / "sample_data"
    items = pd.read_csv(folder / "items.csv", dtype=str)
    duels = pd.read_csv(folder / "duels.csv", dtype=str)
    base = _build(items, duels)
    renamed = items.assign(name=[f"Player {k}" for k in range(len(items))])
    other_names = _build(renamed, duels)
    in_cm = items.assign(speed=(items["speed"].astype(float) * 100).map(str))
    other_units = _build(in_cm, duels)
    space = base.item_space
    # "speed" and "power" explained together: same columns, other Shapley players.
    merged = {"speed": "speed+power", "power": "speed+power"}
    group_of = [merged.get(space.group_names[g], space.group_names[g]) for g in space.feature_group]
    group_names = tuple(dict.fromkeys(group_of))
    other_grouping = replace(
        base,
        item_space=FeatureSpace(
            space.feature_names,
            group_names,
            np.array([group_names.index(g) for g in group_of]),
            space.offset,
            space.scale,
        ),
    )
    return base, other_names, other_units, other_grouping


def test_variants_are_equal_in_model_space(variants) -> None:
    base, *others = variants
    for other in others:
        np.testing.assert_allclose(other.items, base.items, atol=1e-12)
        assert np.array_equal(other.left, base.left) and np.array_equal(other.y, base.y)


def test_two_uploads_equal_in_model_space_get_their_own_entries(tmp_path: Path, variants) -> None:
    cache = DiskCache(tmp_path)
    settings_fp = settings_fingerprint(SETTINGS)
    fingerprints = [data_fingerprint(d) for d in variants]
    assert len(set(fingerprints)) == 4
    for data, fp in zip(variants, fingerprints, strict=True):
        assert cache.load_training(fp, settings_fp) is None  # never the previous upload's
        result = train(data, SETTINGS)
        cache.save_training(fp, settings_fp, result)
    assert len(list((tmp_path / "models").iterdir())) == 4
    # Each entry brings back its own upload's units and players.
    for data, fp in zip(variants, fingerprints, strict=True):
        fn = cache.load_training(fp, settings_fp).function
        np.testing.assert_array_equal(fn.item_space.scale, data.item_space.scale)
        assert fn.item_space.group_names == data.item_space.group_names
    keys = {explanation_key(fp, settings_fp, np.arange(5), ExplainOptions()) for fp in fingerprints}
    assert len(keys) == 4


def test_duel_ids_and_dataset_name_are_part_of_the_key(variants) -> None:
    base = variants[0]
    fp = data_fingerprint(base)
    other_ids = replace(base, duel_ids=np.array([f"m{k}" for k in range(base.n_duels)]))
    assert data_fingerprint(other_ids) != fp
    assert data_fingerprint(replace(base, name="upload (a.csv + b.csv)")) != fp
    assert data_fingerprint(replace(base)) == fp  # and stable


def test_orphan_temporary_folders_are_cleaned(tmp_path: Path) -> None:
    old = tmp_path / "models" / ".abc.x1.tmp"
    young = tmp_path / "explanations" / ".def.x2.tmp"
    deleted = tmp_path / "explanations" / ".ghi.123.deleted"
    for folder in (old, young, deleted):
        folder.mkdir(parents=True)
        (folder / "model.npz").write_bytes(b"half")
    past = time.time() - 3600
    for folder in (old, deleted):
        os.utime(folder, (past, past))
    DiskCache(tmp_path)  # opening the cache cleans up
    assert not old.exists() and not deleted.exists()
    assert young.exists()  # may belong to a writer still running
