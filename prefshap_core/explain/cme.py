"""Conditional mean embeddings over coalitions: the Gamma matrices of Pref-SHAP.

For a coalition ``S`` of players (its columns ``S``, the rest ``Sc``), a weighted
pool ``X`` (rows with multiplicities ``w``, total ``n``), centre rows ``P`` and
query rows ``Q``, this module computes

    Gamma_S(P, Q) = K_S(P, Q) * ( K_Sc(P, X) (K_S(X, X) + n lam I)^-1 K_S(X, Q) )

(``*`` elementwise), the estimated ``<k(p, .), k_S(., q_S) (x) mu_{Sc | S = q_S}>``
of METHOD.md for every centre ``p`` and query ``q``. Two exact reductions make it
cheap:

* Pool rows with equal ``S`` columns are merged into ``r`` classes with weights
  ``W`` (sums of their multiplicities), using
  ``(P K P' + c I)^-1 P = P (K W + c I)^-1`` for the 0/1 class assignment ``P``;
  the system is solved in its symmetric form
  ``(K W + c I)^-1 = W^-1/2 (W^1/2 K W^1/2 + c I)^-1 W^1/2`` so a Cholesky applies.
  Categorical groups, integer stats and imputed values make ``r`` much smaller
  than ``n`` for most coalitions.
* ``Gamma`` depends on a query only through its ``S`` class, and the middle
  factor depends on a centre only through its ``Sc`` class: both are computed per
  class and gathered.

Per coalition that is one Cholesky of an ``r x r`` matrix, one solve with the
distinct query classes as right-hand sides and one GEMM. The solve sits behind the
small :class:`CMESolver` interface so iterative solvers can replace the dense
Cholesky (:class:`cme_cg.CGSolver`); :class:`cme_nystrom.NystromEmbedding` replaces
the whole middle factor by a low-rank one for very large pools, and
:mod:`cme_select` picks among the three.

Regularisers: ``lam`` multiplies the pool's total weight, as in the paper
(``n lam`` for items, ``m lam'`` for contexts). Defaults:
``DEFAULT_CME_LAMBDA = 1e-2`` for items: ``cme_lambda.choose_cme_lambda`` (held-out
CME error) picks 1e-3 to 1e-1 on the project's datasets (synthetic 1e-2, Pokemon
1e-2, tennis 1e-3 / 3e-3, chameleons 1e-1), and 1e-2 scores within a few per cent of the
best on all but chameleons; ``DEFAULT_CONTEXT_CME_LAMBDA = 1e-3`` for contexts
(tennis: flat below 3e-3, where the count ``m`` is large). Both keep the system's
condition number below ``1 + 1/lam``, so float32 is safe.
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
from prefshap_core.errors import NumericalError

DEFAULT_CME_LAMBDA = 1e-2
DEFAULT_CONTEXT_CME_LAMBDA = 1e-3


# -- bookkeeping ---------------------------------------------------------------------
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


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """RBF Gram of rows already divided by their lengthscales (no columns: all ones).

    ``exp(a.b - |a|^2/2 - |b|^2/2)`` in place after one GEMM: the Gram matrices
    are the engine's largest temporaries, so every extra pass over them counts.
    The exponent is clamped at 0 (it is -|a-b|^2/2, which rounding can push above).
    """
    out = a @ b.T
    out.sub_(0.5 * (a * a).sum(1, keepdim=True)).sub_(0.5 * (b * b).sum(1)[None, :])
    return out.clamp_max_(0.0).exp_()


# -- the solver seam -----------------------------------------------------------------
@dataclass(frozen=True)
class CMESystem:
    """``(W^1/2 K W^1/2 + ridge I) X = rhs`` for one coalition, over the pool's classes.

    Symmetric positive definite (eigenvalues >= ridge). ``points`` are the classes'
    S columns divided by the lengthscales, for solvers that build their own kernels;
    ``gram`` is ``None`` when the solver said it does not want the dense matrix
    (``wants_gram = False``: iterative solvers that bound their memory).
    """

    points: torch.Tensor  # (r, k)
    gram: torch.Tensor | None  # (r, r) K_S between the classes, or None
    weights: torch.Tensor  # (r,) class multiplicities (> 0)
    ridge: float  # n * lambda
    rhs: torch.Tensor  # (r, c)


class CMESolver(Protocol):
    """Solves a batch of coalition systems, returning ``X`` for each.

    A solver may set ``wants_gram = False`` to receive systems without the dense
    ``r x r`` Gram (it then builds kernel blocks from ``points``); absent means True.
    """

    name: str

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]: ...


class CholeskySolver:
    """Dense Cholesky; systems of equal size batched if asked.

    Batching pays on GPUs (one kernel launch for many small systems); on CPU LAPACK
    loops over the batch anyway, so the default batches on CUDA only.
    """

    name = "cholesky"
    wants_gram = True

    def __init__(self, batch_equal_sizes: bool | None = None) -> None:
        self.batch_equal_sizes = batch_equal_sizes

    def solve(
        self, systems: Sequence[CMESystem], stats: EngineStats | None = None
    ) -> list[torch.Tensor]:
        if not systems:
            return []
        batch = self.batch_equal_sizes
        if batch is None:
            batch = systems[0].rhs.device.type == "cuda"
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, s in enumerate(systems):
            key = tuple(s.rhs.shape) if batch else (k,)
            groups.setdefault(key, []).append(k)
        out: dict[int, torch.Tensor] = {}
        for members in groups.values():
            solved = self._solve_stack([systems[k] for k in members], stats)
            out.update(zip(members, solved, strict=True))
        return [out[k] for k in range(len(systems))]

    def _solve_stack(
        self, systems: Sequence[CMESystem], stats: EngineStats | None
    ) -> list[torch.Tensor]:
        r, c = systems[0].rhs.shape
        grams = [s.gram if s.gram is not None else kernel(s.points, s.points) for s in systems]
        root_w = torch.stack([s.weights.sqrt() for s in systems])  # (b, r)
        a = root_w[:, :, None] * torch.stack(grams) * root_w[:, None, :]
        ridge = torch.tensor([s.ridge for s in systems], dtype=a.dtype, device=a.device)
        a.diagonal(dim1=-2, dim2=-1).add_(ridge[:, None])
        with maybe_timed(stats, "cholesky", len(systems) * r**3 / 3.0):
            chol, info = torch.linalg.cholesky_ex(a)
            if bool((info != 0).any()):
                chol = _cholesky_in_float64(a).to(a.dtype)
        with maybe_timed(stats, "solve", len(systems) * 2.0 * r * r * c):
            x = torch.cholesky_solve(torch.stack([s.rhs for s in systems]), chol)
        return list(x.unbind(0))


def _cholesky_in_float64(a: torch.Tensor, max_tries: int = 8) -> torch.Tensor:
    """Fallback for float32 systems that lost definiteness to rounding.

    Bounded: at most ``max_tries`` growing jitters (1e-10 .. 1e-3 of the mean
    diagonal). A matrix with NaN or infinite entries (a crafted model: lengthscales
    of 1e-200, items at 1e200) can never be factorised, so it is refused at once
    instead of spinning forever.
    """
    a64 = a.to(torch.float64)
    if not bool(torch.isfinite(a64).all()):
        raise NumericalError(
            "the CME system has NaN or infinite entries: the model's lengthscales, "
            "scales or item values overflow the kernel (check the model file)"
        )
    chol, info = torch.linalg.cholesky_ex(a64)
    scale = a64.diagonal(dim1=-2, dim2=-1).abs().mean()
    jitter = 1e-10 * (scale if bool(scale > 0) else torch.ones_like(scale))
    for _ in range(max_tries):
        if not bool((info != 0).any()):
            return chol
        a64.diagonal(dim1=-2, dim2=-1).add_(jitter)
        chol, info = torch.linalg.cholesky_ex(a64)
        jitter = jitter * 10
    if bool((info != 0).any()) or not bool(torch.isfinite(chol).all()):
        raise NumericalError(
            f"the CME system stays singular after {max_tries} growing jitters: raise the "
            "CME regulariser (cme_lambda) or check the model's lengthscales"
        )
    return chol


# -- rows, classes and Gamma ----------------------------------------------------------
def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (``-0.0`` and ``0.0`` equal) and each input row's index among them."""
    rows = np.ascontiguousarray(np.asarray(rows, dtype=np.float64) + 0.0)
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1).astype(np.int64)


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


