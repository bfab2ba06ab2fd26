"""PreferenceFunction: a fitted g, with everything needed to evaluate and explain it.

Its fields are exactly the arrays of the model file (docs/model-format.md), all in
model space. Estimators (GPM, UPM, C-GPM) produce one in ``function_``; the file
reader produces one from any file that follows the contract; the explainer takes one.

    GPM   g(x_l, x_r)    = sum_j alpha_j ( [k(cl_j,x_l) k(cr_j,x_r) - k(cl_j,x_r) k(cr_j,x_l)]
                                      + w [k(cl_j,x_l) + k(cr_j,x_r) - k(cl_j,x_r) - k(cr_j,x_l)] )
    UPM   g(x_l, x_r)    = f(x_l) - f(x_r),  f(x) = sum_j alpha_j [k(cl_j,x) - k(cr_j,x)]
    C-GPM g(u, x_l, x_r) = sum_j alpha_j k_U(cu_j, u) ( ...as GPM... )

with the utility weight ``w >= 0`` (0: the plain GPM; ignored by a UPM).
By linearity g = utility part + intransitive part (the ``w`` bracket and the GPM
bracket): :meth:`PreferenceFunction.decision_parts` returns both.

With no context given, a C-GPM is evaluated as the context-averaged model
``g_bar = E_U[g(U, ., .)]`` over the observed contexts (``contexts`` weighted by
``context_weights``), which is also what its item explanations explain.

Exact antisymmetry: every duel is evaluated in a canonical orientation (smaller pool
row on the left) and deduplicated, then signs are restored, so ``g(a, b)`` and
``g(b, a)`` are the same float computation negated, wherever they stand in a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from prefshap_core.compute import Compute, transposed
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import NotFittedError
from prefshap_core.kernels.rbf import rbf_gram
from prefshap_core.kernels.rows import unique_rows
from prefshap_core.models.centres import GameCentres
from prefshap_core.models.decision_parts import DecisionParts
from prefshap_core.models.extrapolation import outside_range, warn_if_outside

KINDS = ("gpm", "upm", "cgpm")


@dataclass(frozen=True, eq=False)
class PreferenceFunction:
    kind: str
    item_space: FeatureSpace
    item_ids: np.ndarray  # (n,) str
    items: np.ndarray  # (n, d) the item pool X, model space
    lengthscales: np.ndarray  # (d,)
    centres_left: np.ndarray  # (M, d)
    centres_right: np.ndarray  # (M, d)
    alpha: np.ndarray  # (M,)
    cme_lambda: float
    context_space: FeatureSpace | None = None
    contexts: np.ndarray | None = None  # (p, d') unique observed contexts
    context_weights: np.ndarray | None = None  # (p,) their counts
    context_lengthscales: np.ndarray | None = None  # (d',)
    centres_context: np.ndarray | None = None  # (M, d')
    context_cme_lambda: float | None = None
    utility_weight: float = 0.0  # w of the sum kernel k_E + w k_UPM (gpm, cgpm)
    metadata: dict[str, Any] = field(default_factory=dict)
    # (M, r) F with Sigma ~= F F^T, the Laplace posterior of alpha (models.posterior)
    posterior_factor: np.ndarray | None = None
    item_names: np.ndarray | None = None  # (n,) str display names of the items; None: the ids

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        m, d = np.shape(self.centres_left)
        if np.shape(self.centres_right) != (m, d) or np.shape(self.alpha) != (m,):
            raise ValueError("centres_left, centres_right and alpha disagree in size")
        if np.shape(self.items)[1] != d or np.shape(self.lengthscales) != (d,):
            raise ValueError("items, centres and lengthscales disagree in dimension")
        if not (np.isfinite(self.utility_weight) and self.utility_weight >= 0):
            raise ValueError("utility_weight must be a finite number >= 0")
        if self.kind == "cgpm":
            needed = (
                "context_space",
                "contexts",
                "context_weights",
                "context_lengthscales",
                "centres_context",
                "context_cme_lambda",
            )
            missing = [name for name in needed if getattr(self, name) is None]
            if missing:
                raise ValueError(f"a C-GPM needs {', '.join(missing)}")
        factor = self.posterior_factor
        if factor is not None and (np.ndim(factor) != 2 or np.shape(factor)[0] != m):
            raise ValueError(f"posterior_factor must be ({m}, r), got {np.shape(factor)}")
        names = self.item_names
        if names is not None and np.shape(names) != (len(self.item_ids),):
            raise ValueError(f"item_names must be ({len(self.item_ids)},), got {np.shape(names)}")

    # -- sizes -------------------------------------------------------------------
    @property
    def n_centres(self) -> int:
        return len(self.alpha)

    @property
    def has_context(self) -> bool:
        return self.kind == "cgpm"

    @property
    def item_labels(self) -> np.ndarray:
        """(n,) str: the items' names where the file has them, else their ids."""
        names = self.item_ids if self.item_names is None else self.item_names
        return np.asarray(names).astype(str)

    # -- kernels -----------------------------------------------------------------
    def context_kernel_to_centres(self, u: np.ndarray, compute: Compute) -> torch.Tensor:
        """(M, len(u)) k_U(cu_j, u)."""
        assert self.centres_context is not None and self.context_lengthscales is not None
        return rbf_gram(
            compute.tensor(self.centres_context),
            compute.tensor(u),
            compute.tensor(self.context_lengthscales),
        )

    def averaged_alpha(self, compute: Compute) -> torch.Tensor:
        """alpha for the context-averaged model: alpha_j * mean_i k_U(u_i, cu_j)."""
        alpha = compute.tensor(self.alpha)
        if self.kind != "cgpm":
            return alpha
        assert self.contexts is not None and self.context_weights is not None
        ku = self.context_kernel_to_centres(self.contexts, compute)
        w = compute.tensor(self.context_weights)
        return alpha * (ku @ w) / w.sum()

    # -- the games' set-up ----------------------------------------------------------
    def item_centres(self) -> GameCentres:
        """The item and side games' centres: the distinct rows among the centres' left and
        right items (``index``: left, right), over the item pool."""
        rows, index = unique_rows(np.vstack([self.centres_left, self.centres_right]))
        return GameCentres(
            rows=rows,
            index=index.reshape(2, self.n_centres),
            pool=self.items,
            pool_weights=None,
            lengthscales=self.lengthscales,
            column_player=self.item_space.feature_group,
        )

    def context_centres(self) -> GameCentres:
        """The context game's centres (C-GPM): the distinct centre contexts, over the
        observed contexts weighted by their counts."""
        assert self.context_space is not None and self.contexts is not None
        assert self.context_lengthscales is not None
        rows, index = unique_rows(np.asarray(self.centres_context))
        return GameCentres(
            rows=rows,
            index=index[None, :],
            pool=self.contexts,
            pool_weights=self.context_weights,
            lengthscales=self.context_lengthscales,
            column_player=self.context_space.feature_group,
        )

    # -- evaluation ----------------------------------------------------------------
    def decision(
        self,
        x_left: np.ndarray,
        x_right: np.ndarray,
        u: np.ndarray | None = None,
        compute: Compute | None = None,
    ) -> np.ndarray:
        """g for model-space rows (q, d); C-GPM without ``u``: context-averaged.

        Rows outside the training range warn (:meth:`outside_training_range`)."""
        warn_if_outside(self.outside_training_range(x_left, x_right, u))
        return self.decision_on_pool(*self._pooled(x_left, x_right, u), compute=compute)

    def decision_on_pool(
        self,
        pool: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context_pool: np.ndarray | None = None,
        context_index: np.ndarray | None = None,
        compute: Compute | None = None,
        chunk: int = 8192,
    ) -> np.ndarray:
        """g for duels given as rows ``left``/``right`` of ``pool`` (and of ``context_pool``)."""
        terms = (0.0, 1.0) if self.kind == "upm" else (1.0, self.utility_weight)
        duels = (pool, left, right, context_pool, context_index)
        return self._bracket_sum(*duels, compute or Compute(), chunk, terms)

    def decision_parts(
        self,
        x_left: np.ndarray,
        x_right: np.ndarray,
        u: np.ndarray | None = None,
        compute: Compute | None = None,
    ) -> DecisionParts:
        """g split into its utility and intransitive parts; the call form of :meth:`decision`."""
        warn_if_outside(self.outside_training_range(x_left, x_right, u))
        return self.decision_parts_on_pool(*self._pooled(x_left, x_right, u), compute=compute)

    def decision_parts_on_pool(
        self,
        pool: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context_pool: np.ndarray | None = None,
        context_index: np.ndarray | None = None,
        compute: Compute | None = None,
        chunk: int = 8192,
    ) -> DecisionParts:
        """g = utility + intransitive, the call form of :meth:`decision_on_pool`.

        The sum kernel's two brackets, each evaluated alone (g is linear in them):
        the utility part ``w sum_j alpha_j (k_U) [k(cl_j,x_l) + k(cr_j,x_r) -
        k(cl_j,x_r) - k(cr_j,x_l)]`` is a difference ``f(x_l) - f(x_r)`` (for a C-GPM
        with context, of a context-dependent f), so transitive; the rest is the
        GPM bracket's. A UPM is all utility; a GPM with ``w = 0`` has none (both
        returned as exact zeros, the other part as :meth:`decision_on_pool`).
        """
        compute = compute or Compute()
        duels = (pool, left, right, context_pool, context_index)
        if self.kind == "upm" or self.utility_weight == 0:
            g = self.decision_on_pool(*duels, compute=compute, chunk=chunk)
            zero = np.zeros_like(g)
            return DecisionParts(g, zero) if self.kind == "upm" else DecisionParts(zero, g)
        utility = self._bracket_sum(*duels, compute, chunk, (0.0, self.utility_weight))
        intransitive = self._bracket_sum(*duels, compute, chunk, (1.0, 0.0))
        return DecisionParts(utility, intransitive)

    def outside_training_range(
        self, x_left: np.ndarray, x_right: np.ndarray | None = None, u: np.ndarray | None = None
    ) -> list[str]:
        """The columns of these model-space rows outside the observed pool's min/max (the
        items; a C-GPM's contexts for ``u``), one line each in raw units; [] when none."""
        rows = np.atleast_2d(x_left)
        if x_right is not None:
            rows = np.vstack([rows, np.atleast_2d(x_right)])
        out = outside_range(self.item_space, self.items, rows, "item")
        if u is not None and self.kind == "cgpm":
            assert self.context_space is not None and self.contexts is not None
            out += outside_range(self.context_space, self.contexts, u, "context")
        return out

    def _pooled(
        self, x_left: np.ndarray, x_right: np.ndarray, u: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Rows as duels on a pool: (pool, left, right, context_pool, context_index)."""
        x_left, x_right = np.atleast_2d(x_left), np.atleast_2d(x_right)
        q = len(x_left)
        pool, inverse = np.unique(np.vstack([x_left, x_right]), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        ctx_pool, ctx_index = self._context_rows(u)
        return pool, inverse[:q], inverse[q:], ctx_pool, ctx_index

    def _context_rows(self, u: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        if u is None or self.kind != "cgpm":
            return None, None
        ctx_pool, ctx_index = np.unique(np.atleast_2d(u), axis=0, return_inverse=True)
        return ctx_pool, ctx_index.reshape(-1)

    def _bracket_sum(
        self,
        pool: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context_pool: np.ndarray | None,
        context_index: np.ndarray | None,
        compute: Compute,
        chunk: int,
        terms: tuple[float, float],
    ) -> np.ndarray:
        """sum_j alpha_j (k_U) [gpm_weight * GPM bracket + utility_weight * utility bracket].

        ``terms = (gpm_weight, utility_weight)``: (1, w) is g, (0, 1) a UPM's g, and
        (1, 0) / (0, w) the two parts of a sum kernel's g.
        """
        gpm_weight, utility_weight = terms
        left = np.asarray(left, dtype=np.int64)
        right = np.asarray(right, dtype=np.int64)
        with_context = self.kind == "cgpm" and context_pool is not None
        ctx = (
            np.asarray(context_index, dtype=np.int64)
            if with_context
            else np.zeros(len(left), dtype=np.int64)
        )
        sign = np.where(left > right, -1.0, 1.0)
        a, b = np.minimum(left, right), np.maximum(left, right)
        keys, inverse = np.unique(np.stack([a, b, ctx], 1), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        # Kernels over the pool rows these duels use only, one row per pool row
        # (rows x centres): the duels gather rows, which are contiguous (gathering
        # columns of a centres x rows matrix was 3.4x slower on tennis's test duels).
        used, position = np.unique(keys[:, :2], return_inverse=True)
        position = compute.index(position.reshape(-1, 2))
        k_left, k_right = self.row_kernels(np.asarray(pool)[used], compute)  # (U, M) each
        if with_context:
            alpha = compute.tensor(self.alpha)
            ku = self.context_kernel_to_centres(context_pool, compute)  # (M, C)
        else:
            alpha = self.averaged_alpha(compute)

        values = torch.zeros(len(keys), dtype=compute.torch_dtype, device=compute.torch_device)
        ia, ib = position[:, 0], position[:, 1]
        context = compute.index(keys[:, 2]) if with_context else None
        if gpm_weight != 0:
            ku_rows = transposed(ku) if with_context else None  # (C, M)
            for start in range(0, len(keys), chunk):
                block = slice(start, start + chunk)
                pair = k_left.index_select(0, ia[block]) * k_right.index_select(0, ib[block])
                pair -= k_left.index_select(0, ib[block]) * k_right.index_select(0, ia[block])
                if ku_rows is not None:
                    pair *= ku_rows.index_select(0, context[block])
                values[block] = pair @ alpha
            if gpm_weight != 1:
                values.mul_(gpm_weight)
        if utility_weight != 0:
            # The utility bracket sums to f(a) - f(b): f per used row (and context).
            diff = k_left - k_right
            if with_context:
                f = diff @ (alpha[:, None] * ku)  # (U, C)
                utility = f[ia, context] - f[ib, context]
            else:
                f = diff @ alpha
                utility = f[ia] - f[ib]
            values.add_(utility, alpha=utility_weight)
        g = values.cpu().numpy().astype(np.float64)[inverse] * sign
        g[left == right] = 0.0
        return g

    def centre_brackets_on_pool(
        self,
        pool: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context_pool: np.ndarray | None = None,
        context_index: np.ndarray | None = None,
        compute: Compute | None = None,
        context_factor: bool = True,
    ) -> torch.Tensor:
        """(q, M) ``b(x)``, each centre's bracket per duel: ``g = b(x) @ alpha``.

        The brackets :meth:`decision_on_pool` sums (same orientation rule, C-GPM
        context factor ``k_U(cu_j, u)``, or its context average without context;
        ``context_factor=False``: the item brackets alone).
        """
        compute = compute or Compute()
        left = np.asarray(left, dtype=np.int64)
        right = np.asarray(right, dtype=np.int64)
        terms = (0.0, 1.0) if self.kind == "upm" else (1.0, self.utility_weight)
        sign = compute.tensor(np.where(left > right, -1.0, 1.0))
        ia = compute.index(np.minimum(left, right))
        ib = compute.index(np.maximum(left, right))
        k_left, k_right = self.centre_kernels(pool, compute)
        diff = k_left - k_right if terms[1] != 0 else None
        brackets = _pair_brackets(k_left, k_right, diff, ia, ib, terms) * sign[None, :]
        if self.kind == "cgpm" and context_factor:
            if context_pool is not None:
                ku = self.context_kernel_to_centres(context_pool, compute)
                brackets = brackets * ku[:, compute.index(np.asarray(context_index))]
            else:  # the context average: alpha_j's factor in averaged_alpha
                assert self.contexts is not None and self.context_weights is not None
                ku = self.context_kernel_to_centres(self.contexts, compute)
                w = compute.tensor(self.context_weights)
                brackets = brackets * ((ku @ w) / w.sum())[:, None]
        return brackets.T

    def decision_sd(
        self,
        x_left: np.ndarray,
        x_right: np.ndarray,
        u: np.ndarray | None = None,
        compute: Compute | None = None,
    ) -> np.ndarray:
        """Posterior sd of g, ``sqrt(b(x)^T F F^T b(x))``; the call form of :meth:`decision`."""
        warn_if_outside(self.outside_training_range(x_left, x_right, u))
        return self.decision_sd_on_pool(*self._pooled(x_left, x_right, u), compute=compute)

    def decision_sd_on_pool(
        self,
        pool: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        context_pool: np.ndarray | None = None,
        context_index: np.ndarray | None = None,
        compute: Compute | None = None,
        chunk: int = 4096,
    ) -> np.ndarray:
        """Posterior sd of g for duels on a pool (:meth:`decision_on_pool`'s form)."""
        from prefshap_core.models.posterior import decision_sd_on_pool

        duels = (pool, left, right, context_pool, context_index)
        return decision_sd_on_pool(self, *duels, compute=compute or Compute(), chunk=chunk)

    def require_posterior(self) -> np.ndarray:
        """The posterior factor F, or an error that says to retrain."""
        if self.posterior_factor is None:
            raise NotFittedError(
                "this model file has no posterior (posterior_factor), so it has no "
                "uncertainty: retrain it with this version (logistic loss) to get one"
            )
        return self.posterior_factor

    def decision_matrix(self, pool: np.ndarray, compute: Compute | None = None) -> np.ndarray:
        """(P, P) ``G_ab = g(pool_a, pool_b)`` for every pair of ``pool`` rows.

        The same g as :meth:`decision_on_pool` without context (C-GPM: context-
        averaged), as two matrix products instead of P^2 duels: with
        ``A = (alpha * K(C_l, pool))' K(C_r, pool)``, ``G = A - A'`` (UPM:
        ``f_a - f_b``; a sum kernel adds ``w (f_a - f_b)``), so G is exactly
        skew-symmetric with a zero diagonal.
        """
        compute = compute or Compute()
        kernels = self.centre_kernels(pool, compute)
        g = self.pair_block(self.averaged_alpha(compute), kernels)
        return g.cpu().numpy().astype(np.float64)

    def centre_kernels(
        self, rows: np.ndarray, compute: Compute
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K(C_l, rows), K(C_r, rows))``, each (M, n): the centres' kernels to rows."""
        ls = compute.tensor(self.lengthscales)
        rows_t = compute.tensor(np.atleast_2d(rows))
        k_left = rbf_gram(compute.tensor(self.centres_left), rows_t, ls)
        return k_left, rbf_gram(compute.tensor(self.centres_right), rows_t, ls)

    def row_kernels(self, rows: np.ndarray, compute: Compute) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K(rows, C_l), K(rows, C_r))``, each (n, M): :meth:`centre_kernels` transposed,
        laid out for gathering rows."""
        ls = compute.tensor(self.lengthscales)
        rows_t = compute.tensor(np.atleast_2d(rows))
        k_left = rbf_gram(rows_t, compute.tensor(self.centres_left), ls)
        return k_left, rbf_gram(rows_t, compute.tensor(self.centres_right), ls)

    def pair_block(
        self,
        alpha: torch.Tensor,
        items: tuple[torch.Tensor, torch.Tensor],
        opponents: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """(n, k) ``g(item i, opponent j)`` from :meth:`centre_kernels` of both sides.

        ``alpha``: the coefficients to use (a C-GPM's context-weighted ones).
        ``opponents=None``: the items themselves, and then ``G = A - A'`` with
        ``A = (alpha * K_l)' K_r`` (UPM: ``f_a - f_b``; a sum kernel adds
        ``w (f_a - f_b)``), exactly skew-symmetric with a zero diagonal.
        """
        kl_i, kr_i = items
        kl_j, kr_j = items if opponents is None else opponents
        if self.kind == "upm" or self.utility_weight != 0:
            f_i = alpha @ (kl_i - kr_i)
            f_j = f_i if opponents is None else alpha @ (kl_j - kr_j)
            utility = f_i[:, None] - f_j[None, :]
            if self.kind == "upm":
                return utility
        a = (alpha[:, None] * kl_i).T @ kr_j
        g = a - (a.T if opponents is None else ((alpha[:, None] * kl_j).T @ kr_i).T)
        if self.utility_weight != 0:  # + w (f_a - f_b): skew-symmetric too
            g = g + self.utility_weight * utility
        return g

    def decision_for_ids(
        self,
        left_ids: np.ndarray,
        right_ids: np.ndarray,
        u: np.ndarray | None = None,
        compute: Compute | None = None,
    ) -> np.ndarray:
        """g for duels between items of the model's pool, by id."""
        index = {str(i): k for k, i in enumerate(self.item_ids)}
        try:
            left = np.array([index[str(i)] for i in left_ids], dtype=np.int64)
            right = np.array([index[str(i)] for i in right_ids], dtype=np.int64)
        except KeyError as err:
            raise KeyError(f"item id {err.args[0]!r} is not in the model's items") from None
        ctx_pool, ctx_index = self._context_rows(u)
        return self.decision_on_pool(self.items, left, right, ctx_pool, ctx_index, compute)


def _pair_brackets(
    k_left: torch.Tensor,
    k_right: torch.Tensor,
    diff: torch.Tensor | None,
    ia: torch.Tensor,
    ib: torch.Tensor,
    terms: tuple[float, float],
) -> torch.Tensor:
    """(M, c) each centre's bracket for duels (pool rows ``ia`` vs ``ib``), no alpha.

    ``terms = (gpm_weight, utility_weight)`` as in ``_bracket_sum``; ``diff`` is
    ``k_left - k_right`` (None when the utility weight is 0).
    """
    gpm_weight, utility_weight = terms
    if gpm_weight == 0:
        assert diff is not None
        return utility_weight * (diff[:, ia] - diff[:, ib])
    pair = k_left[:, ia] * k_right[:, ib] - k_left[:, ib] * k_right[:, ia]
    if diff is not None:
        pair = pair + utility_weight * (diff[:, ia] - diff[:, ib])
    return pair


def as_preference_function(model: Any) -> PreferenceFunction:
    """The fitted g of a model: a :class:`PreferenceFunction`, or an estimator's ``function_``."""
    if isinstance(model, PreferenceFunction):
        return model
    fn = getattr(model, "function_", None)
    if isinstance(fn, PreferenceFunction):
        return fn
    raise TypeError(f"expected a fitted model or a PreferenceFunction, got {type(model).__name__}")
