"""Shared fixtures.

``data_dir``: the real-data directory (``$PREFSHAP_DATA_DIR``, default
``../shared/data``). Where it is absent the test is skipped, saying why, except on
CI (``CI=true``), where the real data must be there and its absence fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so the tests run with the product's settings.
import prefshap_core  # noqa: F401

# isort: split
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
