"""The dashboard's caches of models and explanations, one per process.

- The disk cache (``prefshap_core.cache``, keyed by data and settings fingerprints), so
  a reload, a second visitor or a restarted server reuses models and explanations.
- A small in-process store of explanations (``st.cache_resource``), so switching
  between views does not even read the disk.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
import streamlit as st

from prefshap_core.cache import DiskCache, cache_dir
from prefshap_core.explain.explanation import Explanation


@st.cache_resource(show_spinner=False)
def _disk_cache(root: str) -> DiskCache:
    return DiskCache(Path(root))


def disk_cache() -> DiskCache:
    """The disk cache at ``$PREFSHAP_CACHE_DIR`` (read at every call: tests change it)."""
    return _disk_cache(str(cache_dir()))


Owner = tuple[str, str, str]  # (data fingerprint, settings fingerprint, options key)


class ExplanationStore:
    """A small thread-safe LRU of explanations shared by all sessions of this process.

    Each entry remembers its owner (which model explained what), so one duel can be
    cut out of any explanation of the same model that already covers it. Bounded by
    count and by bytes, so many visitors' explanations cannot grow the process
    without end (the disk cache keeps everything).
    """

    def __init__(self, capacity: int = 48, max_bytes: int = 256 * 2**20) -> None:
        self._items: OrderedDict[str, tuple[Owner, Explanation, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0

    @property
    def n_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Explanation | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            self._items.move_to_end(key)
            return entry[1]

    def put(self, key: str, owner: Owner, expl: Explanation) -> None:
        size = _explanation_bytes(expl)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._items[key] = (owner, expl, size)
            self._bytes += size
            while len(self._items) > 1 and (
                len(self._items) > self._capacity or self._bytes > self._max_bytes
            ):
                _, (_, _, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def forget(self, key: str) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]

    def find_duel(self, owner: Owner, duel_id: str) -> Explanation | None:
        """The one-duel explanation of ``duel_id`` taken from a covering entry, if any."""
        with self._lock:
            entries = [expl for who, expl, _ in reversed(self._items.values()) if who == owner]
        for expl in entries:
            rows = np.flatnonzero(expl.duel_ids == duel_id)
            if len(rows):
                return expl.subset(rows[:1])
        return None


def _explanation_bytes(expl: Explanation) -> int:
    total = 0
    for value in vars(expl).values():
        if isinstance(value, np.ndarray):
            total += value.nbytes if value.dtype != object else 64 * value.size
    return total


@st.cache_resource(show_spinner=False)
def explanation_store() -> ExplanationStore:
    return ExplanationStore()
