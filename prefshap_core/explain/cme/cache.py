"""A byte-bounded store of per-coalition factorizations (one per game of an Explainer).

Explaining new duels between the same pool needs the same coalition systems again;
their centre-side solutions do not depend on the queries, so keeping them turns a
second explanation into gathers for the new query items only. Entries are tuples of
tensors; their bytes are counted exactly.

Eviction is least-recently-used *across calls* only: an entry used in the current
call (see :meth:`begin_call`) is never evicted for another of the same call. An
explanation visits every coalition once, in the same order each time, and plain
LRU would then evict each entry just before it is needed again (no hit at all once
the coalitions outgrow the budget); this keeps as many as fit, and they hit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import torch

DEFAULT_FACTOR_CACHE_BYTES = 1 << 30  # 1 GB per explainer (the hardening budget counts it)


def _nbytes(entry: tuple[torch.Tensor, ...]) -> int:
    return sum(t.numel() * t.element_size() for t in entry)


class FactorCache:
    """LRU over ``key -> tuple of tensors``, bounded by ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_FACTOR_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[Hashable, tuple[torch.Tensor, ...]] = OrderedDict()
        self._used: dict[Hashable, int] = {}  # the call that last used each entry
        self._call = 0
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def begin_call(self) -> None:
        """Entries used from now on are protected from eviction until the next call."""
        self._call += 1

    def get(self, key: Hashable) -> tuple[torch.Tensor, ...] | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self._used[key] = self._call
        self.hits += 1
        return entry

    def put(self, key: Hashable, entry: tuple[torch.Tensor, ...]) -> None:
        """Keep ``entry`` if it fits after evicting entries of earlier calls (else drop it)."""
        size = _nbytes(entry)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= _nbytes(old)
            self._used.pop(key, None)
        evictable = [k for k in self._entries if self._used[k] < self._call]
        free = self.max_bytes - self.bytes
        if size > free + sum(_nbytes(self._entries[k]) for k in evictable):
            return
        for k in evictable:  # oldest first (the order of last use)
            if self.bytes + size <= self.max_bytes:
                break
            self.bytes -= _nbytes(self._entries.pop(k))
            del self._used[k]
        self._entries[key] = entry
        self._used[key] = self._call
        self.bytes += size

    def clear(self) -> None:
        self._entries.clear()
        self._used.clear()
        self.bytes = 0

    def __getstate__(self) -> dict[str, object]:
        # Travels empty (to a cluster worker): entries are this process's memory,
        # rebuilt where they are needed; only the budget goes along.
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(int(state["max_bytes"]))  # type: ignore[misc, arg-type]

    def report(self) -> dict[str, int]:
        return {
            "entries": len(self._entries),
            "bytes": self.bytes,
            "hits": self.hits,
            "misses": self.misses,
        }
