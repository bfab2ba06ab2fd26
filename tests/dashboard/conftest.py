"""Fixtures of the dashboard tests (AppTest helpers: tests/dashboard/apptest.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def dashboard_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary disk cache for the app, the same folder for the whole run.

    Shared by every dashboard test of one run, so the first-screen demo is trained
    once per run; never the user's own cache.
    """
    folder = tmp_path_factory.getbasetemp() / "dashboard-cache"
    folder.mkdir(exist_ok=True)
    before = os.environ.get("PREFSHAP_CACHE_DIR")
    os.environ["PREFSHAP_CACHE_DIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("PREFSHAP_CACHE_DIR", None)
    else:
        os.environ["PREFSHAP_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A disk cache holding only the demo (its model and first-screen explanation),
    built once per run by one AppTest session."""
    from tests.dashboard.apptest import assert_clean, new_app, settle

    folder = tmp_path_factory.mktemp("demo-cache")
    with pytest.MonkeyPatch.context() as env:  # restores the run's cache folder after
        env.setenv("PREFSHAP_CACHE_DIR", str(folder))
        assert_clean(settle(new_app()))
    return folder


@pytest.fixture
def warm_cache(demo_cache: Path, tmp_path: Path) -> Path:
    """A fresh cache folder for one browser test's server, with the demo already in it:
    the server's first screen reads it instead of training it again (the cold start
    is tests/dashboard/test_browser_e2e.py's first test)."""
    folder = tmp_path / "cache"
    shutil.copytree(demo_cache, folder)
    return folder
