"""THE explanation cache of this process: every explanation a page shows goes through it.

Keyed by an explicit :class:`~dashboard.services.explain_requests.ExplainRequest`
(nothing read from the session or the environment here), it has three parts:

- an in-process LRU of explanations (:class:`ExplanationStore`), so switching views
  or rerunning a page does not even read the disk;
- the disk cache (``prefshap_core.cache``) for a dataset's duels, so a reload, a
  second visitor or a restarted server reuses them. Inline duels (Head-to-head,
  what-if edits) stay in memory: each edit is another duel, cheap to explain again;
- the explainers (a few per process): each keeps its coalitions' factorizations, so
  later explanations between the same pool, what-if edits above all, are cheap.

Inline and dataset requests run the same way, on the request's executor (a Dask
cluster when the page passed one).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import streamlit as st

from dashboard.services.explain_requests import ExplainRequest
from dashboard.services.stores import disk_cache
from prefshap_core.cache import DiskCache, cache_dir
from prefshap_core.explain import Explainer
from prefshap_core.explain.explanation import Explanation
from prefshap_core.progress import Progress
from prefshap_core.workflow.explaining import explain_duels

Owner = tuple[str, str, str]  # (data fingerprint, settings fingerprint, options key)


class ExplanationStore:
    """A small thread-safe LRU of explanations shared by all sessions of this process.

    Each entry remembers its owner (which model explained what; None for inline
    duels), so one duel can be cut out of any explanation of the same model that
    already covers it. Bounded by count and by bytes, so many visitors' explanations
    cannot grow the process without end (the disk cache keeps everything).
    """

    def __init__(self, capacity: int = 48, max_bytes: int = 256 * 2**20) -> None:
        self._items: OrderedDict[str, tuple[Owner | None, Explanation, int]] = OrderedDict()
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

    def put(self, key: str, owner: Owner | None, expl: Explanation) -> None:
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


# Each explainer keeps up to ExplainOptions.factor_cache_bytes (1 GB) of factorizations.
MAX_EXPLAINERS = 4
# One-duel inline entries (what-if edits) are small: the count bound, not the bytes,
# keeps them from pushing the dataset explanations out.
STORE_CAPACITY = 128


class ExplanationCache:
    """Explanations by request: from memory, from disk, or computed (and kept)."""

    def __init__(self, disk: DiskCache, store: ExplanationStore | None = None) -> None:
        self.disk = disk
        self.store = store or ExplanationStore(capacity=STORE_CAPACITY)
        self._explainers: OrderedDict[tuple, Explainer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, req: ExplainRequest) -> Explanation | None:
        """The explanation of ``req`` if it was made before (by anyone), else None."""
        expl = self.store.get(req.key)
        if expl is None and req.inline is None:
            expl = self.disk.load_explanation(req.key)
            if expl is not None:
                self.store.put(req.key, req.owner, expl)
        return expl

    def compute(self, req: ExplainRequest, progress: Progress | None = None) -> Explanation:
        """The explanation of ``req``: cached, or computed now (in the calling thread,
        on the request's executor) and cached."""
        found = self.get(req)
        if found is not None:
            return found
        explainer = self.explainer(req)
        if req.inline is None:
            assert req.duels is not None
            fn, data = req.model.function, req.loaded.data
            expl = explain_duels(fn, data, req.duels, explainer=explainer, progress=progress)
        else:
            rows = req.inline
            expl = explainer(rows.left, rows.right, contexts=rows.contexts, progress=progress)
        expl = replace(expl, meta={**expl.meta, "dataset": req.loaded.title})
        if req.inline is None:
            self.disk.save_explanation(req.key, expl)
        self.store.put(req.key, req.owner, expl)
        return expl

    def find_duel(self, req: ExplainRequest) -> Explanation | None:
        """A one-duel request answered from an explanation already made of the same
        model and options that covers it (e.g. a player's losses), or None."""
        if req.owner is None or req.duels is None or len(req.duels) != 1:
            return None
        duel_id = str(req.loaded.data.duel_ids[int(req.duels[0])])
        return self.store.find_duel(req.owner, duel_id)

    def forget(self, req: ExplainRequest) -> None:
        """Drop ``req``'s explanation from memory and disk (e.g. a damaged entry)."""
        self.store.forget(req.key)
        if req.inline is None:
            self.disk.forget_explanation(req.key)

    def explainer(self, req: ExplainRequest) -> Explainer:
        """The explainer of ``req``'s model and options (and executor), kept for later
        requests: it keeps each coalition's factorization, so explanations between
        the same pool (what-if edits, interaction values) are cheap."""
        options = req.options
        where = None if options.executor is None else repr(options.executor)
        key = (req.model.data_fp, req.model.settings_fp, options.key(), where)
        with self._lock:
            explainer = self._explainers.get(key)
            if explainer is None:
                explainer = Explainer(req.model.function, options)
                self._explainers[key] = explainer
                while len(self._explainers) > MAX_EXPLAINERS:
                    self._explainers.popitem(last=False)
            self._explainers.move_to_end(key)
            return explainer


@st.cache_resource(show_spinner=False)
def _explanation_cache(root: str) -> ExplanationCache:
    return ExplanationCache(disk_cache())


def explanation_cache() -> ExplanationCache:
    """The process's cache over the disk cache at ``$PREFSHAP_CACHE_DIR`` (read at every
    call: tests change it), shared by every session."""
    return _explanation_cache(str(cache_dir()))
