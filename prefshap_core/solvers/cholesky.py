"""A Cholesky factorization that a cancel can stop: blocked, with checkpoints, when large.

One LAPACK call on an M x M matrix cannot be interrupted: at M = 8,000 it is ~1.7e11
flops, a minute on a loaded core. Above :data:`BLOCKED_FROM` rows the factorization
runs right-looking by column blocks (factor the diagonal block, solve the panel
below it, update the trailing matrix by row chunks), with a cancel checkpoint
between every step of at most ~:data:`STEP_FLOPS` flops. Below it, the one LAPACK
call as before: the same numbers bit for bit. The blocked result agrees with LAPACK's
to rounding (both are backward stable), not bit for bit.
"""

from __future__ import annotations

import torch

from prefshap_core.progress import checkpoint

# From this size a single factorization takes 1-5 s on a loaded 2-core CPU (2.1e10
# flops); larger ones are blocked. Smaller ones stay one LAPACK call: blocking costs
# 1.4-2x its time (measured at M = 3,000-5,000 with 1,024-column blocks).
BLOCKED_FROM = 4096
BLOCK = 1024
STEP_FLOPS = 2e9  # between two checkpoints: ~0.5 s at a loaded core's 4 GFLOP/s


def cholesky_ex(matrix: torch.Tensor, *, blocked_from: int = BLOCKED_FROM) -> tuple[
    torch.Tensor, int
]:  # fmt: skip
    """Lower ``L`` with ``L L^T = matrix`` (its lower triangle) and LAPACK's ``info``: 0 on
    success, else the 1-based order of the leading minor that is not positive definite.

    Raises ``CancelledError`` at a checkpoint when the running job is cancelled.
    """
    m = matrix.shape[0]
    if m < blocked_from:
        factor, info = torch.linalg.cholesky_ex(matrix)
        return factor, int(info)
    return _blocked(matrix, min(BLOCK, max(1, m // 4)))


def _blocked(matrix: torch.Tensor, block: int) -> tuple[torch.Tensor, int]:
    m = matrix.shape[0]
    work = torch.tril(matrix)  # updated in place; only its lower triangle is read
    for lo in range(0, m, block):
        checkpoint()
        hi = min(lo + block, m)
        diag, info = torch.linalg.cholesky_ex(work[lo:hi, lo:hi])
        if int(info) != 0:
            return work, lo + int(info)
        work[lo:hi, lo:hi] = diag
        if hi == m:
            break
        # The panel below, by row chunks: L21 = A21 L11^-T.
        width = hi - lo
        rows = int(max(64, STEP_FLOPS / (width * width)))
        for r0 in range(hi, m, rows):
            checkpoint()
            r1 = min(r0 + rows, m)
            work[r0:r1, lo:hi] = torch.linalg.solve_triangular(
                diag, work[r0:r1, lo:hi].T, upper=False
            ).T
        panel = work[hi:, lo:hi]
        # The trailing matrix's lower triangle, by row chunks: A22 -= L21 L21^T.
        rows = int(max(64, STEP_FLOPS / (2.0 * (m - hi) * width)))
        for r0 in range(hi, m, rows):
            checkpoint()
            r1 = min(r0 + rows, m)
            work[r0:r1, hi:r1] -= panel[r0 - hi : r1 - hi] @ panel[: r1 - hi].T
    return torch.tril(work), 0
