"""Where the real datasets live.

The real data sets are never part of the repository: they are read from the
directory named by the environment variable ``PREFSHAP_DATA_DIR``, by default
``../shared/data`` next to the repository root.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "PREFSHAP_DATA_DIR"


def repo_root() -> Path:
    """The repository root: the folder holding the ``prefshap_core`` package."""
    return Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The real-data directory: ``$PREFSHAP_DATA_DIR`` if set, else ``<repo>/../shared/data``."""
    configured = os.environ.get(DATA_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return (repo_root().parent / "shared" / "data").resolve()
