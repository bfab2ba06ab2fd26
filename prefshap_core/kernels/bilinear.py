"""The GPM's K_nM through item-by-item matrices: products cost ``items^2 * M``, not ``n * M``.

A GPM row is ``K[i, j] = a[l_i, j] b[r_i, j] - b[l_i, j] a[r_i, j]`` with ``a = k(., c_l)``
and ``b = k(., c_r)`` over the rows' unique items (``kernels.pair``). Summed against a
vector, the duel index enters only through the item pair ``(l_i, r_i)``:

    (K v)_i   = P[l_i, r_i] - P[r_i, l_i],       P = (a * v) @ b^T        (items x items)
    (K^T w)_j = sum_p a[p, j] (V @ b)[p, j],     V[p, q] = sum_{i: (l_i, r_i) = (p, q)} w_i
                                                        - sum_{i: (l_i, r_i) = (q, p)} w_i

So a product is one GEMM of ``items x items x M`` plus an O(n) gather or scatter,
instead of recomputing every one of the ``n x M`` entries (four gathers and three
products each) when K_nM is too large to cache: on 1.36 M training duels over 2,000
items, ``items^2 = 4 M`` entries against ``n M = 2.7 G``. A swapped duel reads
``P[r, l] - P[l, r]``: its row is exactly the negation, as in the gathered form. The
numbers equal the gathered K_nM's products up to rounding (another summation order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from prefshap_core.kernels.operator import ItemFactorOperator, signed_incidence_sum
from prefshap_core.progress import checkpoint

# The bilinear form is used when K_nM is not cached and items^2 <= this many times the
# rows. Measured on the 2-core CPU (2,000 items, M = 2,000): one K^T W K v took 0.61 s
# (4 items^2 M flops at 53 GFLOP/s) against 6.6 s recomputing 600,000 rows by gathers
# (5.5 ns per entry): the two cost the same near items^2 = 73 n; 32 keeps a 2x margin.
BILINEAR_MAX_ITEMS_SQUARED_PER_ROW = 32.0
# ... and the items x items matrices stay small (4,096 items: 128 MiB each in float64).
BILINEAR_MAX_ITEMS = 4096


def bilinear_pays(n_rows: int, n_items: int) -> bool:
    """Whether products through item-by-item matrices beat recomputing K_nM's rows."""
    return (
        n_items <= BILINEAR_MAX_ITEMS
        and n_items * n_items <= BILINEAR_MAX_ITEMS_SQUARED_PER_ROW * n_rows
    )


class BilinearOperator(ItemFactorOperator):
    """``K_nM[i, j] = a[l_i, j] b[r_i, j] - b[l_i, j] a[r_i, j]`` used through
    item-by-item matrices (module docstring); ``a``, ``b``: (items, M)."""

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        left: torch.Tensor,
        right: torch.Tensor,
        centre_gram: Callable[[], torch.Tensor],
        *,
        centre_positions: torch.Tensor | None = None,
        source: Any = None,
    ) -> None:
        if a.shape != b.shape or a.ndim != 2:
            raise ValueError("a and b must be (items, M) of one shape")
        super().__init__(
            len(left), a.shape[1], a.dtype, a.device, centre_gram,
            centre_positions=centre_positions, source=source,
        )  # fmt: skip
        self.a, self.b = a, b
        n_items = a.shape[0]
        # Flat positions of each duel's item pair in an items x items matrix, both ways.
        self._forward = left * n_items + right
        self._backward = right * n_items + left

    def _columns(self, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        x = x.to(self.dtype)
        return (x[:, None], True) if x.ndim == 1 else (x, False)

    def mm(self, v: torch.Tensor) -> torch.Tensor:
        v2, squeeze = self._columns(v)
        out = torch.empty((self.n_rows, v2.shape[1]), dtype=self.dtype, device=self.device)
        for k in range(v2.shape[1]):
            checkpoint()  # a cancel stops between columns
            pairs = ((self.a * v2[:, k]) @ self.b.T).reshape(-1)
            out[:, k] = pairs[self._forward] - pairs[self._backward]
        return out[:, 0] if squeeze else out

    def tmm(self, w: torch.Tensor) -> torch.Tensor:
        w2, squeeze = self._columns(w)
        n_items = self.a.shape[0]
        out = torch.empty((self.n_centres, w2.shape[1]), dtype=self.dtype, device=self.device)
        for k in range(w2.shape[1]):
            checkpoint()
            # V - V^T flattened: +w at (l, r), -w at (r, l).
            pairs = signed_incidence_sum(
                w2[:, k].contiguous(), self._forward, self._backward, n_items * n_items
            ).reshape(n_items, n_items)
            out[:, k] = (self.a * (pairs @ self.b)).sum(0)
        return out[:, 0] if squeeze else out
