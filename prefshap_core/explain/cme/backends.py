"""The CME backend seam: one object per method that builds a game's coalition embeddings.

This is the one place to change how a CME is solved. A backend is built from its
options dataclass (:mod:`prefshap_core.explain.options`) by :func:`make_backend`
(``AutoOptions`` picks the method from the sizes, :mod:`select`) and builds, for a
:class:`CMEProblem`, an embedding with ``bind(queries)`` and ``gammas(masks,
universe)``:

* :class:`CholeskyBackend`: exact dense Cholesky;
* :class:`CGBackend`: exact to a tolerance, batched preconditioned CG, memory-bounded;
  both keep each coalition's centre-side solution in a :class:`FactorCache`;
* :class:`NystromBackend`: a low-rank approximation for very large pools.

``report()`` says what ran (and, for ``auto``, why) for ``Explanation.meta["cme"]``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.explain.cme.base import CMEProblem, EngineStats
from prefshap_core.explain.cme.cache import FactorCache
from prefshap_core.explain.cme.cg import CGReport, CGSolver
from prefshap_core.explain.cme.embedding import CholeskySolver, CoalitionEmbedding
from prefshap_core.explain.cme.nystrom import NystromEmbedding, NystromReport
from prefshap_core.explain.cme.select import MethodChoice, ProblemSizes, choose_method
from prefshap_core.explain.options import (
    AutoOptions,
    CGOptions,
    CholeskyOptions,
    CMEOptions,
    NystromOptions,
)


class Embedding(Protocol):
    def bind(self, queries: np.ndarray) -> Any: ...

    def gammas(self, masks: np.ndarray, universe: Any) -> list[Any]: ...


class CMEBackend(Protocol):
    name: str
    choice: MethodChoice | None

    def embedding(
        self, problem: CMEProblem, compute: Compute, stats: EngineStats | None
    ) -> Embedding: ...

    def begin_call(self) -> None: ...

    def workspace_bytes(self, n_rows: int, n_centres: int, n_coalitions: int) -> int:
        """Peak memory of embedding coalitions over ``n_rows`` distinct pool rows and
        ``n_centres`` centre rows, kept factorizations included (for the budget)."""
        ...

    def report(self) -> dict[str, Any]: ...


def _kept_bytes(cache: FactorCache, n_rows: int, n_centres: int, n_coalitions: int) -> int:
    return min(cache.max_bytes, n_coalitions * n_rows * n_centres * 8)


class CholeskyBackend:
    name = "cholesky"

    def __init__(self, options: CholeskyOptions, cache_bytes: int) -> None:
        self.options = options
        self.cache = FactorCache(cache_bytes)
        self.choice: MethodChoice | None = None

    def embedding(
        self, problem: CMEProblem, compute: Compute, stats: EngineStats | None
    ) -> CoalitionEmbedding:
        solver = CholeskySolver(self.options.batch_equal_sizes)
        return CoalitionEmbedding(problem, compute, solver, stats, self.cache)

    def begin_call(self) -> None:
        self.cache.begin_call()

    def workspace_bytes(self, n_rows: int, n_centres: int, n_coalitions: int) -> int:
        # the Gram, its factor and a copy; the centre side and its solution
        dense = (3 * n_rows * n_rows + 2 * n_rows * n_centres) * 8
        return dense + _kept_bytes(self.cache, n_rows, n_centres, n_coalitions)

    def report(self) -> dict[str, Any]:
        return _with_choice({"method": self.name, "factor_cache": self.cache.report()}, self)


class CGBackend:
    name = "cg"

    def __init__(self, options: CGOptions, cache_bytes: int) -> None:
        self.options = options
        self.cache = FactorCache(cache_bytes)
        self.solver = CGSolver(
            tol=options.tol,
            max_iter=options.max_iter,
            preconditioner_rank=options.preconditioner_rank,
            landmarks=options.landmarks,
            seed=options.seed,
            max_gram_bytes=options.max_gram_bytes,
        )
        self.choice: MethodChoice | None = None

    def embedding(
        self, problem: CMEProblem, compute: Compute, stats: EngineStats | None
    ) -> CoalitionEmbedding:
        return CoalitionEmbedding(problem, compute, self.solver, stats, self.cache)

    def begin_call(self) -> None:
        self.cache.begin_call()
        self.solver.report = CGReport(tolerance=self.options.tol)

    def workspace_bytes(self, n_rows: int, n_centres: int, n_coalitions: int) -> int:
        # blocked products, the preconditioner's factor, iterates of every column
        rank = self.options.preconditioner_rank
        iterative = n_rows * (rank + 4 * n_centres) * 8
        return iterative + _kept_bytes(self.cache, n_rows, n_centres, n_coalitions)

    def report(self) -> dict[str, Any]:
        report = {"method": self.name, "cg": self.solver.report.as_dict()}
        return _with_choice({**report, "factor_cache": self.cache.report()}, self)


class NystromBackend:
    name = "nystrom"

    def __init__(self, options: NystromOptions) -> None:
        self.options = options
        self._embeddings: list[NystromEmbedding] = []
        self.choice: MethodChoice | None = None

    def embedding(
        self, problem: CMEProblem, compute: Compute, stats: EngineStats | None
    ) -> NystromEmbedding:
        o = self.options
        embedding = NystromEmbedding(
            problem,
            compute,
            n_landmarks=o.n_landmarks,
            landmarks=o.landmarks,
            correction=o.correction,
            seed=o.seed,
            stats=stats,
        )
        self._embeddings.append(embedding)
        return embedding

    def workspace_bytes(self, n_rows: int, n_centres: int, n_coalitions: int) -> int:
        m = self.options.n_landmarks
        return 2 * n_rows * (m + n_centres) * 8 + 2 * n_centres * m * 8

    def begin_call(self) -> None:
        for embedding in self._embeddings:
            embedding.report = NystromReport(self.options.n_landmarks, self.options.landmarks)

    def report(self) -> dict[str, Any]:
        reports = [e.report.as_dict() for e in self._embeddings]
        nystrom = reports[0] if len(reports) == 1 else {"embeddings": reports}
        return _with_choice({"method": self.name, "nystrom": nystrom}, self)


def _with_choice(report: dict[str, Any], backend: CMEBackend) -> dict[str, Any]:
    if backend.choice is not None:
        report.update(backend.choice.as_dict())
        report["method"] = backend.name
    return report


def make_backend(
    options: CMEOptions,
    problem: CMEProblem,
    n_queries: int,
    n_coalitions: int,
    compute: Compute,
    cache_bytes: int,
) -> CMEBackend:
    """The backend for ``options``; ``AutoOptions`` decides from the problem's sizes.

    ``n_queries`` (distinct query rows) and ``n_coalitions`` are those of the first
    call; the choice is kept for the explainer's later calls.
    """
    choice = None
    if isinstance(options, AutoOptions):
        n_rows = len(np.unique(np.asarray(problem.pool, dtype=np.float64), axis=0))
        sizes = ProblemSizes(
            n_rows, np.shape(problem.pool)[1], len(problem.centres), n_queries, n_coalitions
        )
        choice = choose_method(
            sizes,
            compute.device,
            compute.dtype,
            options=options,
        )
        options = {"cholesky": options.cholesky, "cg": options.cg, "nystrom": options.nystrom}[
            choice.method
        ]
    backend: CMEBackend
    if isinstance(options, CholeskyOptions):
        backend = CholeskyBackend(options, cache_bytes)
    elif isinstance(options, CGOptions):
        backend = CGBackend(options, cache_bytes)
    elif isinstance(options, NystromOptions):
        backend = NystromBackend(options)
    else:
        raise TypeError(f"not a CME options object: {options!r}")
    backend.choice = choice
    return backend
