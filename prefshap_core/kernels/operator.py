"""K_nM as a linear operator: the only thing the solvers need from a kernel.

FALKON never forms ``K_nM^T K_nM``; every conjugate-gradient iteration is one pass
over ``K_nM`` (``gram_mv`` fuses ``K^T diag(w) K v`` so each block is read once while
it is in cache). Two implementations:

- :class:`BlockedKernelOperator`: rows come from a block function; the whole matrix is
  cached in memory when it fits a budget (products are then memory-bound GEMVs),
  otherwise every product recomputes the blocks (memory stays bounded).
- :class:`DifferenceOperator`: ``K_nM = F[left] - F[right]`` for an item-by-centre
  matrix ``F`` (the UPM kernel): products cost ``n_items * M``, not ``n * M``.
  ``kernels.bilinear.BilinearOperator`` does the same for the GPM bracket through
  items x items matrices, where K_nM is too large to cache.
- :class:`SumOperator`: ``K_1 + w K_2`` of two operators, so a search over ``w``
  (the GPM's utility weight) builds each term once.

Vectors may be ``(M,)`` or ``(M, k)``; results keep that shape convention.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from prefshap_core.progress import checkpoint

DEFAULT_CACHE_BUDGET_BYTES = 2 * 2**30
# block(start, stop, out=None) -> K[start:stop], written into ``out`` when given. Blocks
# are written into preallocated memory: a fresh multi-megabyte tensor per block costs
# page faults whenever the allocator has handed the last one back to the OS.
BlockFunction = Callable[..., torch.Tensor]
# Bytes per block of a fused product on a cached matrix: small enough that a block read
# by ``K_b @ v`` is still in cache for ``K_b^T t`` (best at 2-8 MiB on the 2-core CPU).
_FUSED_BLOCK_BYTES = 4 * 2**20
# A cached matrix up to this size is one block: it stays in the last-level cache
# between the two passes anyway, and the per-block calls cost more than they save
# (2-core EPYC, 32 MiB L3, one vector: 8,000 x 500 float32 0.77 ms whole against
# 1.10 ms in 4 MiB blocks; equal at 32 MB; blocks win from 64 MB, 4.5 against 4.8 ms).
_UNBLOCKED_MAX_BYTES = 16 * 2**20
# Bytes of one kernel block while building or recomputing K_nM: 2-8 MiB ran equally
# fast on an idle machine; the larger blocks mean fewer parallel regions, which matters
# when other processes compete for the two cores.
_BUILD_BLOCK_BYTES = 8 * 2**20


class KernelOperator(ABC):
    """``K_nM`` between ``n`` rows and ``M`` centres, used only through products."""

    n_rows: int
    n_centres: int
    dtype: torch.dtype
    device: torch.device
    # Position of each centre among the rows (when the centres are rows, as for
    # Nyström centres drawn from the training duels): the logistic preconditioner
    # reads the centres' labels and predictions there.
    centre_positions: torch.Tensor | None
    # Whatever built this operator (e.g. (PairKernel, rows, centres)); the falkon
    # backend needs it to hand the same kernel to falkon.
    source: Any = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_centres)

    @abstractmethod
    def mm(self, v: torch.Tensor) -> torch.Tensor:
        """``K_nM @ v`` for ``v`` of shape (M,) or (M, k)."""

    @abstractmethod
    def tmm(self, w: torch.Tensor) -> torch.Tensor:
        """``K_nM^T @ w`` for ``w`` of shape (n,) or (n, k)."""

    def gram_mv(self, v: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """``K_nM^T diag(weights) K_nM @ v`` (weights default 1)."""
        t = self.mm(v)
        if weights is not None:
            t = t * (weights if t.ndim == 1 else weights[:, None])
        return self.tmm(t)

    @abstractmethod
    def centre_gram(self) -> torch.Tensor:
        """``K_MM``, symmetric, (M, M)."""


def _as_matrix(v: torch.Tensor) -> tuple[torch.Tensor, bool]:
    return (v[:, None], True) if v.ndim == 1 else (v, False)


def _t_product(matrix: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``matrix^T @ w`` as ``(w^T @ matrix)^T``: MKL's transposed GEMM with a few
    columns in ``w`` ran 5-10x slower than this form (same numbers, row-major reads)."""
    if w.ndim == 1:
        return w @ matrix
    return (w.T @ matrix).T


