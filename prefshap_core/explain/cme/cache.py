"""A byte-bounded LRU store of per-coalition factorizations (one per game of an Explainer).

Explaining new duels between the same pool needs the same coalition systems again;
their factorizations (a Cholesky factor and the centres' side of the embedding) do
not depend on the queries, so keeping them turns a second explanation into solves
for the new query items only. Entries are tuples of tensors; their bytes are
counted exactly and the least recently used go first once ``max_bytes`` is reached
(an entry larger than the whole budget is not kept).
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
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> tuple[torch.Tensor, ...] | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: Hashable, entry: tuple[torch.Tensor, ...]) -> None:
        size = _nbytes(entry)
        if size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= _nbytes(old)
        while self._entries and self.bytes + size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= _nbytes(evicted)
        self._entries[key] = entry
        self.bytes += size

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def report(self) -> dict[str, int]:
        return {
            "entries": len(self._entries),
            "bytes": self.bytes,
            "hits": self.hits,
            "misses": self.misses,
        }