def _first_of_each(labels: np.ndarray, n_labels: int) -> np.ndarray:
    first = np.empty(n_labels, dtype=np.int64)
    first[labels[::-1]] = np.arange(len(labels))[::-1]
    return first


@dataclass
class _Coalition:
    """Index bookkeeping of one coalition (NumPy; the heavy parts are torch)."""

    labels: np.ndarray  # (universe,) S class, pool classes first
    r: int  # number of pool S classes
    first: np.ndarray  # (classes,) a universe row of each S class
    q_cls: np.ndarray  # (q',) distinct S classes of the queries
    q_col: np.ndarray  # (queries,) column of each query in Gamma
    sc_first: np.ndarray  # (t,) a universe row of each Sc class (pool classes first)
    t_pool: int  # number of pool Sc classes
    sc_centre: np.ndarray  # (t_P,) Sc classes present among the centres
    sc_row: np.ndarray  # (centres,) index into sc_centre
    pair_s: np.ndarray  # pool (S class, Sc class) pairs and their total weight
    pair_sc: np.ndarray
    pair_w: np.ndarray


class CoalitionEmbedding:
    """``Gamma_S(P, Q)`` for a fixed weighted pool, centre rows and query rows.

    ``centres`` and ``queries`` are any model-space rows; those equal to a pool row
    share its classes, the others are extra rows that take part in the kernels but
    not in the pool's system. ``column_player[j]`` is the player of column ``j``.

    With ``M = K_Sc(P, X)`` summed within the pool's S classes, the middle factor
    is ``M (K W + c I)^-1 K_S(Z, Q)``. Two exact ways to form it, the cheaper is
    taken per coalition:

    * by queries: solve with the ``q'`` query classes as right-hand sides, then a
      GEMM with ``M`` (``2 r^2 q' + 2 t r q'`` flops);
    * by centres: solve with the ``t`` centre Sc classes as right-hand sides and use
      ``(K W + c I)^-1 K = W^-1 - c (K W + c I)^-1 W^-1``, so a query class of the
      pool needs only a gather (``2 r^2 t`` flops).
    """

    path = "auto"  # "auto" | "centres" | "queries": both exact; tests force each

    def __init__(
        self,
        pool: np.ndarray,
        pool_weights: np.ndarray | None,
        centres: np.ndarray,
        queries: np.ndarray,
        lengthscales: np.ndarray,
        column_player: np.ndarray,
        cme_lambda: float,
        compute: Compute,
        solver: CMESolver | None = None,
        stats: EngineStats | None = None,
    ) -> None:
        pool = np.atleast_2d(np.asarray(pool, dtype=np.float64))
        weights = np.ones(len(pool)) if pool_weights is None else np.asarray(pool_weights, float)
        if len(pool) == 0 or np.any(weights <= 0):
            raise ValueError("the pool needs at least one row, all weights positive")
        if not cme_lambda > 0:
            raise ValueError(f"cme_lambda must be positive, got {cme_lambda}")
        n_pool, n_centres = len(pool), len(centres)
        stacked = np.vstack([pool, np.atleast_2d(centres), np.atleast_2d(queries)])
        uniq, inverse = unique_rows(stacked)
        in_pool = np.zeros(len(uniq), dtype=bool)
        in_pool[inverse[:n_pool]] = True
        order = np.concatenate([np.flatnonzero(in_pool), np.flatnonzero(~in_pool)])
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        inverse = position[inverse]
        self.universe = uniq[order]
        self.n_pool = int(in_pool.sum())  # universe rows 0..n_pool-1 are the pool's
        self.pool_weights = np.bincount(inverse[:n_pool], weights=weights, minlength=self.n_pool)
        self.centre_rows = inverse[n_pool : n_pool + n_centres]
        self.query_rows = inverse[n_pool + n_centres :]
        self.column_player = np.asarray(column_player, dtype=np.int64)
        self.n_players = int(self.column_player.max()) + 1
        self.ridge = float(cme_lambda) * float(weights.sum())
        self.compute = compute
        self.solver: CMESolver = solver or CholeskySolver()
        self.stats = stats
        # Per-player codes: equal codes = equal rows on that player's columns.
        self._codes = np.stack(
            [
                unique_rows(self.universe[:, self.column_player == g])[1]
                for g in range(self.n_players)
            ],
            axis=1,
        )
        self._cardinality = self._codes.max(0) + 1
        self._scaled = compute.tensor(self.universe / np.asarray(lengthscales, dtype=np.float64))

    @property
    def n_centres(self) -> int:
        return len(self.centre_rows)

    # -- classes -----------------------------------------------------------------
    def _pool_first_labels(self, mask: np.ndarray) -> tuple[np.ndarray, int]:
        """Universe labels, equal iff rows agree on the mask's players; pool's first."""
        key = np.zeros(len(self.universe), dtype=np.int64)
        for g in np.flatnonzero(mask):
            key = key * self._cardinality[g] + self._codes[:, g]
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
        pool_keys = np.unique(key[: self.n_pool])
        remap = np.full(int(key.max()) + 1, -1, dtype=np.int64)
        remap[pool_keys] = np.arange(len(pool_keys))
        rest = np.flatnonzero(remap < 0)
        remap[rest] = len(pool_keys) + np.arange(len(rest))
        return remap[key], len(pool_keys)

    def _classes(self, mask: np.ndarray) -> _Coalition:
        labels, r = self._pool_first_labels(mask)
        sc_labels, t_pool = self._pool_first_labels(~mask)
        q_cls, q_col = np.unique(labels[self.query_rows], return_inverse=True)
        sc_centre, sc_row = np.unique(sc_labels[self.centre_rows], return_inverse=True)
        pool_s, pool_sc = labels[: self.n_pool], sc_labels[: self.n_pool]
        pairs, pair_index = np.unique(pool_s * (t_pool + 1) + pool_sc, return_inverse=True)
        pair_w = np.bincount(pair_index.reshape(-1), weights=self.pool_weights)
        return _Coalition(
            labels=labels,
            r=r,
            first=_first_of_each(labels, int(labels.max()) + 1),
            q_cls=q_cls,
            q_col=q_col.reshape(-1),
            sc_first=_first_of_each(sc_labels, int(sc_labels.max()) + 1),
            t_pool=t_pool,
            sc_centre=sc_centre,
            sc_row=sc_row.reshape(-1),
            pair_s=pairs // (t_pool + 1),
            pair_sc=pairs % (t_pool + 1),
            pair_w=pair_w,
        )

    # -- Gamma ---------------------------------------------------------------------
    def gammas(self, masks: np.ndarray) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Per coalition mask (over players): Gamma (n_centres, q') and the query columns.

        ``Gamma[:, query_column[k]]`` is the column of query ``k``.
        """
        prepared = [self._prepare(np.asarray(m, dtype=bool)) for m in masks]
        solutions = self.solver.solve([p["system"] for p in prepared], self.stats)
        return [self._finish(p, x) for p, x in zip(prepared, solutions, strict=True)]

    def _prepare(self, mask: np.ndarray) -> dict:
        c = self.compute
        with maybe_timed(self.stats, "classes"):
            co = self._classes(mask)
        with maybe_timed(self.stats, "kernels"):
            xs = self._scaled.index_select(1, c.index(np.flatnonzero(mask[self.column_player])))
            xc = self._scaled.index_select(1, c.index(np.flatnonzero(~mask[self.column_player])))
            z = xs[c.index(co.first)]
            # Every S class of the universe, unless the solver bounds its memory: then
            # only the blocks used below are formed (see _gram_block).
            dense = getattr(self.solver, "wants_gram", True)
            gram = kernel(z, z) if dense else None
            k_sc = kernel(
                xc[c.index(co.sc_first[: co.t_pool])], xc[c.index(co.sc_first[co.sc_centre])]
            )
            # mixed_t[s, t] = sum of w K_Sc(pool row, centre class t) over the pool rows
            # in S class s: a sparse (S class x Sc class) table of pool weights times k_sc.
            counts = sparse_csr(c, co.pair_s, co.pair_sc, co.pair_w, (co.r, co.t_pool))
            mixed_t = counts @ k_sc
            weights = torch.zeros(co.r, dtype=k_sc.dtype, device=k_sc.device)
            weights.index_add_(0, c.index(co.pair_s), c.tensor(co.pair_w))
        r, t, q = co.r, len(co.sc_centre), len(co.q_cls)
        n_extra = int((co.q_cls >= r).sum())
        by_centres = r * r * t + n_extra * r * t < r * r * q + q * r * t
        if self.path != "auto":
            by_centres = self.path == "centres"
        root_w = weights.sqrt()
        if by_centres:
            rhs = mixed_t / root_w[:, None]
        else:
            rhs = root_w[:, None] * _gram_block(gram, z, slice(0, r), c.index(co.q_cls))
        system = CMESystem(
            points=z[:r],
            gram=None if gram is None else gram[:r, :r],
            weights=weights,
            ridge=self.ridge,
            rhs=rhs,
        )
        return {
            "co": co,
            "system": system,
            "gram": gram,
            "z": z,
            "mixed_t": mixed_t,
            "root_w": root_w,
            "by_centres": by_centres,
        }

    def _finish(self, prep: dict, x: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
        c, co = self.compute, prep["co"]
        gram, z, mixed_t, root_w = prep["gram"], prep["z"], prep["mixed_t"], prep["root_w"]
        r, t = co.r, mixed_t.shape[1]
        if prep["by_centres"]:
            # x = A^-1 W^-1/2 mixed_t; middle(q) = (mixed(q) - c W^1/2 x(q)) / w(q) for pool q
            in_pool = co.q_cls < r
            middle_t = torch.empty((len(co.q_cls), t), dtype=x.dtype, device=x.device)
            pool_q = c.index(co.q_cls[in_pool])
            w_q = root_w[pool_q][:, None]
            middle_t[c.index(np.flatnonzero(in_pool))] = (
                mixed_t[pool_q] - self.ridge * w_q * x[pool_q]
            ) / (w_q * w_q)
            if not in_pool.all():
                extra_q = c.index(co.q_cls[~in_pool])
                extra = _gram_block(gram, z, extra_q, slice(0, r)) * root_w[None, :]
                with maybe_timed(self.stats, "gemm", 2.0 * len(extra) * r * t):
                    middle_t[c.index(np.flatnonzero(~in_pool))] = extra @ x
        else:
            # x = A^-1 W^1/2 K_S(Z, Q); middle = mixed W^-1/2 x
            with maybe_timed(self.stats, "gemm", 2.0 * x.shape[1] * r * t):
                middle_t = x.T @ (mixed_t / root_w[:, None])
        with maybe_timed(self.stats, "gather"):
            p_lab = c.index(co.labels[self.centre_rows])
            if gram is not None:
                k_pq = gram.index_select(0, p_lab).index_select(1, c.index(co.q_cls))
            else:  # the distinct centre classes only, then gathered
                p_cls, p_row = np.unique(co.labels[self.centre_rows], return_inverse=True)
                k_pq = kernel(z[c.index(p_cls)], z[c.index(co.q_cls)])[c.index(p_row)]
            gamma = k_pq * middle_t.T[c.index(co.sc_row)]
        return gamma, co.q_col


def _gram_block(
    gram: torch.Tensor | None,
    z: torch.Tensor,
    rows: torch.Tensor | slice,
    cols: torch.Tensor | slice,
) -> torch.Tensor:
    """``K_S(z[rows], z[cols])``: a view of the dense Gram if there is one, else computed."""
    if gram is not None:
        block = gram[rows] if isinstance(rows, slice) else gram.index_select(0, rows)
        return block[:, cols] if isinstance(cols, slice) else block.index_select(1, cols)
    return kernel(z[rows], z[cols])
