"""Fitting one model kind along the penalty path at given hyperparameters, scored.

``PathFitter`` fits one model kind at given lengthscale scales and utility weights
(the ``w`` of the sum kernel ``k_E + w k_UPM``, see :mod:`kernels.pair`) along a decreasing
penalty path (the logistic solver's Newton path, or warm-started squared-loss fits)
and scores every step on validation duels, so the penalty costs nothing extra to
choose. The selection protocols (``models.search``) decide which points to fit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.kernels.operator import (
    BlockedKernelOperator,
    KernelOperator,
    SumOperator,
    dense_operator,
)
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.metrics import log_loss, roc_auc
from prefshap_core.models.hyperparameters import SearchPoint, centre_count
from prefshap_core.models.posterior import TrainingSystem
from prefshap_core.progress import Progress
from prefshap_core.solvers.falkon import fit_squared
from prefshap_core.solvers.logistic import fit_logistic
from prefshap_core.solvers.options import SolverOptions


@dataclass(frozen=True)
class PathResult:
    point: SearchPoint
    alpha: torch.Tensor
    validation_g: np.ndarray  # g on the validation duels (empty without validation)
    # The path's K_nM and factors, shared by its steps (PathFitter.keep_system): the
    # chosen fit's Laplace posterior reuses them.
    system: TrainingSystem | None = None


@dataclass(frozen=True, eq=False)
class PathFitter:
    kind: str
    loss: str
    data: DuelData
    base_lengthscales: np.ndarray
    context_lengthscales: np.ndarray | None
    compute: Compute
    solver: SolverOptions
    seed: int
    n_centres: int
    iterations: dict[float, int]  # CG iterations of the Newton step at each penalty
    backend: str = "torch"  # or "falkon" (the optional package; no per-step scores)
    # Hold-out selection: a penalty path stops once this many steps in a row scored
    # worse than its best (None: every penalty; K-fold CV pools every penalty's folds).
    patience: int | None = None
    # Keep a logistic path's TrainingSystem on its results (the final fit of one point,
    # whose posterior follows): its K_nM then outlives the path.
    keep_system: bool = False

    @property
    def criterion(self) -> str:
        return "validation_log_loss" if self.loss == "logistic" else "validation_auc"

    def loss_of(self, point: SearchPoint) -> float:
        """What selection minimises: log loss (logistic) or minus AUC (squared loss)."""
        return point.validation_log_loss if self.loss == "logistic" else -point.validation_auc

    def centres(self, n_train: int, n_centres: int | None = None) -> np.ndarray:
        """Positions of the Nyström centres among the training duels (seeded; at most
        ``centre_count`` of them)."""
        rng = np.random.default_rng(self.seed)
        count = centre_count(n_centres or self.n_centres, n_train)
        return np.sort(rng.choice(n_train, count, replace=False))

    def subsample(
        self,
        train: np.ndarray,
        validation: np.ndarray,
        n_train: int,
        n_validation: int,
        stream: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Seeded sorted subsets of at most ``n_train`` / ``n_validation`` duels.

        ``stream`` keeps each stage's draw its own (the grid's ranking: 2; the
        lengthscale refinement: 3).
        """
        rng = np.random.default_rng([self.seed, stream])
        sub_train = np.sort(rng.choice(train, min(len(train), n_train), replace=False))
        n_val = min(len(validation), n_validation)
        return sub_train, np.sort(rng.choice(validation, n_val, replace=False))

    def for_ranking(self) -> PathFitter:
        """This fitter with K_nM cached in float32 (vectors and solves stay in the compute
        dtype), for fits that only rank candidates and are not kept.

        The ranking's products are memory-bound passes over K_nM: at 10,000 x 500 it is
        40 MB in float64, more than the 2-core VM's 32 MB L3, 20 MB in float32, and a
        fused ``K^T W K v`` ran 3x faster (2.8 -> 0.96 ms at 8,000 x 500). Products
        carry ~1e-7 relative error (docs/method.md, "Hyperparameters").
        """
        if self.backend != "torch" or self.compute.torch_dtype != torch.float64:
            return self
        return replace(self, solver=replace(self.solver, cache_dtype="float32"))

    def duel_index(self, duels: np.ndarray) -> DuelIndex:
        data = self.data
        ctx = data.context_index[duels] if self.kind == "cgpm" else None
        return DuelIndex.from_arrays(
            data.left[duels], data.right[duels], ctx, device=self.compute.torch_device
        )

    def fit(
        self,
        train: np.ndarray,
        validation: np.ndarray | None,
        scales: list[float],
        penalties: list[float],
        progress: Progress,
        n_centres: int | None = None,
        utility_weights: list[float] | None = None,
    ) -> list[PathResult]:
        """Fit every (scale, utility weight) along the penalty path; score each step.

        The centres are the same for every point, so the points differ only in the
        hyperparameters. Per scale, the two terms of the sum kernel (GPM bracket and
        utility bracket) are built once and reused for every utility weight.
        """
        weights = [0.0] if self.kind == "upm" else list(utility_weights or [0.0])
        data = self.data
        centres = self.centres(len(train), n_centres)
        train_index = self.duel_index(train)
        val_index = None if validation is None else self.duel_index(validation)
        centre_index = train_index.subset(torch.as_tensor(centres))
        y_train = data.y[train].astype(np.float64)
        y_val = None if validation is None else data.y[validation].astype(np.float64)
        results: list[PathResult] = []
        for k, scale in enumerate(scales):
            part = progress.span(k / len(scales), (k + 1) / len(scales))
            part.update(f"Building the kernel matrix (lengthscale scale {scale:.3g})", 0.0)
            kernel = PairKernel(
                self.kind, data.items, self.base_lengthscales * scale,
                data.contexts if self.kind == "cgpm" else None, self.context_lengthscales,
                self.compute,
            )  # fmt: skip
            terms = self._terms(kernel, weights, train_index, centres, val_index, centre_index)
            for j, weight in enumerate(weights):
                op, k_val = terms(weight)
                label = f"lengthscale scale {scale:.3g}, utility weight {weight:g}"
                step = part.span(j / len(weights), (j + 1) / len(weights))
                step.update(f"Kernel matrix ready ({label})", 0.02)
                results.extend(
                    self._path(op, k_val, y_train, y_val, scale, weight, penalties, step)
                )
                del op, k_val  # the next one is built without this one: one K_nM at a time
            del terms
        return results

    def _terms(self, kernel, weights, train_index, centres, val_index, centre_index):
        """``weight -> (K_nM operator, validation block)`` for one lengthscale scale.

        One weight (or the falkon backend, which needs a single kernel): the sum
        kernel itself, one cached K_nM. Several: each term's K_nM is built once; per
        weight, the cached terms are added into one matrix (one pass per product,
        like the plain GPM's), else (too large to cache) summed by a SumOperator.
        Weight 0 is the first term's own operator: exactly the plain GPM.
        """
        kwargs = self.solver.operator_kwargs()

        def val_block(k: PairKernel) -> KernelOperator | None:
            # An operator, not a dense matrix: cached when it fits the solver's cache
            # budget, else computed in blocks (a 170k-duel validation split against
            # 2000 centres is 2.7 GB dense).
            return None if val_index is None else k.operator(val_index, centre_index, **kwargs)

        if self.kind == "upm" or len(weights) == 1 or self.backend == "falkon":

            def single(weight: float):
                k = kernel if self.kind == "upm" else kernel.with_utility_weight(weight)
                return k.operator(train_index, centres, **kwargs), val_block(k)

            return single
        first, second = kernel.parts()
        op_first = first.operator(train_index, centres, **kwargs)
        val_first, val_second = val_block(first), val_block(second)
        cacheable = isinstance(op_first, BlockedKernelOperator) and op_first.cache is not None
        if cacheable:  # gathered by row blocks: no full-size scratch next to the cache
            second_matrix = second.matrix(
                train_index, centre_index, block_rows=op_first.block_rows
            ).to(op_first.cache_dtype)
        else:
            op_second = second.operator(train_index, centres, **kwargs)

        def combined(weight: float):
            if weight == 0:
                return op_first, val_first
            k_val = None
            if val_first is not None and val_second is not None:
                k_val = SumOperator(val_first, val_second, weight)
            if not cacheable:
                return SumOperator(op_first, op_second, weight), k_val
            assert isinstance(op_first, BlockedKernelOperator) and op_first.cache is not None
            # cache + w * second without a second temporary (IEEE addition commutes: bitwise)
            matrix = torch.mul(second_matrix, weight).add_(op_first.cache)
            summed = dense_operator(
                matrix, op_first.centre_positions, as_cache=True, dtype=op_first.dtype
            )
            return summed, k_val

        return combined

    def _path(self, op, k_val, y_train, y_val, scale, weight, penalties, part) -> list[PathResult]:
        """One penalty path on one operator, every step scored on the validation block.

        With ``patience`` the path ends once that many steps in a row scored worse
        than its best: the validation loss along a decreasing penalty path falls, then
        rises as the fit overfits, so the steps left would not be chosen, and they are
        the dearest (most CG iterations). Recorded tennis and Pokémon searches (128
        paths) lost no path's best point to a patience of 2 and saved a quarter of
        tennis's path time.
        """
        iterations = [self.iterations.get(p, max(self.iterations.values())) for p in penalties]
        results: list[PathResult] = []
        tick = time.perf_counter()

        def score(penalty: float, alpha: torch.Tensor) -> bool:
            """Record the step; True when the path should end here."""
            nonlocal tick
            g_val, ll, auc = np.zeros(0), float("nan"), float("nan")
            if k_val is not None and y_val is not None:
                g_val = k_val.mm(alpha).cpu().numpy().astype(np.float64)
                ll, auc = log_loss(y_val, g_val), roc_auc(y_val, g_val)
            now = time.perf_counter()
            point = SearchPoint(scale, penalty, ll, auc, now - tick, utility_weight=weight)
            tick = now
            results.append(PathResult(point, alpha.detach().clone(), g_val))
            return self._past_patience(results)

        if self.backend == "falkon":
            # falkon reports no Newton steps: only the path's end is scored.
            from prefshap_core.solvers import falkon_backend

            if self.loss == "logistic":
                result = falkon_backend.fit_logistic(
                    op, y_train, penalties, self.solver, part, cg_iterations=iterations
                )
                score(penalties[-1], result.alpha)
            else:
                for penalty in penalties:
                    result = falkon_backend.fit_squared(op, y_train, penalty, self.solver)
                    score(penalty, result.alpha)
        elif self.loss == "logistic":
            result = fit_logistic(
                op, y_train, penalties, self.solver, part,
                callback=lambda step, penalty, alpha: score(penalty, alpha),
                cg_iterations=iterations,
            )  # fmt: skip
            system = TrainingSystem.of(op, result, k_val) if self.keep_system else None
            if system is not None:
                results = [replace(r, system=system) for r in results]
        else:
            warm = None
            for j, penalty in enumerate(penalties):
                result = fit_squared(
                    op, y_train, penalty, self.solver,
                    part.span(j / len(penalties), (j + 1) / len(penalties)),
                    warm_start=warm,
                )  # fmt: skip
                warm = result.alpha
                if score(penalty, result.alpha):
                    break
        return results

    def _past_patience(self, results: list[PathResult]) -> bool:
        """Whether the last ``patience`` steps all scored worse than the path's best."""
        if self.patience is None or len(results) <= self.patience:
            return False
        losses = [self.loss_of(r.point) for r in results]
        if not all(np.isfinite(losses)):  # no validation block: nothing to stop on
            return False
        return len(losses) - 1 - int(np.argmin(losses)) >= self.patience
