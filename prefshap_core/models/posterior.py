"""The Laplace posterior of a logistic model's coefficients (docs/method.md, "Uncertainty").

The solver minimises ``J(a) = (1/n) sum_i l_i(a) + (lam / 2) a^T (K_MM + j I) a``
(:mod:`solvers.logistic`). Read as a negative log posterior it is ``n J``: the sum of
the duels' log losses plus a Gaussian prior ``N(0, (n lam (K_MM + j I))^-1)``. The
Laplace approximation at the fitted ``alpha`` is Gaussian with covariance

    Sigma = (K_nM^T W K_nM + n lam (K_MM + j I))^-1,   W = diag(p_i (1 - p_i)),

``p_i = sigmoid(f_i)``, ``f = K_nM alpha`` (a tie is two half duels, its curvature the
same ``p (1 - p)``), ``j`` the solver's absolute jitter.

Computed stably: with ``L L^T = K_MM + j I`` (the solver's own jittered Cholesky) and
``alpha = L^-T beta``, ``H_beta = Z^T Z + n lam I``, ``Z = W^1/2 K_nM L^-T`` (the
whitened training rows), has eigenvalues ``>= n lam``; its Cholesky ``R R^T`` gives
``F = L^-T R^-T`` with ``F F^T = Sigma`` exactly. (Sigma itself has eigenvalues
~1 / (n lam j) along the directions K_MM cannot see; inverting or eigendecomposing it
directly would drown the small ones that predictions use in rounding.) Whitening the
rows, not the summed ``K_nM^T W K_nM`` from both sides, matters: the two-sided form
loses ~cond(K_MM) eps ||K_nM^T W K_nM|| (0.04 on a 10,000-duel set, against n lam =
8e-4, so its Cholesky failed), while a Gram of whitened rows is positive semi-definite
to ~eps ||H_beta||. Columns are kept in order of their share of
trace(Sigma) until both 99.9 % of trace(Sigma) and 99.9 % of the summed variance of g
over (a seeded sample of 512 of) the centre duels are kept (the first is the file
contract, the second guards the predictions); dropped columns only remove a positive
semi-definite part.

:func:`with_training_posterior` computes it after the final fit and calibrates it
(:mod:`models.posterior_calibration`: the penalty's bias, the held-out dispersion).

Above ``POSTERIOR_MAX_DUELS`` training duels the data term (but a UPM's over its items,
which costs about the same for any number of duels) uses a seeded sample
``S`` of that many, drawn with probability proportional to the curvature ``w_i`` and
reweighted by the inverse probability (an unbiased estimate of ``K_nM^T W K_nM``,
:func:`data_term.sampled_rows`): its cost is ``~2 |S| M^2`` (a triangular solve and half
a Gram), which keeps the posterior within 15 % of the training time. Exact savings: the
duels that are centres are whitened from ``L^-1`` without a solve
(:func:`data_term.add_centre_rows`), the factor reuses that ``L^-1``
(:func:`_full_factor`), and a fit's own ``K_nM``, ``K_MM``, ``L`` and validation rows
(:class:`TrainingSystem`) are used where it kept them. :mod:`models.data_term` holds
the data term's row sources.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.kernels.operator import BlockedKernelOperator, DifferenceOperator
from prefshap_core.models import data_term
from prefshap_core.models.posterior_calibration import widen_by_penalty_bias
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.solvers.gram import add_lower_gram
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.preconditioner import jittered_cholesky
from prefshap_core.solvers.result import SolveResult
from prefshap_core.solvers.triangular import lower_inverse, solve_lower_by_lower, times_upper

# Training duels used for the data term at most (see the module docstring): 6,000 x
# M = 2,000 is ~5e10 flops. Fewer inflate Sigma (an unbiased estimate of its inverse
# overestimates it): on Pokémon (40,000 training duels, M = 2,000) the test duels'
# Laplace sd were a median 1.12x the all-duel posterior's with 6,000 drawn by
# curvature, 1.21x with 4,000, and 1.26x with 6,000 drawn uniformly (the rule before;
# docs/method.md, "Cost").
POSTERIOR_MAX_DUELS = 6_000
# Share of trace(Sigma) (and of the centre duels' prediction variance) the factor keeps.
TRACE_SHARE = 0.999
# Centre duels whose summed prediction variance guards the factor's rank (a seeded sample).
_GUARD_CENTRES = 512
# A UPM's training item factor is kept for its posterior up to this size: above it the
# factor is released first, since the posterior's copy over the distinct feature rows
# (data_term.on_distinct_items) would sit next to it and raise the peak by as much again.
_KEEP_ITEM_FACTOR_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Posterior:
    factor: np.ndarray  # (M, r) F, Sigma ~= F F^T
    info: dict  # what it was computed from (stored in the model's metadata)
    # (r,) v: the penalty's bias of alpha, de-shrunk once, is u = F v (widen_by_penalty_bias)
    bias_coordinates: np.ndarray


@dataclass(frozen=True)
class TrainingSystem:
    """What a logistic fit formed that its Laplace posterior needs again: the training
    duels' ``K_nM`` (the operator's float64 cache, rows in the training duels' order)
    and its centres' positions among them, or a UPM's item operator (its rows as
    differences of item rows); ``K_MM`` as the solver factored it and the
    preconditioner's ``L`` (``L L^T = K_MM + jitter I``). Forming them again cost
    ~0.15 s of a ~1.1 s posterior (4,784 duels, M = 2,000) and ~0.13 s of a UPM's
    0.76 s on tennis. ``validation_rows``: the validation duels' rows (the fit's float64
    validation block, in their order), where it kept one, for the held-out dispersion
    (:func:`posterior_calibration.with_holdout_dispersion`; ~25 ms of kernel rows at
    600 x 2,000)."""

    rows: torch.Tensor | None
    centre_positions: torch.Tensor | None
    centre_gram: torch.Tensor
    lower: torch.Tensor
    jitter: float
    item_operator: DifferenceOperator | None = None
    validation_rows: torch.Tensor | None = None

    @classmethod
    def of(
        cls, op: object, result: SolveResult, validation: object = None
    ) -> TrainingSystem | None:
        """The system of a fit on ``op`` (``validation``: its validation block, if any),
        or None where its rows are not kept in float64 (a float32 or blocked operator, a
        sum of operators) or a UPM's data term would not run over its items
        (:func:`data_term.item_rows_pay`)."""
        lower = result.centre_factor
        if lower is None or lower.dtype != torch.float64:
            return None
        if isinstance(op, DifferenceOperator):
            factor = op.factor
            if (
                factor.dtype != torch.float64
                or factor.numel() * factor.element_size() > _KEEP_ITEM_FACTOR_BYTES
                or not data_term.item_rows_pay(op)
            ):
                return None
            return cls(None, None, op.centre_gram(), lower, result.jitter, item_operator=op)
        rows = _float64_rows(op)
        if rows is None or op.centre_positions is None:  # op: a BlockedKernelOperator here
            return None
        return cls(rows, op.centre_positions, op.centre_gram(), lower, result.jitter,
                   validation_rows=_float64_rows(validation))  # fmt: skip

    def centre_of_rows(self) -> np.ndarray:
        """Per training duel, the position of the centre it is, or -1."""
        assert self.rows is not None and self.centre_positions is not None
        position = np.full(self.rows.shape[0], -1, dtype=np.int64)
        position[self.centre_positions.cpu().numpy()] = np.arange(self.rows.shape[1])
        return position


def _float64_rows(op: object) -> torch.Tensor | None:
    """A blocked kernel operator's rows, where it caches them in float64."""
    if (
        isinstance(op, BlockedKernelOperator)
        and op.cache is not None
        and op.cache.dtype == torch.float64
        and op.dtype == torch.float64
    ):
        return op.cache
    return None


