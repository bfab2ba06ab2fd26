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

Kept CPU tensors are copied into large blocks of their own (:class:`_Arena`). Left
where the solver allocated them, hundreds of 5 MB entries sit in the C heap between
the explanation's temporaries; the heap can then neither reuse nor trim around
them, every later temporary comes from fresh pages, and the first explanation of a
dashboard explainer ran 1.27x the CLI's (the Pokémon case of
``benchmarks/bench_explain_limit.py``: 1.1 s more in the per-duel gathers alone).
Blocks of 64 MB are above glibc's largest mmap threshold (32 MB), so they are
mapped on their own, outside the heap; pages never written are never resident, and a
block goes back to the system whole when its last entry does. (Populating blocks in
one call, ``MAP_POPULATE``, was measured slower on our 2-core VMs, 9.3 s against
8.3 s: first touch of new memory costs the same either way.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import torch

DEFAULT_FACTOR_CACHE_BYTES = 1 << 30  # 1 GB per explainer (the hardening budget counts it)
ARENA_BLOCK_BYTES = 64 << 20  # > glibc's DEFAULT_MMAP_THRESHOLD_MAX: always its own mapping
ARENA_FROM_BYTES = 256 << 10  # smaller entries stay where they are (too small to matter)
_ALIGN = 64


class _Arena:
    """Copies of kept CPU tensors, packed into blocks that hold nothing else."""

    def __init__(self, block_bytes: int = ARENA_BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes
        self._live: dict[int, int] = {}  # block address -> entries alive in it
        self._block: torch.Tensor | None = None  # the block being filled
        self._used = 0

    def store(self, tensor: torch.Tensor) -> torch.Tensor:
        nbytes = tensor.numel() * tensor.element_size()
        if tensor.device.type != "cpu" or nbytes < ARENA_FROM_BYTES:
            return tensor
        size = -(-nbytes // _ALIGN) * _ALIGN
        if self._block is None or self._used + size > self._block.numel():
            self._block = torch.empty(max(size, self.block_bytes), dtype=torch.uint8)
            self._live[self._block.data_ptr()] = 0
            self._used = 0
        block = self._block
        kept = block[self._used : self._used + nbytes].view(tensor.dtype).view(tensor.shape)
        kept.copy_(tensor)
        self._used += size
        self._live[block.data_ptr()] += 1
        return kept

    def release(self, tensor: torch.Tensor) -> None:
        address = tensor.untyped_storage().data_ptr()
        if address not in self._live:
            return  # not one of ours (small, or on a GPU)
        self._live[address] -= 1
        if self._live[address] == 0:
            # Never refilled: a view handed out earlier may still be read. The block
            # goes back to the system when its last view does.
            del self._live[address]
            if self._block is not None and self._block.data_ptr() == address:
                self._block = None


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
        self._arena = _Arena()
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
            self._drop(old)
            self._used.pop(key, None)
        evictable = [k for k in self._entries if self._used[k] < self._call]
        free = self.max_bytes - self.bytes
        if size > free + sum(_nbytes(self._entries[k]) for k in evictable):
            return
        for k in evictable:  # oldest first (the order of last use)
            if self.bytes + size <= self.max_bytes:
                break
            self._drop(self._entries.pop(k))
            del self._used[k]
        self._entries[key] = tuple(self._arena.store(t) for t in entry)
        self._used[key] = self._call
        self.bytes += size

    def _drop(self, entry: tuple[torch.Tensor, ...]) -> None:
        self.bytes -= _nbytes(entry)
        for t in entry:
            self._arena.release(t)

    def clear(self) -> None:
        self._entries.clear()
        self._used.clear()
        self._arena = _Arena()
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
