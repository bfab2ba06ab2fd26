"""What every CME backend shares: the problem, the solver seam, bookkeeping, sparse matrices.

A :class:`CMEProblem` is one conditional-mean-embedding problem of Pref-SHAP
(docs/method.md, "Coalition embeddings"): a weighted pool ``X`` (rows with
multiplicities, total ``n``), the model's centre rows ``P``, the lengthscales, which
player owns each column, and the regulariser ``lam`` (the ridge is ``n lam``). The
queries are not part of it: they change from call to call, the problem does not.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.models.centres import GameCentres


@dataclass
class EngineStats:
    """Seconds and floating-point operations per part of the engine (for benchmarks)."""

    device: str = "cpu"
    seconds: dict[str, float] = field(default_factory=dict)
    flops: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, part: str, flops: float = 0.0) -> Iterator[None]:
        # Asynchronous devices need a sync for the time to belong to this part.
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        yield
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - start
        self.flops[part] = self.flops.get(part, 0.0) + flops


@contextmanager
def maybe_timed(stats: EngineStats | None, part: str, flops: float = 0.0) -> Iterator[None]:
    if stats is None:
        yield
    else:
        with stats.timed(part, flops):
            yield


@dataclass(frozen=True, eq=False)
class CMEProblem:
    """One coalition-embedding problem: everything but the coalition and the queries."""

    pool: np.ndarray  # (n, d) model-space rows
    pool_weights: np.ndarray | None  # (n,) multiplicities, None = all 1
    centres: np.ndarray  # (t, d) the model's (distinct) centre rows
    lengthscales: np.ndarray  # (d,)
    column_player: np.ndarray  # (d,) player of each column
    cme_lambda: float

    def __post_init__(self) -> None:
        weights = self.weights
        if len(self.pool) == 0 or np.any(weights <= 0):
            raise ValueError("the pool needs at least one row, all weights positive")
        if not self.cme_lambda > 0:
            raise ValueError(f"cme_lambda must be positive, got {self.cme_lambda}")

    @classmethod
    def of(cls, centres: GameCentres, cme_lambda: float) -> CMEProblem:
        """The problem of a game's centres (:class:`GameCentres`) over its pool."""
        return cls(
            pool=centres.pool,
            pool_weights=centres.pool_weights,
            centres=centres.rows,
            lengthscales=centres.lengthscales,
            column_player=centres.column_player,
            cme_lambda=cme_lambda,
        )

    @property
    def weights(self) -> np.ndarray:
        n = len(self.pool)
        return np.ones(n) if self.pool_weights is None else np.asarray(self.pool_weights, float)

    @property
    def ridge(self) -> float:
        """``n lam``: the regulariser times the pool's total weight, as in the paper."""
        return float(self.cme_lambda) * float(self.weights.sum())


@dataclass(frozen=True)
class CMESystem:
    """``(W^1/2 K W^1/2 + ridge I) X = rhs`` for one coalition, over the pool's classes.

    Symmetric positive definite (eigenvalues >= ridge). ``points`` are the classes'
    S columns divided by the lengthscales, for solvers that build their own kernels;
    ``gram`` is ``None`` for solvers that bound their memory (``wants_gram = False``).
    """

    points: torch.Tensor  # (r, k)
    gram: torch.Tensor | None  # (r, r) K_S between the classes, or None
    weights: torch.Tensor  # (r,) class multiplicities (> 0)
    ridge: float  # n * lambda
    rhs: torch.Tensor  # (r, c)


class CMESolver(Protocol):
    """Solves a batch of coalition systems (the exact backends' inner step)."""

    name: str
    wants_gram: bool

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]: ...


def sparse_csr(
    compute: Compute,
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray | torch.Tensor,
    shape: tuple[int, int],
) -> torch.Tensor:
    """A CSR matrix (torch flags its sparse support as beta: silence that warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coo = torch.sparse_coo_tensor(
            compute.index(np.stack([rows, cols])), compute.tensor(values), shape
        )
        return coo.coalesce().to_sparse_csr()