def uses_training_system(kind: str, n_duels: int, max_duels: int = POSTERIOR_MAX_DUELS) -> bool:
    """Whether the posterior of a fit on ``n_duels`` uses the fit's own
    :class:`TrainingSystem`: a UPM's item operator always (its data term takes every
    duel), the kernel rows where no sample is drawn."""
    return kind == "upm" or n_duels <= max_duels


def laplace_posterior(
    fn: PreferenceFunction,
    pool: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    y: np.ndarray,
    penalty: float,
    relative_jitter: float,
    context_pool: np.ndarray | None = None,
    context_index: np.ndarray | None = None,
    *,
    compute: Compute | None = None,
    seed: int = 0,
    max_duels: int = POSTERIOR_MAX_DUELS,
    trace_share: float = TRACE_SHARE,
    system: TrainingSystem | None = None,
) -> Posterior:
    """The Laplace posterior factor of ``fn.alpha`` fitted on these training duels.

    ``penalty``: the solver's ``lam`` at the fitted point; ``relative_jitter``: the
    solver's (``SolverOptions.jitter_for``), scaled by ``M`` and the mean diagonal
    as in the solver. Everything runs in float64 on ``compute``'s device.
    ``trace_share=1`` keeps every column (r = M). ``system``: the fit's own
    :class:`TrainingSystem` on these duels, used where no sample is drawn (a UPM's
    item operator: always, with every duel).
    """
    compute = Compute(device=(compute or Compute()).device, dtype="float64")
    n = len(left)
    m = fn.n_centres
    alpha = compute.tensor(fn.alpha)
    rows, row_weights, item_operator = np.arange(n), None, None
    if system is not None and not uses_training_system(fn.kind, n, max_duels):
        system = None
    if system is not None and fn.kind == "upm" and system.item_operator is not None:
        # every duel, as below
        item_operator = data_term.on_distinct_items(system.item_operator, pool, left, right)
        assert item_operator.shape == (n, m), "a TrainingSystem of other duels or centres"
        centres, lower, jitter = system.centre_gram, system.lower, system.jitter
        position = None
    elif system is not None and fn.kind != "upm" and system.rows is not None:
        assert system.rows.shape == (n, m), "a TrainingSystem of other duels or centres"
        centres, lower, jitter = system.centre_gram, system.lower, system.jitter
        position = system.centre_of_rows()

        def rest_blocks(rest: np.ndarray) -> Iterator[tuple[int, int, torch.Tensor]]:
            return data_term.gathered_blocks(system.rows, rest)

    else:
        if n <= max_duels or fn.kind == "upm":
            kernel, duels, centre_duels = data_term.bracket_kernel(
                fn, pool, left, right, context_pool, context_index, compute
            )
            item_operator = data_term.item_operator(fn, kernel, duels, centre_duels)
        # A UPM's data term over its items costs about the same for any number of duels
        # (data_term.add_utility_data_term): every duel, exactly, no sample.
        if n > max_duels and item_operator is None:
            rows, weights = data_term.sampled_rows(
                fn, pool, left, right, context_pool, context_index, compute, max_duels, seed
            )
            row_weights = compute.tensor(weights)
            kernel, duels, centre_duels = data_term.bracket_kernel(
                fn, pool, left[rows], right[rows], context_pool,
                None if context_index is None else np.asarray(context_index)[rows], compute,
            )  # fmt: skip
            item_operator = data_term.item_operator(fn, kernel, duels, centre_duels)
        # K_MM by row blocks, not symmetrised: its readers (the Cholesky) read the lower
        # triangle only, and a full-size gather scratch is 2 x 32 MB of fresh memory.
        centres = kernel.matrix(centre_duels, centre_duels, block_rows=data_term.BLOCK_DUELS)
        lower, jitter = jittered_cholesky(centres, relative_jitter * m)
        position = None
        if item_operator is None:
            position = data_term.centre_positions(duels, centre_duels)

        def rest_blocks(rest: np.ndarray) -> Iterator[tuple[int, int, torch.Tensor]]:
            return kernel.row_blocks(duels.subset(torch.as_tensor(rest)), centre_duels,
                                     data_term.BLOCK_DUELS)  # fmt: skip

    # H_beta = Z^T Z + n lam I with Z = W^1/2 K_nM L^-T, the whitened training rows.
    h_beta = torch.zeros((m, m), dtype=torch.float64, device=compute.torch_device)
    inverse = None  # L^-1, where the centre rows formed it
    if item_operator is not None:
        if row_weights is None:
            p = torch.sigmoid(item_operator.mm(alpha))  # D[l] @ alpha - D[r] @ alpha
            row_weights = p * (1.0 - p)
        data_term.add_utility_data_term(h_beta, item_operator, lower, row_weights)
    else:
        assert position is not None
        rest, row_weights, inverse = data_term.add_centre_rows(
            h_beta, centres, lower, jitter, alpha, position, row_weights
        )
        for lo, hi, b in rest_blocks(rest):
            if row_weights is None:
                p = torch.sigmoid(b @ alpha)
                b.mul_((p * (1.0 - p)).sqrt_()[:, None])
            else:
                b.mul_(row_weights[lo:hi].sqrt()[:, None])
            # Z^T = L^-1 (W^1/2 K_b)^T: a left solve on the transposed view ran ~20 %
            # faster than the right solve Z = W^1/2 K_b L^-T (MKL, two cores); in place
            # (out= the block itself), without a copy of the block.
            torch.linalg.solve_triangular(lower, b.T, upper=False, out=b.T)
            add_lower_gram(h_beta, b, panel=data_term.PANEL)
    # Only the lower triangle is filled: the Cholesky (and eigh) below read only it.
    h_beta.diagonal().add_(n * penalty)
    full = _full_factor(lower, h_beta, floor=n * penalty, inverse=inverse)
    del h_beta, inverse
    kept = _kept_columns(full, centres, trace_share)
    r = len(kept)
    # full is a view of the contiguous F^T (_full_factor): its columns gathered as rows
    # of F^T, then laid out row-major (20 ms against 77 ms for a column gather).
    factor = torch.index_select(full.T, 0, kept).T.contiguous()
    del full
    # The penalty's bias of alpha, u = n lam Sigma K (alpha + u1) with K = K_MM + j I and
    # the plug-in u1 = n lam Sigma K alpha: the fit alpha is itself shrunk by about u1,
    # so one step de-shrinks it (docs/method.md, "Calibration"). In the factor's
    # coordinates, u = F v (see widen_by_penalty_bias).
    k_alpha = centres @ alpha + jitter * alpha
    plug_in = factor @ ((n * penalty) * (factor.T @ k_alpha))
    k_deshrunk = k_alpha + centres @ plug_in + jitter * plug_in
    bias_coordinates = (n * penalty) * (factor.T @ k_deshrunk)
    factor = factor.cpu().numpy()
    info = {
        "method": "laplace",
        "n_duels": int(n),
        "n_duels_used": len(rows),
        "penalty": float(penalty),
        "jitter": float(jitter),
        "rank": int(r),
        "trace_share": float(trace_share),
    }
    return Posterior(factor, info, bias_coordinates.cpu().numpy())


