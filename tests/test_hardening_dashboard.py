"""Hardening (issue 14): dashboard services that every visitor depends on (no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard import services
from prefshap_core.progress import Progress


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PREFSHAP_CACHE_DIR", str(tmp_path))
    return str(tmp_path)


def test_demo_preparation_times_out_discards_and_recomputes(
    cache_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stages: list[str] = []
    monkeypatch.setattr(services, "DEMO_TIMEOUT_S", 0.0)  # every first attempt is too slow
    loaded, model = services._demo(cache_root, Progress(lambda u: stages.append(u.stage)))
    assert model.result.function.n_centres > 0
    assert loaded.fingerprint == model.data_fp
    # The recomputed explanation is in the cache for the next visitor.
    req = services.request(loaded, model, model.result.split.test)
    assert services.disk_cache().load_explanation(req.key) is not None
