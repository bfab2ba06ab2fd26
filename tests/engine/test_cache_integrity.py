"""Cache integrity: edited, planted or unsigned entries are misses, never served."""

from __future__ import annotations

import io
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from prefshap_core import cache_integrity
from prefshap_core.cache import DiskCache
from prefshap_core.cache_integrity import CACHE_SECRET_ENV, MANIFEST
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.explain.explanation import Explanation
from prefshap_core.paths import repo_root
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

SETTINGS = TrainSettings(
    n_centres=30, penalty=1e-3, lengthscale_scale=1.0, cme_lambda=1e-2, baseline=False
)


@pytest.fixture(scope="module")
def trained() -> tuple[TrainingResult, str, str]:
    data = load_dataset(repo_root() / "sample_data")
    result = train(data, SETTINGS)
    return result, data_fingerprint(data), settings_fingerprint(SETTINGS)


@pytest.fixture(autouse=True)
def no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_SECRET_ENV, raising=False)


def _explanation() -> Explanation:
    values = np.array([[0.5, -0.25], [1.0, 2.0]])
    return Explanation(
        values=values,
        base_values=np.zeros(2),
        outputs=values.sum(1),
        data=np.zeros((2, 2)),
        player_names=("speed", "power"),
        duel_ids=np.array(["d0", "d1"]),
        left_ids=np.array(["a", "b"]),
        right_ids=np.array(["b", "a"]),
        winners=np.array([1, -1], dtype=np.int8),
    )


def _negate_alpha(model_file: Path) -> None:
    """Rewrite a model file with every coefficient negated: still a valid model file."""
    with np.load(model_file, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["alpha"] = -arrays["alpha"]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    model_file.write_bytes(buffer.getvalue())


def test_an_intact_entry_is_served(tmp_path: Path, trained) -> None:
    result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    entry = cache.save_training(data_fp, settings_fp, result)
    assert (entry / MANIFEST).is_file()
    back = cache.load_training(data_fp, settings_fp)
    np.testing.assert_array_equal(back.function.alpha, result.function.alpha)
    assert back.metrics == result.metrics


def test_an_edited_metric_is_a_logged_miss(tmp_path: Path, trained, caplog) -> None:
    result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    entry = cache.save_training(data_fp, settings_fp, result)
    info = json.loads((entry / "result.json").read_text())
    info["metrics"]["test"]["roc_auc"] = 0.123
    (entry / "result.json").write_text(json.dumps(info, indent=1))
    with caplog.at_level(logging.WARNING, logger="prefshap_core.cache"):
        assert cache.load_training(data_fp, settings_fp) is None
    assert "result.json does not match its checksum" in caplog.text
    assert not entry.exists()  # removed: the caller recomputes and rewrites it
    cache.save_training(data_fp, settings_fp, result)
    assert cache.load_training(data_fp, settings_fp).metrics == result.metrics


def test_negated_coefficients_are_a_miss(tmp_path: Path, trained) -> None:
    result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    entry = cache.save_training(data_fp, settings_fp, result)
    _negate_alpha(entry / "model.npz")
    assert cache.load_training(data_fp, settings_fp) is None


def test_a_planted_baseline_file_is_a_miss(tmp_path: Path, trained) -> None:
    result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    entry = cache.save_training(data_fp, settings_fp, result)
    shutil.copy(entry / "model.npz", entry / "baseline.npz")
    assert cache.load_training(data_fp, settings_fp) is None


def test_an_edited_explanation_is_a_miss(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    entry = cache.save_explanation("k", _explanation())
    meta = json.loads((entry / "meta.json").read_text())
    meta["player_names"] = ["power", "speed"]  # the values now name the wrong players
    (entry / "meta.json").write_text(json.dumps(meta))
    assert cache.load_explanation("k") is None


def test_an_entry_written_before_checksums_is_sealed_then_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    cache = DiskCache(tmp_path)
    for key in ("signed", "plain"):
        entry = cache.save_explanation(key, _explanation())
        (entry / MANIFEST).unlink()  # as written before entries had checksums
    monkeypatch.setenv(CACHE_SECRET_ENV, "a secret")
    with caplog.at_level(logging.WARNING, logger="prefshap_core.cache"):
        assert cache.load_explanation("signed") is None  # with a secret: unsigned, a miss
    assert "no checksum" in caplog.text
    monkeypatch.delenv(CACHE_SECRET_ENV)
    assert cache.load_explanation("plain") is not None  # without: adopted as it is
    assert (entry / MANIFEST).is_file()
    meta = json.loads((entry / "meta.json").read_text())
    meta["player_names"] = ["power", "speed"]  # from now on an edit is found
    (entry / "meta.json").write_text(json.dumps(meta))
    assert cache.load_explanation("plain") is None


def test_an_entry_of_another_engine_version_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = DiskCache(tmp_path)
    monkeypatch.setattr(cache_integrity, "ENGINE_VERSION", "0")
    cache.save_explanation("k", _explanation())
    monkeypatch.undo()
    assert cache.load_explanation("k") is None


def test_with_a_secret_only_validly_signed_entries_are_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trained
) -> None:
    result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    cache.save_training(data_fp, settings_fp, result)  # no secret: checksummed, unsigned
    monkeypatch.setenv(CACHE_SECRET_ENV, "right secret")
    assert cache.load_training(data_fp, settings_fp) is None  # unsigned: a miss

    monkeypatch.setenv(CACHE_SECRET_ENV, "wrong secret")
    cache.save_training(data_fp, settings_fp, result)
    monkeypatch.setenv(CACHE_SECRET_ENV, "right secret")
    assert cache.load_training(data_fp, settings_fp) is None  # another secret: a miss

    entry = cache.save_training(data_fp, settings_fp, result)
    back = cache.load_training(data_fp, settings_fp)  # signed with this one: a hit
    np.testing.assert_array_equal(back.function.alpha, result.function.alpha)

    # Whoever can write the folder but lacks the secret cannot re-seal an edit.
    _negate_alpha(entry / "model.npz")
    cache_integrity.seal(entry, secret=b"a guess")
    assert cache.load_training(data_fp, settings_fp) is None