def _full_factor(
    lower: torch.Tensor, h_beta: torch.Tensor, floor: float, inverse: torch.Tensor | None = None
) -> torch.Tensor:
    """``F = L^-T R^-T`` for ``H_beta = R R^T`` (its lower triangle is read), so that
    ``F F^T = L^-T H_beta^-1 L^-1 = Sigma``; upper triangular. ``inverse``: ``L^-1``,
    if formed already (:func:`data_term.add_centre_rows`).

    ``H_beta``'s eigenvalues are >= ``floor`` (= n lam): no jitter is needed, and a
    Cholesky, not an eigendecomposition (15 s against 0.1 s at M = 2,000 on two
    cores), gives ``R``. ``F^T = R^-1 L^-1`` is one solve with a lower-triangular
    right-hand side (``M^3 / 3`` flops; 87 ms at M = 2,000, against 150-200 ms for
    the two solves ``L^-T (R^-T I)``, and ~80 ms for ``L^-1`` where it is not formed).
    The Gram of whitened rows keeps the bound to rounding; should the Cholesky still
    fail (a pathological ``K_MM``), ``H_beta``'s eigenvalues are clipped at that exact
    bound, which changes only directions the round-off had spoiled, and the clipped
    matrix is factored: F stays upper triangular (:func:`_kept_columns` relies on it).
    """
    inverse = lower_inverse(lower) if inverse is None else inverse
    r_lower, info = torch.linalg.cholesky_ex(h_beta)
    if int(info) != 0:
        values, vectors = torch.linalg.eigh(h_beta, UPLO="L")
        clipped = (vectors * values.clamp_min(floor)[None, :]) @ vectors.T
        r_lower = torch.linalg.cholesky((clipped + clipped.T) / 2.0)
    return solve_lower_by_lower(r_lower, inverse).T


