"""The disk cache: round trips, keys, atomic entries, corrupt entries recomputed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from prefshap_core import cache as cache_module
from prefshap_core.cache import (
    CACHE_DIR_ENV,
    FORMAT_VERSION,
    DiskCache,
    cache_dir,
    explanation_key,
)
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.explain import CGOptions, ExplainOptions, LocalExecutor
from prefshap_core.explain.explanation import Explanation
from prefshap_core.paths import repo_root
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

SAMPLE = repo_root() / "sample_data"


@pytest.fixture(scope="module")
def trained() -> tuple[object, TrainingResult, str, str]:
    data = load_dataset(SAMPLE)
    settings = TrainSettings(kind="cgpm", n_centres=40, penalty=1e-3, baseline=True)
    result = train(data, settings)
    return data, result, data_fingerprint(data), settings_fingerprint(settings)


def _explanation(q: int = 5, with_missing_label: bool = True) -> Explanation:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(q, 3))
    labels = np.array([[f"{i}a vs {i}b", "x vs y", "1 vs 2"] for i in range(q)], dtype=object)
    if with_missing_label:
        labels[0, 1] = None
    return Explanation(
        values=values,
        base_values=np.zeros(q),
        outputs=values.sum(1),
        data=np.where(rng.random((q, 3)) < 0.3, np.nan, rng.normal(size=(q, 3))),
        player_names=("speed", "style", "power"),
        duel_ids=np.array([f"d{i}" for i in range(q)]),
        left_ids=np.array(["a", "b", "a", "c", "a"][:q]),
        right_ids=np.array(["b", "a", "c", "a", "d"][:q]),
        winners=np.array([1, -1, 1, 1, -1][:q], dtype=np.int8),
        standard_errors=None,
        left_labels=np.array(["A", "B", "A", "C", "A"][:q]),
        right_labels=np.array(["B", "A", "C", "A", "D"][:q]),
        data_labels=labels,
        meta={"method": "exact", "n": np.int64(3), "seconds": np.float64(0.5)},
    )


def test_training_round_trip(tmp_path: Path, trained) -> None:
    data, result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    assert cache.load_training(data_fp, settings_fp) is None
    assert cache.save_training(data_fp, settings_fp, result) is not None
    back = cache.load_training(data_fp, settings_fp)
    assert back is not None
    assert back.settings == result.settings
    assert back.metrics == result.metrics and back.baseline_metrics == result.baseline_metrics
    assert back.rankability == result.rankability
    assert back.rankability_items == result.rankability_items
    # The UPM baseline's function is kept too (the Rankings page's utility score).
    assert result.baseline_function is not None and back.baseline_function is not None
    assert back.baseline_function.kind == "upm"
    np.testing.assert_array_equal(back.baseline_function.alpha, result.baseline_function.alpha)
    for part in ("train", "validation", "test"):
        np.testing.assert_array_equal(getattr(back.split, part), getattr(result.split, part))
    test = result.split.test
    u = data.contexts[data.context_index[test]]
    left, right = data.items[data.left[test]], data.items[data.right[test]]
    np.testing.assert_array_equal(
        back.function.decision(left, right, u), result.function.decision(left, right, u)
    )
    # The model file inside is the documented contract (a plain .npz, no pickle).
    model_files = list(tmp_path.rglob("model.npz"))
    assert len(model_files) == 1
    with np.load(model_files[0], allow_pickle=False) as npz:
        assert str(npz["kind"]) == "cgpm"


def test_explanation_round_trip_keeps_labels_and_views(tmp_path: Path) -> None:
    expl = _explanation()
    cache = DiskCache(tmp_path)
    cache.save_explanation("k1", expl)
    back = cache.load_explanation("k1")
    assert back is not None
    np.testing.assert_array_equal(back.values, expl.values)
    np.testing.assert_array_equal(back.data, expl.data)  # NaNs included
    assert back.player_names == expl.player_names
    assert back.standard_errors is None and back.context_values is None
    assert back.data_labels.dtype == object and back.data_labels[0, 1] is None
    assert back.duel_ids.dtype.kind == "U"  # ids keep their string dtype
    assert back.meta == {"method": "exact", "n": 3, "seconds": 0.5}
    for view in ("losses_of", "wins_of", "from_point_of_view"):
        a, b = getattr(expl, view)("a"), getattr(back, view)("a")
        np.testing.assert_array_equal(a.values, b.values)
        assert a.data_labels.tolist() == b.data_labels.tolist()


@pytest.mark.parametrize("damage", ["truncate", "garbage-json", "missing-file", "old-format"])
def test_corrupt_entries_are_misses_and_get_rewritten(tmp_path: Path, damage: str) -> None:
    cache = DiskCache(tmp_path)
    entry = cache.save_explanation("k", _explanation())
    assert entry is not None
    arrays, meta = entry / "arrays.npz", entry / "meta.json"
    if damage == "truncate":
        arrays.write_bytes(arrays.read_bytes()[:40])
    elif damage == "garbage-json":
        meta.write_text("{not json")
    elif damage == "missing-file":
        arrays.unlink()
    else:
        current = f'"format_version": {FORMAT_VERSION}'
        meta.write_text(meta.read_text().replace(current, '"format_version": 0'))
    assert cache.load_explanation("k") is None
    assert not entry.exists()  # removed, so the recomputed value can be stored
    assert cache.save_explanation("k", _explanation()) is not None
    assert cache.load_explanation("k") is not None


def test_corrupt_model_entry_is_a_miss(tmp_path: Path, trained) -> None:
    _, result, data_fp, settings_fp = trained
    cache = DiskCache(tmp_path)
    entry = cache.save_training(data_fp, settings_fp, result)
    (entry / "model.npz").write_bytes(b"PK\x03\x04 not really a zip")
    assert cache.load_training(data_fp, settings_fp) is None
    assert cache.save_training(data_fp, settings_fp, result) is not None
    assert cache.load_training(data_fp, settings_fp) is not None


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    # A crashed writer's leftover is invisible: only complete, renamed entries count.
    leftover = tmp_path / "explanations" / ".k.abc.tmp"
    leftover.mkdir(parents=True)
    (leftover / "meta.json").write_text("{}")
    assert cache.load_explanation("k") is None
    cache.save_explanation("k", _explanation())
    cache.save_explanation("k", _explanation(4))  # overwrite an existing entry
    names = sorted(p.name for p in (tmp_path / "explanations").iterdir())
    assert names == [".k.abc.tmp", "k"]
    assert cache.load_explanation("k").n_duels == 4


def test_unwritable_cache_does_not_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    cache = DiskCache(blocker)
    assert cache.save_explanation("k", _explanation()) is None
    assert cache.load_explanation("k") is None


def test_keys_stay_inside_the_root(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "root")
    entry = cache.save_explanation("../../escape", _explanation())
    assert entry is not None and (tmp_path / "root") in entry.parents


def test_explanation_key_depends_on_everything_that_matters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    duels = np.array([1, 2, 3])
    base = explanation_key("d", "s", duels, ExplainOptions())
    assert base == explanation_key("d", "s", np.array([1, 2, 3]), ExplainOptions())
    # Where the work runs never changes a number: executors are not in the key.
    assert base == explanation_key("d", "s", duels, ExplainOptions(executor=LocalExecutor()))
    others = {
        explanation_key("d2", "s", duels, ExplainOptions()),
        explanation_key("d", "s2", duels, ExplainOptions()),
        explanation_key("d", "s", duels, ExplainOptions(what="context")),
        explanation_key("d", "s", np.array([1, 2, 4]), ExplainOptions()),
        explanation_key("d", "s", duels, ExplainOptions(seed=1)),
        explanation_key("d", "s", duels, ExplainOptions(cme=CGOptions(tol=1e-6))),
        explanation_key("d", "s", duels, ExplainOptions(), dtype="float32"),
        explanation_key("d", "s", duels, ExplainOptions(), model="m2"),
    }
    monkeypatch.setattr(cache_module, "ENGINE_VERSION", "a later version")
    others.add(explanation_key("d", "s", duels, ExplainOptions()))
    assert base not in others and len(others) == 9


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    assert DiskCache().root == tmp_path / "c"
    monkeypatch.delenv(CACHE_DIR_ENV)
    assert cache_dir() == repo_root() / ".prefshap_cache"
