"""Pair kernels on duels (GPM, UPM, C-GPM) as gathers from item and context Grams.

    gpm:  k_E((a,b),(c,d)) + w k_UPM((a,b),(c,d))
    upm:  k_UPM((a,b),(c,d)) = k(a,c) + k(b,d) - k(a,d) - k(b,c)
    cgpm: k_U(u,u') * [k_E((a,b),(c,d)) + w k_UPM((a,b),(c,d))]

with ``k_E((a,b),(c,d)) = k(a,c) k(b,d) - k(a,d) k(b,c)`` and the *utility weight*
``w >= 0`` (0: the plain GPM / C-GPM). The RKHS of the sum contains both the GPM's
and the utility model's, so a GPM with a well-chosen ``w`` never loses to the UPM.

Items (and contexts) repeat across thousands of duels, so the RBF is evaluated once
between the *unique* items of the rows and the unique items of the columns, and every
duel entry is gathered from that Gram. A GPM row is ``A[l] * B[r] - B[l] * A[r]``
(``A = k(., c_l)``, ``B = k(., c_r)``), computed as two products and one subtraction so
that swapping a duel's sides negates its row exactly (no fused multiply-add). A UPM
row is ``D[l] - D[r]`` with ``D = A - B``: its operator never materialises K_nM. The
sum kernel adds ``w (D[l] - D[r])`` to the GPM row, again exactly negated by a swap.
:meth:`PairKernel.parts` splits a sum kernel into its two terms, so a search over
``w`` builds each term's K_nM once and combines them (:class:`SumOperator`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.kernels.bilinear import BilinearOperator, bilinear_pays
from prefshap_core.kernels.operator import (
    DEFAULT_CACHE_BUDGET_BYTES,
    BlockedKernelOperator,
    BlockFunction,
    DifferenceOperator,
    KernelOperator,
    SumOperator,
)
from prefshap_core.kernels.rbf import rbf_gram

PAIR_KINDS = ("gpm", "upm", "cgpm")
IndexLike = torch.Tensor | np.ndarray | list[int]


def as_index(x: IndexLike, device: str | torch.device) -> torch.Tensor:
    """An int64 index tensor on ``device`` (from a tensor on any device, or array-like)."""
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=torch.int64)
    return torch.as_tensor(np.asarray(x, dtype=np.int64)).to(device)


@dataclass(frozen=True, eq=False)
class DuelIndex:
    """Duels as int64 rows: ``left``/``right`` into the items, ``context`` into the contexts."""

    left: torch.Tensor
    right: torch.Tensor
    context: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.left.shape != self.right.shape or self.left.ndim != 1:
            raise ValueError("left and right must be 1-D and of equal length")
        if self.context is not None and self.context.shape != self.left.shape:
            raise ValueError("context must have one entry per duel")

    @classmethod
    def from_arrays(
        cls,
        left: IndexLike,
        right: IndexLike,
        context: IndexLike | None = None,
        device: str | torch.device = "cpu",
    ) -> DuelIndex:
        ctx = None if context is None else as_index(context, device)
        return cls(as_index(left, device), as_index(right, device), ctx)

    def __len__(self) -> int:
        return len(self.left)

    def subset(self, positions: IndexLike) -> DuelIndex:
        pos = as_index(positions, self.left.device)
        ctx = None if self.context is None else self.context[pos]
        return DuelIndex(self.left[pos], self.right[pos], ctx)

    def swapped(self) -> DuelIndex:
        return DuelIndex(self.right, self.left, self.context)

    def to(self, device: str | torch.device) -> DuelIndex:
        ctx = None if self.context is None else self.context.to(device)
        return DuelIndex(self.left.to(device), self.right.to(device), ctx)


@dataclass(frozen=True)
class _Factors:
    """Gathered Grams between the rows' unique items and the columns' centres."""

    a: torch.Tensor  # (row items, M) k(item, c_l)
    b: torch.Tensor  # (row items, M) k(item, c_r)
    d: torch.Tensor | None  # a - b, when the kernel has a utility term
    left: torch.Tensor  # (n,) row of `a`/`b` for each duel's left item
    right: torch.Tensor
    context_gram: torch.Tensor | None  # (row contexts, M) k_U(u, c_u)
    context: torch.Tensor | None  # (n,) row of `context_gram`


class PairKernel:
    """A pair kernel over fixed item (and context) pools; rows are :class:`DuelIndex`."""

    def __init__(
        self,
        kind: str,
        items: np.ndarray | torch.Tensor,
        lengthscales: np.ndarray | torch.Tensor,
        contexts: np.ndarray | torch.Tensor | None = None,
        context_lengthscales: np.ndarray | torch.Tensor | None = None,
        compute: Compute | None = None,
        utility_weight: float = 0.0,
    ) -> None:
        if kind not in PAIR_KINDS:
            raise ValueError(f"kind must be one of {PAIR_KINDS}, got {kind!r}")
        utility_weight = float(utility_weight)
        if not (np.isfinite(utility_weight) and utility_weight >= 0):
            raise ValueError(f"utility_weight must be a finite number >= 0, got {utility_weight}")
        if kind == "upm" and utility_weight != 0:
            raise ValueError("a upm kernel has no utility weight (it is all utility)")
        self.kind = kind
        self.utility_weight = utility_weight
        # Weights of the two brackets: k_E (0 or 1) and k_UPM.
        self._terms = (0.0, 1.0) if kind == "upm" else (1.0, utility_weight)
        self.compute = compute or Compute()
        self.items = self.compute.tensor(items)
        self.lengthscales = self.compute.tensor(lengthscales)
        if self.items.ndim != 2 or self.lengthscales.shape != (self.items.shape[1],):
            raise ValueError("items must be (n, d) and lengthscales (d,)")
        if not bool((self.lengthscales > 0).all()):
            raise ValueError("lengthscales must be positive")
        self.contexts = self.context_lengthscales = None
        if kind == "cgpm":
            if contexts is None or context_lengthscales is None:
                raise ValueError("a cgpm kernel needs contexts and context_lengthscales")
            self.contexts = self.compute.tensor(contexts)
            self.context_lengthscales = self.compute.tensor(context_lengthscales)
            if self.context_lengthscales.shape != (self.contexts.shape[1],):
                raise ValueError("contexts must be (p, d') and context_lengthscales (d',)")
            if not bool((self.context_lengthscales > 0).all()):
                raise ValueError("context_lengthscales must be positive")

    # -- building blocks -----------------------------------------------------------
    def _check(self, duels: DuelIndex, what: str) -> None:
        n_items = self.items.shape[0]
        for side in (duels.left, duels.right):
            if len(side) and (int(side.min()) < 0 or int(side.max()) >= n_items):
                raise IndexError(f"{what}: item rows must lie in [0, {n_items})")
        if self.kind == "cgpm":
            assert self.contexts is not None
            if duels.context is None:
                raise ValueError(f"{what}: a cgpm kernel needs a context row per duel")
            p = self.contexts.shape[0]
            if len(duels) and (int(duels.context.min()) < 0 or int(duels.context.max()) >= p):
                raise IndexError(f"{what}: context rows must lie in [0, {p})")

    def _factors(self, rows: DuelIndex, cols: DuelIndex) -> _Factors:
        self._check(rows, "rows")
        self._check(cols, "columns")
        device = self.compute.torch_device
        rows, cols = rows.to(device), cols.to(device)
        n, m = len(rows), len(cols)
        row_items, row_pos = torch.unique(torch.cat([rows.left, rows.right]), return_inverse=True)
        col_items, col_pos = torch.unique(torch.cat([cols.left, cols.right]), return_inverse=True)
        gram = rbf_gram(self.items[row_items], self.items[col_items], self.lengthscales)
        context_gram = context = None
        if self.kind == "cgpm":
            assert self.contexts is not None and self.context_lengthscales is not None
            assert rows.context is not None and cols.context is not None
            row_ctx, context = torch.unique(rows.context, return_inverse=True)
            col_ctx, col_ctx_pos = torch.unique(cols.context, return_inverse=True)
            context_gram = rbf_gram(
                self.contexts[row_ctx], self.contexts[col_ctx], self.context_lengthscales
            )[:, col_ctx_pos]
        a, b = gram[:, col_pos[:m]], gram[:, col_pos[m:]]
        return _Factors(
            a=a,
            b=b,
            d=a - b if self._terms[1] != 0 else None,
            left=row_pos[:n],
            right=row_pos[n:],
            context_gram=context_gram,
            context=context,
        )

    def _gather(
        self,
        f: _Factors,
        left: torch.Tensor,
        right: torch.Tensor,
        ctx: torch.Tensor | None,
        out: torch.Tensor | None = None,
        scratch: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Rows of K into ``out``, through two scratch blocks of at least its size.

        Every step is an ``index_select(out=...)`` or an in-place product: a fresh
        multi-megabyte temporary per block cost page faults that made a C-GPM build
        10-50x slower on the 2-core VM, depending on what the allocator returned to
        the OS. Products and the subtraction stay separate (no fused multiply-add),
        so swapping a duel's sides negates its row exactly.
        """
        rows, width = len(left), f.a.shape[1]
        if out is None:
            out = torch.empty((rows, width), dtype=f.a.dtype, device=f.a.device)
        s1, s2 = (
            (torch.empty_like(out), torch.empty_like(out))
            if scratch is None
            else (scratch[0][:rows], scratch[1][:rows])
        )
        gpm_weight, utility_weight = self._terms
        if gpm_weight == 0:  # the utility bracket alone: d_l - d_r
            assert f.d is not None
            torch.index_select(f.d, 0, left, out=out)
            out.sub_(torch.index_select(f.d, 0, right, out=s1))
            if utility_weight != 1:
                out.mul_(utility_weight)
        else:
            torch.index_select(f.a, 0, left, out=out)
            out.mul_(torch.index_select(f.b, 0, right, out=s1))  # a_l * b_r
            torch.index_select(f.b, 0, left, out=s1)
            out.sub_(s1.mul_(torch.index_select(f.a, 0, right, out=s2)))  # - b_l * a_r
            if utility_weight != 0:  # + w (d_l - d_r); skipped at 0: the GPM bitwise
                assert f.d is not None
                torch.index_select(f.d, 0, left, out=s1)
                s1.sub_(torch.index_select(f.d, 0, right, out=s2))
                out.add_(s1.mul_(utility_weight))
        if self.kind == "cgpm":
            assert f.context_gram is not None and ctx is not None
            out.mul_(torch.index_select(f.context_gram, 0, ctx, out=s1))
        return out

    def _block_fn(self, f: _Factors) -> BlockFunction:
        scratch: list[torch.Tensor] = []  # two blocks, allocated once, grown if needed

        def block(lo: int, hi: int, out: torch.Tensor | None = None) -> torch.Tensor:
            if not scratch or scratch[0].shape[0] < hi - lo:
                shape = (hi - lo, f.a.shape[1])
                scratch[:] = [f.a.new_empty(shape), f.a.new_empty(shape)]
            ctx = None if f.context is None else f.context[lo:hi]
            pair = (scratch[0], scratch[1])
            return self._gather(f, f.left[lo:hi], f.right[lo:hi], ctx, out, pair)

        return block

    # -- public --------------------------------------------------------------------
    def parts(self) -> tuple[PairKernel, PairKernel]:
        """The two terms of the kernel as kernels of their own: ``(w = 0, utility only)``.

        ``K = K_first + w K_second`` entry by entry (up to rounding); a search over
        ``w`` builds each part's K_nM once and sums them in a
        :class:`~prefshap_core.kernels.operator.SumOperator` per ``w``.
        """
        if self.kind == "upm":
            raise ValueError("a upm kernel has a single term")
        first = self._with_terms(1.0, 0.0)
        second = self._with_terms(0.0, 1.0)
        return first, second

    def with_utility_weight(self, utility_weight: float) -> PairKernel:
        """The same kernel with another utility weight (gpm, cgpm)."""
        if self.kind == "upm":
            raise ValueError("a upm kernel has no utility weight (it is all utility)")
        if not (np.isfinite(utility_weight) and utility_weight >= 0):
            raise ValueError(f"utility_weight must be a finite number >= 0, got {utility_weight}")
        return self._with_terms(1.0, float(utility_weight))

    def _with_terms(self, gpm_weight: float, utility_weight: float) -> PairKernel:
        clone = object.__new__(PairKernel)
        clone.__dict__.update(self.__dict__)
        clone.utility_weight = utility_weight if gpm_weight else 0.0
        clone._terms = (gpm_weight, utility_weight)
        return clone

    def matrix(
        self, rows: DuelIndex, cols: DuelIndex, *, block_rows: int | None = None
    ) -> torch.Tensor:
        """The dense block ``K(rows, cols)``, shape (len(rows), len(cols)).

        ``block_rows``: gather that many rows at a time (the same numbers: every entry
        is an elementwise product), so the scratch is two blocks, not two matrices.
        """
        f = self._factors(rows, cols)
        if block_rows is None:
            return self._gather(f, f.left, f.right, f.context)
        out = torch.empty((len(f.left), f.a.shape[1]), dtype=f.a.dtype, device=f.a.device)
        block = self._block_fn(f)
        for lo in range(0, len(f.left), max(1, block_rows)):
            hi = min(lo + max(1, block_rows), len(f.left))
            block(lo, hi, out[lo:hi])
        return out

    def row_blocks(
        self, rows: DuelIndex, cols: DuelIndex, block_rows: int
    ) -> Iterator[tuple[int, int, torch.Tensor]]:
        """``(lo, hi, K(rows[lo:hi], cols))`` block by block, all in one buffer.

        Each block overwrites the last (use or copy it before asking for the next) and
        the caller may overwrite it in place: a pass over a large ``K`` (the posterior's
        data term) then touches one block's memory, not the whole matrix's.
        """
        f = self._factors(rows, cols)
        block = self._block_fn(f)
        step = max(1, int(block_rows))
        out = f.a.new_empty((min(step, len(f.left)), f.a.shape[1]))
        for lo in range(0, len(f.left), step):
            hi = min(lo + step, len(f.left))
            yield lo, hi, block(lo, hi, out[: hi - lo])

    def centre_gram(self, centres: DuelIndex) -> torch.Tensor:
        """``K_MM``, symmetrised (the item Gram's GEMM form is symmetric only to rounding)."""
        k_mm = self.matrix(centres, centres)
        return 0.5 * (k_mm + k_mm.T)

    def operator(
        self,
        rows: DuelIndex,
        centres: DuelIndex | IndexLike,
        *,
        cache_budget_bytes: int = DEFAULT_CACHE_BUDGET_BYTES,
        cache_dtype: str | torch.dtype | None = None,
        block_rows: int | None = None,
    ) -> KernelOperator:
        """``K_nM`` between ``rows`` and the centres, as a blocked operator.

        ``centres`` is either positions into ``rows`` (Nyström centres drawn from the
        training duels; the logistic preconditioner then reads their labels) or a
        :class:`DuelIndex` of its own. ``cache_dtype`` may be "float32" to halve the
        memory traffic of a float64 solve. UPM ignores the cache options: its
        products never need K_nM.
        """
        device = self.compute.torch_device
        rows = rows.to(device)
        positions = None
        if isinstance(centres, DuelIndex):
            centre_index = centres.to(device)
        else:
            positions = as_index(centres, device)
            if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= len(rows)):
                raise IndexError(f"centre positions must lie in [0, {len(rows)})")
            centre_index = rows.subset(positions)
        f = self._factors(rows, centre_index)

        def centre_gram() -> torch.Tensor:
            if positions is None:
                return self.centre_gram(centre_index)
            # The same factors as K_nM, so K_MM equals K_nM's centre rows exactly.
            ctx = None if f.context is None else f.context[positions]
            k_mm = self._gather(f, f.left[positions], f.right[positions], ctx)
            return 0.5 * (k_mm + k_mm.T)

        source = (self, rows, centre_index)
        if self._terms[0] == 0 and self.kind != "cgpm":  # UPM, or a GPM's utility part
            assert f.d is not None
            return DifferenceOperator(
                f.d if self._terms[1] == 1 else f.d * self._terms[1],
                f.left,
                f.right,
                centre_gram,
                centre_positions=positions,
                source=source,
            )
        if isinstance(cache_dtype, str):
            cache_dtype = Compute(dtype=cache_dtype).torch_dtype
        itemsize = torch.empty((), dtype=cache_dtype or self.compute.torch_dtype).element_size()
        if (
            self.kind == "gpm"
            and len(rows) * len(centre_index) * itemsize > cache_budget_bytes
            and bilinear_pays(len(rows), f.a.shape[0])
        ):
            # Too large to cache: products through item-by-item matrices instead of
            # recomputing every entry (kernels.bilinear).
            if self._terms[1] == 0:
                return BilinearOperator(
                    f.a, f.b, f.left, f.right, centre_gram,
                    centre_positions=positions, source=source,
                )  # fmt: skip

            def term_gram(term: PairKernel):
                def gram() -> torch.Tensor:
                    if positions is None:
                        return term.centre_gram(centre_index)
                    k_mm = term._gather(f, f.left[positions], f.right[positions], None)
                    return 0.5 * (k_mm + k_mm.T)

                return gram

            interaction, utility = self.parts()
            assert f.d is not None
            summed = SumOperator(
                BilinearOperator(
                    f.a, f.b, f.left, f.right, term_gram(interaction),
                    centre_positions=positions,
                ),
                DifferenceOperator(
                    f.d, f.left, f.right, term_gram(utility), centre_positions=positions
                ),
                self._terms[1],
            )  # fmt: skip
            summed.source = source  # one kernel still (the falkon backend rebuilds it)
            return summed
        block_factors = f
        if cache_dtype is not None and cache_dtype != self.compute.torch_dtype:
            # Gather straight in the cache dtype: half the memory traffic of the build.
            block_factors = _Factors(
                a=f.a.to(cache_dtype),
                b=f.b.to(cache_dtype),
                d=None if f.d is None else f.d.to(cache_dtype),
                left=f.left,
                right=f.right,
                context_gram=None if f.context_gram is None else f.context_gram.to(cache_dtype),
                context=f.context,
            )
        return BlockedKernelOperator(
            self._block_fn(block_factors),
            len(rows),
            len(centre_index),
            centre_gram,
            self.compute.torch_dtype,
            device,
            centre_positions=positions,
            cache_budget_bytes=cache_budget_bytes,
            cache_dtype=cache_dtype,
            block_rows=block_rows,
            source=source,
        )