def _kept_columns(full: torch.Tensor, centres: torch.Tensor, share: float) -> torch.Tensor:
    """The columns kept, largest share of trace(Sigma) first: enough for ``share`` of
    trace(Sigma) and of sum_i var g(centre i) (over up to ``_GUARD_CENTRES`` of them).
    ``full``: the upper-triangular factor of :func:`_full_factor`."""
    m = full.shape[1]
    trace_parts = torch.linalg.vector_norm(full, dim=0) ** 2
    order = torch.argsort(trace_parts, descending=True)
    if share >= 1.0:
        return order

    def needed(parts: torch.Tensor) -> int:
        cumulative = torch.cumsum(parts, 0)
        total = float(cumulative[-1])
        if not total > 0:
            return 1
        return int(torch.searchsorted(cumulative, share * total).item()) + 1

    by_trace = needed(trace_parts[order])
    if by_trace >= m:
        return order  # the predictions' M^3 product would not change it
    # The prediction guard on a seeded sample of the centre duels: the product over all
    # of them (2 M^3 flops) took ~10 % of the posterior at M = 2,000, only to pick r.
    sample = np.sort(np.random.default_rng(0).choice(m, min(m, _GUARD_CENTRES), replace=False))
    guard = times_upper(centres[torch.as_tensor(sample, device=centres.device)], full)
    prediction_parts = (torch.linalg.vector_norm(guard, dim=0) ** 2)[order]
    return order[: min(m, max(by_trace, needed(prediction_parts)))]


