"""The disk cache of models and explanations, one per cache folder and process.

Keyed by data and settings fingerprints (``prefshap_core.cache``), so a reload, a
second visitor or a restarted server reuses models and explanations. Explanations
reach it through :mod:`dashboard.services.explanation_cache`, which keeps an
in-process store in front of it.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from prefshap_core.cache import DiskCache, cache_dir


@st.cache_resource(show_spinner=False)
def _disk_cache(root: str) -> DiskCache:
    return DiskCache(Path(root))


def disk_cache() -> DiskCache:
    """The disk cache at ``$PREFSHAP_CACHE_DIR`` (read at every call: tests change it)."""
    return _disk_cache(str(cache_dir()))
