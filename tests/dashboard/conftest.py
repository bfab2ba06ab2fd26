"""Fixtures of the dashboard tests (AppTest helpers: tests/dashboard/apptest.py)."""

from __future__ import annotations

import os
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