def with_training_posterior(
    fn: PreferenceFunction,
    data: DuelData,
    train: np.ndarray,
    penalty: float,
    solver: SolverOptions,
    compute: Compute,
    seed: int,
    system: TrainingSystem | None = None,
) -> PreferenceFunction:
    """``fn`` with the posterior of its fit on ``data``'s ``train`` duels (logistic loss).

    ``system``: that fit's own :class:`TrainingSystem`, if kept. The timing and what it
    was computed from go into ``metadata["posterior"]``.
    """
    start = time.perf_counter()
    with_context = fn.kind == "cgpm"
    posterior = laplace_posterior(
        fn, data.items, data.left[train], data.right[train], data.y[train], penalty,
        solver.jitter_for(compute.torch_dtype),
        data.contexts if with_context else None,
        data.context_index[train] if with_context else None,
        compute=compute, seed=seed, system=system,
    )  # fmt: skip
    factor = widen_by_penalty_bias(posterior.factor, posterior.bias_coordinates)
    info = {
        **posterior.info,
        "penalty_bias_norm": float(np.linalg.norm(posterior.bias_coordinates)),
        "seconds": time.perf_counter() - start,
    }
    metadata = {**fn.metadata, "posterior": info}
    return replace(fn, posterior_factor=factor, metadata=metadata)


def decision_sd_on_pool(
    fn: PreferenceFunction,
    pool: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    context_pool: np.ndarray | None,
    context_index: np.ndarray | None,
    *,
    compute: Compute,
    chunk: int = 4096,
) -> np.ndarray:
    """``||b(x) @ F||`` per duel (:meth:`PreferenceFunction.decision_sd_on_pool`)."""
    factor = compute.tensor(fn.require_posterior())
    out = np.empty(len(left))
    for s in range(0, len(left), chunk):
        ctx = None if context_index is None else context_index[s : s + chunk]
        b = fn.centre_brackets_on_pool(
            pool, left[s : s + chunk], right[s : s + chunk], context_pool, ctx, compute
        )
        out[s : s + chunk] = torch.linalg.vector_norm(b @ factor, dim=1).cpu().numpy()
    return out


# The normal quantile of a two-sided 90 % interval.
Z90 = 1.6448536269514722


def probability_interval(
    g: np.ndarray | float, sd: np.ndarray | float, z: float = Z90
) -> tuple[np.ndarray, np.ndarray]:
    """The interval of P(left wins) = sigmoid(g): ``sigmoid(g -+ z sd)`` (90 % by
    default). The sigmoid is monotone, so g's interval maps onto P's exactly."""
    g, sd = np.asarray(g, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(-(g - z * sd))), 1.0 / (1.0 + np.exp(-(g + z * sd)))
