"""Shared fixtures.

``data_dir``: the real-data directory (``$PREFSHAP_DATA_DIR``, default
``../shared/data``). Where it is absent the test is skipped, saying why, except on
CI (``CI=true``), where the real data must be there and its absence fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

# OpenMP threads that spin while waiting make every small torch op many times slower
# when the cores are shared (parallel test workers, a busy CI host); must be set
# before torch loads its OpenMP runtime.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from prefshap_core.paths import DATA_DIR_ENV
from prefshap_core.paths import data_dir as configured_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = configured_data_dir()
    if path.is_dir():
        return path
    message = (
        f"real data directory {path} not found: set ${DATA_DIR_ENV} to the folder that "
        "holds chameleons/, pokemon/ and tennis/"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)
