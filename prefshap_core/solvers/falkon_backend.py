"""Optional backend: the same fits through the ``falkon`` package (FalkonML/falkon).

falkon is not on PyPI, so nothing may need it: it is imported only when one of these
functions runs, and its absence gives :class:`BackendUnavailableError`. The kernel
handed to falkon is our own :class:`~prefshap_core.kernels.pair.PairKernel` (the same
gathers), with each duel encoded as a float row ``(left, right, context)`` of indices,
so both backends fit exactly the same model. Conventions follow falkon, as ours do:
squared ``(1/n)||K a - y||^2 + lam a^T K_MM a``; logistic ``(lam/2) a^T K_MM a``.

Differences to keep in mind: falkon's ``cg_tolerance`` is absolute on its residual
(ours is relative); falkon adds its jitter to K_MM in the objective too; it does not
report its CG iteration count, so ``iterations`` is the cap; no step callback.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from prefshap_core.errors import PrefShapError
from prefshap_core.kernels.operator import KernelOperator
from prefshap_core.kernels.pair import DuelIndex
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.falkon import as_targets
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.result import SolveResult, check_finite


class BackendUnavailableError(PrefShapError, ImportError):
    """The optional ``falkon`` package is not installed."""


def falkon_module() -> Any:
    try:
        import falkon
    except ImportError as err:
        raise BackendUnavailableError(
            "the 'falkon' backend needs the falkon package, which is not installed "
            "(it is not on PyPI; build it from https://github.com/FalkonML/falkon). "
            "The default torch solver needs nothing extra."
        ) from err
    return falkon


def encode_duels(
    left: torch.Tensor, right: torch.Tensor, context: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor:
    """Duels as float rows ``(left, right, context)``: falkon only passes data matrices."""
    ctx = torch.zeros_like(left) if context is None else context
    return torch.stack([left, right, ctx], dim=1).to(dtype)


def decode_duels(x: torch.Tensor, with_context: bool) -> DuelIndex:
    index = x.round().long()
    return DuelIndex(index[:, 0], index[:, 1], index[:, 2] if with_context else None)


def _falkon_kernel(falkon: Any, pair_kernel: Any, options: Any) -> Any:
    class PairKernelForFalkon(falkon.kernels.Kernel):
        def __init__(self) -> None:
            super().__init__("prefshap-pair", options)
            self.pair_kernel = pair_kernel

        def compute(self, X1, X2, out, diag, **kwargs):
            if diag:  # only falkon.hopt asks for the diagonal
                raise NotImplementedError("the pair kernel computes full blocks only")
            with_context = pair_kernel.kind == "cgpm"
            rows, cols = decode_duels(X1, with_context), decode_duels(X2, with_context)
            return out.copy_(pair_kernel.matrix(rows, cols).to(dtype=out.dtype))

        def compute_sparse(self, X1, X2, out, diag, **kwargs):
            raise NotImplementedError("duel indices are dense")

        def extra_mem(self, *args, **kwargs):
            return {"nm": 4}  # the gathered factor blocks

    return PairKernelForFalkon()


def _setup(op: KernelOperator, y, options: SolverOptions):
    falkon = falkon_module()
    if op.source is None:
        raise ValueError("the falkon backend needs an operator built by PairKernel.operator")
    pair_kernel, rows, centres = op.source
    jitter = options.jitter_for(op.dtype)
    fopt = falkon.FalkonOptions(
        keops_active="no",  # KeOps cannot run our gathers (and is ~5x slower on CPU)
        use_cpu=op.device.type == "cpu",
        cg_tolerance=options.cg_tolerance,
        pc_epsilon_32=jitter,
        pc_epsilon_64=jitter,
    )
    x = encode_duels(rows.left, rows.right, rows.context, op.dtype)
    c = encode_duels(centres.left, centres.right, centres.context, op.dtype)
    y_t = as_targets(op, y)[:, None]
    y_c = None if op.centre_positions is None else y_t[op.centre_positions]
    selector = falkon.center_selection.FixedSelector(
        centers=c, y_centers=y_c, idx_centers=op.centre_positions
    )
    return falkon, _falkon_kernel(falkon, pair_kernel, fopt), fopt, selector, x, y_t


def fit_squared(
    op: KernelOperator,
    y: np.ndarray | torch.Tensor,
    penalty: float,
    options: SolverOptions | None = None,
    progress: Progress | None = None,
    warm_start: np.ndarray | torch.Tensor | None = None,
) -> SolveResult:
    """:func:`prefshap_core.solvers.falkon.fit_squared` through ``falkon.Falkon``."""
    start = time.perf_counter()
    options = options or SolverOptions()
    if warm_start is not None:
        raise ValueError("the falkon backend takes no warm start")
    ensure_progress(progress).update("falkon: squared loss", 0.0)
    falkon, kernel, fopt, selector, x, y_t = _setup(op, y, options)
    model = falkon.Falkon(
        kernel=kernel,
        penalty=penalty,
        M=op.n_centres,
        center_selection=selector,
        maxiter=options.max_cg_iterations,
        options=fopt,
    )
    with contextlib.redirect_stdout(sys.stderr):  # falkon prints progress on stdout
        model.fit(x, y_t)
    return _result(op, model.alpha_, options.max_cg_iterations, options, start)


def fit_logistic(
    op: KernelOperator,
    y: np.ndarray | torch.Tensor,
    penalties: Sequence[float],
    options: SolverOptions | None = None,
    progress: Progress | None = None,
    callback: Any = None,
    *,
    cg_iterations: int | Sequence[int] | None = None,
    warm_start: np.ndarray | torch.Tensor | None = None,
) -> SolveResult:
    """:func:`prefshap_core.solvers.logistic.fit_logistic` through ``falkon.LogisticFalkon``."""
    from prefshap_core.solvers.logistic import penalty_schedule

    start = time.perf_counter()
    options = options or SolverOptions()
    if callback is not None or warm_start is not None:
        raise ValueError("the falkon backend has no step callback and no warm start")
    if op.centre_positions is None:
        raise ValueError("LogisticFalkon needs the centres' labels: give centres as positions")
    if bool((torch.as_tensor(np.asarray(y) if not torch.is_tensor(y) else y) == 0).any()):
        raise ValueError(
            "the falkon package's logistic loss takes no ties (y = 0): use the torch backend"
        )
    schedule = penalty_schedule(penalties, cg_iterations, options)
    ensure_progress(progress).update("falkon: logistic loss", 0.0)
    falkon, kernel, fopt, selector, x, y_t = _setup(op, y, options)
    model = falkon.LogisticFalkon(
        kernel=kernel,
        penalty_list=[p for p, _ in schedule],
        iter_list=[i for _, i in schedule],
        loss=falkon.gsc_losses.LogisticLoss(kernel),
        M=op.n_centres,
        center_selection=selector,
        options=fopt,
    )
    with contextlib.redirect_stdout(sys.stderr):  # falkon prints progress on stdout
        model.fit(x, y_t)
    return _result(op, model.alpha_, sum(i for _, i in schedule), options, start)


def _result(
    op: KernelOperator, alpha: torch.Tensor, iterations: int, options: SolverOptions, start: float
) -> SolveResult:
    alpha = alpha.reshape(-1).to(device=op.device, dtype=op.dtype)
    check_finite(alpha, "falkon's solution")
    return SolveResult(
        alpha=alpha,
        iterations=iterations,
        residuals=[],
        seconds=time.perf_counter() - start,
        converged=False,  # falkon does not say
        jitter=options.jitter_for(op.dtype) * op.n_centres,  # falkon adds eps * M
    )
