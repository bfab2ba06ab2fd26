"""FactorCache: byte-bounded, LRU across calls, kept CPU tensors packed in blocks of their own."""

from __future__ import annotations

import torch

from prefshap_core.explain.cme.cache import (
    ARENA_BLOCK_BYTES,
    ARENA_FROM_BYTES,
    FactorCache,
    _Arena,
)


def _large(seed: int, rows: int = 200, cols: int = 300) -> torch.Tensor:
    assert rows * cols * 8 >= ARENA_FROM_BYTES
    return torch.randn(
        rows, cols, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )


def _block_of(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def test_kept_entries_are_equal_copies_packed_in_one_block() -> None:
    cache = FactorCache(10 * ARENA_BLOCK_BYTES)
    x, y, small = _large(0), _large(1), torch.arange(10.0, dtype=torch.float64)
    cache.put("x", (x, small))
    cache.put("y", (y,))
    kept_x, kept_small = cache.get("x")
    (kept_y,) = cache.get("y")
    assert torch.equal(kept_x, x) and torch.equal(kept_y, y)
    assert kept_x.data_ptr() != x.data_ptr()  # a copy: the solver's buffer can go
    x.zero_()
    assert torch.equal(kept_x, _large(0))
    assert _block_of(kept_x) == _block_of(kept_y)  # one block, outside the heap
    assert kept_small is small  # too small to be worth a copy
    assert cache.bytes == (x.numel() + y.numel() + small.numel()) * 8


def test_eviction_releases_blocks_and_never_refills_a_view_in_use() -> None:
    entry_bytes = _large(0).numel() * 8
    cache = FactorCache(2 * entry_bytes)  # room for two entries
    cache.begin_call()
    cache.put("a", (_large(0),))
    cache.put("b", (_large(1),))
    (held,) = cache.get("a")
    cache.begin_call()  # a and b now evictable
    cache.put("c", (_large(2),))
    cache.put("d", (_large(3),))
    assert cache.get("a") is None and cache.get("b") is None
    assert cache.bytes == 2 * entry_bytes and len(cache) == 2
    assert torch.equal(held, _large(0))  # its block was released, not refilled
    kept = [cache.get(k)[0] for k in "cd"]
    assert all(t.data_ptr() != held.data_ptr() for t in kept)
    cache.clear()
    assert cache.bytes == 0 and cache.get("c") is None


def test_entries_of_the_current_call_are_never_evicted() -> None:
    entry_bytes = _large(0).numel() * 8
    cache = FactorCache(entry_bytes)
    cache.begin_call()
    cache.put("a", (_large(0),))
    cache.put("b", (_large(1),))  # does not fit without evicting a: dropped
    assert cache.get("b") is None and torch.equal(cache.get("a")[0], _large(0))


def test_a_block_is_let_go_with_its_last_entry() -> None:
    x = _large(0)
    arena = _Arena(block_bytes=2 * x.numel() * 8)  # two entries a block
    first, second, third = (arena.store(_large(k)) for k in range(3))
    assert _block_of(first) == _block_of(second) != _block_of(third)
    arena.release(first)
    assert arena._live == {_block_of(first): 1, _block_of(third): 1}
    arena.release(second)
    assert arena._live == {_block_of(third): 1}
    arena.release(third)  # the block being filled: dropped, a new one comes next
    assert arena._live == {} and arena._block is None
    arena.release(torch.zeros(3))  # not one of ours: nothing happens