class BlockedKernelOperator(KernelOperator):
    """``K_nM`` from a block function ``block(start, stop, out=None) -> K[start:stop]``.

    The matrix is cached (in ``cache_dtype``) when ``n * M`` entries fit
    ``cache_budget_bytes``; products then run in the cache dtype and return in the
    operator dtype (a float32 cache under float64 vectors halves the memory traffic
    of every product at ~1e-7 relative error in each product).
    """

    def __init__(
        self,
        block: BlockFunction,
        n_rows: int,
        n_centres: int,
        centre_gram: Callable[[], torch.Tensor],
        dtype: torch.dtype,
        device: torch.device,
        *,
        centre_positions: torch.Tensor | None = None,
        cache_budget_bytes: int = DEFAULT_CACHE_BUDGET_BYTES,
        cache_dtype: torch.dtype | None = None,
        block_rows: int | None = None,
        source: Any = None,
    ) -> None:
        self._block = block
        self.n_rows = n_rows
        self.n_centres = n_centres
        self._centre_gram_fn = centre_gram
        self._centre_gram: torch.Tensor | None = None
        self.dtype = dtype
        self.device = device
        self.centre_positions = centre_positions
        self.source = source
        self.cache_dtype = cache_dtype or dtype
        itemsize = torch.empty((), dtype=self.cache_dtype).element_size()
        row_bytes = max(1, n_centres * itemsize)
        self.block_rows = block_rows or max(1, _BUILD_BLOCK_BYTES // row_bytes)
        self._fused_rows = max(64, _FUSED_BLOCK_BYTES // row_bytes)
        if n_rows * row_bytes <= _UNBLOCKED_MAX_BYTES:
            self._fused_rows = max(1, n_rows)
        self.cache: torch.Tensor | None = None
        self._scratch: torch.Tensor | None = None
        self.build_seconds = 0.0
        if n_rows * n_centres * itemsize <= cache_budget_bytes:
            start = time.perf_counter()
            self.cache = torch.empty((n_rows, n_centres), dtype=self.cache_dtype, device=device)
            for lo, hi in self._blocks(self.block_rows):
                checkpoint()  # a cancel stops between blocks
                self._block(lo, hi, self.cache[lo:hi])
            self.build_seconds = time.perf_counter() - start

    @property
    def cached(self) -> bool:
        return self.cache is not None

    def _blocks(self, size: int):
        for lo in range(0, self.n_rows, size):
            yield lo, min(lo + size, self.n_rows)

    def _rows(self, lo: int, hi: int) -> torch.Tensor:
        if self.cache is not None:
            return self.cache[lo:hi]
        if self._scratch is None:  # one block buffer, reused (see BlockFunction)
            self._scratch = torch.empty(
                (self.block_rows, self.n_centres), dtype=self.cache_dtype, device=self.device
            )
        return self._block(lo, hi, self._scratch[: hi - lo])

    def mm(self, v: torch.Tensor) -> torch.Tensor:
        v2, squeeze = _as_matrix(v.to(self.cache_dtype))
        if self.cache is not None:
            out = self.cache @ v2
        else:
            out = torch.empty(
                (self.n_rows, v2.shape[1]), dtype=self.cache_dtype, device=self.device
            )
            for lo, hi in self._blocks(self.block_rows):
                checkpoint()  # a cancel stops between blocks
                out[lo:hi] = self._rows(lo, hi) @ v2
        out = out.to(self.dtype)
        return out[:, 0] if squeeze else out

    def tmm(self, w: torch.Tensor) -> torch.Tensor:
        w2, squeeze = _as_matrix(w.to(self.cache_dtype))
        if self.cache is not None:
            out = _t_product(self.cache, w2)
        else:
            out = torch.zeros(
                (self.n_centres, w2.shape[1]), dtype=self.cache_dtype, device=self.device
            )
            for lo, hi in self._blocks(self.block_rows):
                checkpoint()  # a cancel stops between blocks
                out += _t_product(self._rows(lo, hi), w2[lo:hi])
        out = out.to(self.dtype)
        return out[:, 0] if squeeze else out

    def gram_mv(self, v: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        v2, squeeze = _as_matrix(v.to(self.cache_dtype))
        w = None if weights is None else weights.to(self.cache_dtype)[:, None]
        out = torch.zeros((self.n_centres, v2.shape[1]), dtype=self.cache_dtype, device=self.device)
        size = self._fused_rows if self.cache is not None else self.block_rows
        for lo, hi in self._blocks(size):
            checkpoint()  # a cancel stops between blocks
            k_block = self._rows(lo, hi)
            t = k_block @ v2
            if w is not None:
                t *= w[lo:hi]
            out += _t_product(k_block, t)
        out = out.to(self.dtype)
        return out[:, 0] if squeeze else out

    def centre_gram(self) -> torch.Tensor:
        if self._centre_gram is None:
            self._centre_gram = self._centre_gram_fn()
        return self._centre_gram


def signed_incidence_sum(
    w: torch.Tensor,
    left: torch.Tensor,
    right: torch.Tensor,
    n_items: int,
    deterministic_segments: bool | None = None,
) -> torch.Tensor:
    """``s[a] = sum_{i: left_i = a} w_i - sum_{i: right_i = a} w_i`` (w: (n,) or (n, k)).

    ``index_add_`` is deterministic on CPU but uses atomics on CUDA, so off the CPU
    the sums go through a sort and ``segment_reduce`` (same result on every run).
    """
    signed = torch.cat([w, -w])
    index = torch.cat([left, right])
    if deterministic_segments is None:
        deterministic_segments = w.device.type != "cpu"
    if not deterministic_segments:
        out = torch.zeros((n_items, *w.shape[1:]), dtype=w.dtype, device=w.device)
        return out.index_add_(0, index, signed)
    order = torch.argsort(index, stable=True)
    lengths = torch.bincount(index, minlength=n_items)
    return torch.segment_reduce(signed[order], "sum", lengths=lengths, axis=0, unsafe=True)


class ItemFactorOperator(KernelOperator):
    """An operator whose products go through item-level factors (each duel reaches them
    through its two items) and whose ``K_MM`` comes from a callable, computed once."""

    def __init__(
        self,
        n_rows: int,
        n_centres: int,
        dtype: torch.dtype,
        device: torch.device,
        centre_gram: Callable[[], torch.Tensor],
        *,
        centre_positions: torch.Tensor | None = None,
        source: Any = None,
    ) -> None:
        self.n_rows, self.n_centres = n_rows, n_centres
        self.dtype, self.device = dtype, device
        self._centre_gram_fn = centre_gram
        self._centre_gram: torch.Tensor | None = None
        self.centre_positions = centre_positions
        self.source = source
        self.build_seconds = 0.0

    def centre_gram(self) -> torch.Tensor:
        if self._centre_gram is None:
            self._centre_gram = self._centre_gram_fn()
        return self._centre_gram


class DifferenceOperator(ItemFactorOperator):
    """``K_nM[i] = F[left_i] - F[right_i]`` for a factor ``F`` (n_items, M)."""

    def __init__(
        self,
        factor: torch.Tensor,
        left: torch.Tensor,
        right: torch.Tensor,
        centre_gram: Callable[[], torch.Tensor],
        *,
        centre_positions: torch.Tensor | None = None,
        source: Any = None,
    ) -> None:
        super().__init__(
            len(left), factor.shape[1], factor.dtype, factor.device, centre_gram,
            centre_positions=centre_positions, source=source,
        )  # fmt: skip
        self.factor = factor
        self.left = left
        self.right = right

    def mm(self, v: torch.Tensor) -> torch.Tensor:
        utility = self.factor @ v.to(self.dtype)
        return utility[self.left] - utility[self.right]

    def tmm(self, w: torch.Tensor) -> torch.Tensor:
        item_sums = signed_incidence_sum(
            w.to(self.dtype), self.left, self.right, self.factor.shape[0]
        )
        return _t_product(self.factor, item_sums)


class SumOperator(KernelOperator):
    """``first + weight * second`` for two operators over the same rows and centres.

    At ``weight == 0`` every product is ``first``'s, bitwise.
    """

    def __init__(self, first: KernelOperator, second: KernelOperator, weight: float) -> None:
        if first.shape != second.shape:
            raise ValueError(f"operators of shapes {first.shape} and {second.shape} cannot add")
        if not weight >= 0:
            raise ValueError("the weight of a sum operator must be >= 0")
        self.first, self.second, self.weight = first, second, float(weight)
        self.n_rows, self.n_centres = first.shape
        self.dtype = first.dtype
        self.device = first.device
        self.centre_positions = first.centre_positions
        self.source = None  # no single kernel to hand to another library
        self._centre_gram: torch.Tensor | None = None
        self.build_seconds = getattr(first, "build_seconds", 0.0) + getattr(
            second, "build_seconds", 0.0
        )

    def mm(self, v: torch.Tensor) -> torch.Tensor:
        out = self.first.mm(v)
        return out if self.weight == 0 else out + self.weight * self.second.mm(v)

    def tmm(self, w: torch.Tensor) -> torch.Tensor:
        out = self.first.tmm(w)
        return out if self.weight == 0 else out + self.weight * self.second.tmm(w)

    def gram_mv(self, v: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        if self.weight == 0:
            return self.first.gram_mv(v, weights)
        return super().gram_mv(v, weights)

    def centre_gram(self) -> torch.Tensor:
        if self._centre_gram is None:
            first = self.first.centre_gram()
            self._centre_gram = (
                first if self.weight == 0 else first + self.weight * self.second.centre_gram()
            )
        return self._centre_gram


def dense_operator(
    matrix: torch.Tensor,
    centre_positions: torch.Tensor | None = None,
    *,
    as_cache: bool = False,
    dtype: torch.dtype | None = None,
):
    """An operator over an explicit matrix (tests, references, summed kernel terms of the
    hyperparameter search); K_MM from the positions.

    ``as_cache``: a contiguous ``matrix`` is the operator's cache itself, instead of being
    copied into one (the same products, bitwise, without a second copy of K_nM).
    ``dtype``: of the vectors and K_MM (default the matrix's); a float32 matrix under
    float64 vectors is a float32 cache (:class:`BlockedKernelOperator`).
    """
    dtype = dtype or matrix.dtype

    def centre_gram() -> torch.Tensor:
        if centre_positions is None:
            raise ValueError("a dense operator needs centre_positions to give K_MM")
        k_mm = matrix[centre_positions].to(dtype)
        return 0.5 * (k_mm + k_mm.T)

    def block(lo: int, hi: int, out: torch.Tensor | None = None) -> torch.Tensor:
        return matrix[lo:hi] if out is None else out.copy_(matrix[lo:hi])

    adopt = as_cache and matrix.is_contiguous()
    operator = BlockedKernelOperator(
        block,
        matrix.shape[0],
        matrix.shape[1],
        centre_gram,
        dtype,
        matrix.device,
        centre_positions=centre_positions,
        cache_budget_bytes=0 if adopt else DEFAULT_CACHE_BUDGET_BYTES,
        cache_dtype=matrix.dtype,
    )
    if adopt:
        operator.cache = matrix
    return operator
