"""Slow, obviously-correct Pref-SHAP, for tests; and random problems to test on.

Everything here is NumPy float64 straight from the formulas of docs/method.md: kernels
by explicit differences, one dense ``n x n`` solve per duel and coalition over the
full pool (duplicates and all), every centre evaluated, Shapley values by explicit
sums over subsets. No unique rows, no deduplication, no gathers: the engine must
agree with this to rounding.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.models.preference_function import PreferenceFunction


def rbf(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    """k(a_i, b_j) = exp(-1/2 sum ((a - b) / l)^2); no columns gives ones."""
    diff = (np.atleast_2d(a)[:, None, :] - np.atleast_2d(b)[None, :, :]) / lengthscales
    return np.exp(-0.5 * (diff**2).sum(-1))


def g_direct(fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, u=None) -> float:
    """The model output by model-format.md's formulas (C-GPM without u: g_bar)."""
    ls = fn.lengthscales
    kll, klr = rbf(fn.centres_left, x_l, ls)[:, 0], rbf(fn.centres_left, x_r, ls)[:, 0]
    krl, krr = rbf(fn.centres_right, x_l, ls)[:, 0], rbf(fn.centres_right, x_r, ls)[:, 0]
    if fn.kind == "upm":
        return float(fn.alpha @ (kll - krl) - fn.alpha @ (klr - krr))
    pair = kll * krr - klr * krl + fn.utility_weight * (kll + krr - klr - krl)
    return float(_context_alpha(fn, u) @ pair)


def _context_alpha(fn: PreferenceFunction, u=None) -> np.ndarray:
    if fn.kind != "cgpm":
        return np.asarray(fn.alpha)
    ku = lambda v: rbf(fn.centres_context, v, fn.context_lengthscales)  # noqa: E731
    if u is not None:
        return fn.alpha * ku(u)[:, 0]
    w = np.asarray(fn.context_weights)
    return fn.alpha * (ku(fn.contexts) @ w) / w.sum()


def gamma_direct(
    centres: np.ndarray,
    x: np.ndarray,
    pool: np.ndarray,
    cols: np.ndarray,
    ls: np.ndarray,
    lam: float,
) -> np.ndarray:
    """G(C, x) = K_S(C, x) * (K_Sc(C, X) (K_S(X, X) + n lam I)^-1 K_S(X, x)) per centre."""
    s, c = cols, ~cols
    n = len(pool)
    k_s_xx = rbf(pool[:, s], pool[:, s], ls[s])
    beta = np.linalg.solve(k_s_xx + n * lam * np.eye(n), rbf(pool[:, s], x[None, s], ls[s]))
    return (
        rbf(centres[:, s], x[None, s], ls[s])[:, 0]
        * (rbf(centres[:, c], pool[:, c], ls[c]) @ beta)[:, 0]
    )


def item_value(
    fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, columns: np.ndarray, lam: float
) -> float:
    """Prop. 3.2 for one duel and one column mask (no boundary shortcuts)."""
    ls, pool = fn.lengthscales, fn.items
    emb = lambda c, x: gamma_direct(c, x, pool, columns, ls, lam)  # noqa: E731
    gll, grr = emb(fn.centres_left, x_l), emb(fn.centres_right, x_r)
    glr, grl = emb(fn.centres_left, x_r), emb(fn.centres_right, x_l)
    if fn.kind == "upm":
        return float(fn.alpha @ (gll + grr - glr - grl))
    utility = fn.utility_weight * (gll + grr - glr - grl)
    return float(_context_alpha(fn) @ (gll * grr - glr * grl + utility))


def context_value(
    fn: PreferenceFunction,
    x_l: np.ndarray,
    x_r: np.ndarray,
    u: np.ndarray,
    columns: np.ndarray,
    lam: float,
) -> float:
    """Prop. 3.3 over the expanded contexts (each unique context repeated by its count)."""
    counts = np.asarray(fn.context_weights).astype(np.int64)
    if not np.allclose(counts, fn.context_weights):
        raise ValueError("the reference expands contexts, so it needs integer counts")
    expanded = np.repeat(np.asarray(fn.contexts), counts, axis=0)
    ls = fn.lengthscales
    kll, klr = rbf(fn.centres_left, x_l, ls)[:, 0], rbf(fn.centres_left, x_r, ls)[:, 0]
    krl, krr = rbf(fn.centres_right, x_l, ls)[:, 0], rbf(fn.centres_right, x_r, ls)[:, 0]
    xi = kll * krr - klr * krl + fn.utility_weight * (kll + krr - klr - krl)
    gu = gamma_direct(fn.centres_context, u, expanded, columns, fn.context_lengthscales, lam)
    return float(fn.alpha @ (gu * xi))


def shapley_by_subsets(value: Callable[[frozenset[int]], float], n_players: int) -> np.ndarray:
    """phi_i = sum over S not containing i of |S|!(p-|S|-1)!/p! (v(S + i) - v(S))."""
    p = n_players
    cache: dict[frozenset[int], float] = {}

    def v(s: frozenset[int]) -> float:
        if s not in cache:
            cache[s] = value(s)
        return cache[s]

    phi = np.zeros(p)
    for i in range(p):
        others = [j for j in range(p) if j != i]
        for size in range(p):
            weight = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                phi[i] += weight * (v(s | {i}) - v(s))
    return phi


def item_value_of_players(
    fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, lam: float
) -> Callable[[frozenset[int]], float]:
    """v over player sets with docs/method.md's boundaries: v(empty) = 0, v(all) = g."""
    space, p = fn.item_space, fn.item_space.n_groups

    def value(players: frozenset[int]) -> float:
        if not players:
            return 0.0
        if len(players) == p:
            return g_direct(fn, x_l, x_r)
        return item_value(fn, x_l, x_r, np.isin(space.feature_group, list(players)), lam)

    return value


def context_value_of_players(
    fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, u: np.ndarray, lam: float
) -> Callable[[frozenset[int]], float]:
    """v over context player sets: v(empty) = g_bar(x_l, x_r), v(all) = g(u, x_l, x_r)."""
    assert fn.context_space is not None
    space, p = fn.context_space, fn.context_space.n_groups

    def value(players: frozenset[int]) -> float:
        if not players:
            return g_direct(fn, x_l, x_r)
        if len(players) == p:
            return g_direct(fn, x_l, x_r, u[None, :])
        return context_value(fn, x_l, x_r, u, np.isin(space.feature_group, list(players)), lam)

    return value


def item_shapley(fn: PreferenceFunction, x_l: np.ndarray, x_r: np.ndarray, lam: float):
    """(phi, base, output) for one duel's item features."""
    phi = shapley_by_subsets(item_value_of_players(fn, x_l, x_r, lam), fn.item_space.n_groups)
    return phi, 0.0, g_direct(fn, x_l, x_r)


def context_shapley(fn: PreferenceFunction, x_l, x_r, u, lam: float):
    """(phi, base, output) for one duel's context features."""
    assert fn.context_space is not None
    value = context_value_of_players(fn, x_l, x_r, u, lam)
    phi = shapley_by_subsets(value, fn.context_space.n_groups)
    return phi, g_direct(fn, x_l, x_r), g_direct(fn, x_l, x_r, u[None, :])


def side_embedding(
    fn: PreferenceFunction, centres: np.ndarray, x: np.ndarray, columns: np.ndarray, lam: float
) -> np.ndarray:
    """One side's G_S(C, x): K(C, x) for all columns, the pool's mean embedding for none."""
    if columns.all():
        return rbf(centres, x, fn.lengthscales)[:, 0]
    if not columns.any():
        return rbf(centres, fn.items, fn.lengthscales).mean(1)
    return gamma_direct(centres, x, fn.items, columns, fn.lengthscales, lam)


def side_value(
    fn: PreferenceFunction,
    x_l: np.ndarray,
    x_r: np.ndarray,
    columns_left: np.ndarray,
    columns_right: np.ndarray,
    lam: float,
    utility_weight: float = 0.0,
) -> float:
    """The side-aware value v(S_l, S_r) by the issue's formula, centre by centre."""
    g_l = lambda c, x: side_embedding(fn, c, x, columns_left, lam)  # noqa: E731
    g_r = lambda c, x: side_embedding(fn, c, x, columns_right, lam)  # noqa: E731
    l_cl, l_cr = g_l(fn.centres_left, x_l), g_l(fn.centres_right, x_l)
    r_cl, r_cr = g_r(fn.centres_left, x_r), g_r(fn.centres_right, x_r)
    utility = l_cl - l_cr - r_cl + r_cr
    if fn.kind == "upm":
        return float(fn.alpha @ utility)
    alpha = _context_alpha(fn)
    return float(alpha @ (l_cl * r_cr - r_cl * l_cr + utility_weight * utility))


def side_shapley(
    fn: PreferenceFunction,
    x_l: np.ndarray,
    x_r: np.ndarray,
    lam: float,
    utility_weight: float = 0.0,
) -> tuple[np.ndarray, float, float]:
    """(phi over left's groups then right's, base 0, output g) by Shapley's formula."""
    space, p = fn.item_space, fn.item_space.n_groups

    def value(players: frozenset[int]) -> float:
        if not players:
            return 0.0
        if len(players) == 2 * p:
            return g_direct(fn, x_l, x_r)
        left = np.isin(space.feature_group, [i for i in players if i < p])
        right = np.isin(space.feature_group, [i - p for i in players if i >= p])
        return side_value(fn, x_l, x_r, left, right, lam, utility_weight)

    return shapley_by_subsets(value, 2 * p), 0.0, g_direct(fn, x_l, x_r)


# -- random problems ---------------------------------------------------------------
# Centre rows outside the pool in every random problem (the engine must handle both).
_EXTRA_CENTRES = 2


def random_feature_space(
    groups: list[tuple[str, int]], rng: np.random.Generator, n_rows: int, levels: int = 4
) -> tuple[FeatureSpace, np.ndarray]:
    """A feature space and rows in model space.

    ``groups``: (name, width); width 1 is a numeric column with ``levels`` distinct
    integer values (so rows repeat), wider groups are one-hot categoricals named
    ``"<group>=<category>"`` (one category per row).
    """
    names, group_of, raw_cols = [], [], []
    for g, (name, width) in enumerate(groups):
        if width == 1:
            names.append(name)
            group_of.append(g)
            raw_cols.append(rng.integers(0, levels, n_rows).astype(float)[:, None])
        else:
            names += [f"{name}={chr(ord('A') + k)}" for k in range(width)]
            group_of += [g] * width
            raw_cols.append(np.eye(width)[rng.integers(0, width, n_rows)])
    raw = np.hstack(raw_cols)
    offset = raw.mean(0)
    scale = np.where(raw.std(0) > 0, raw.std(0), 1.0)
    space = FeatureSpace(
        feature_names=tuple(names),
        group_names=tuple(name for name, _ in groups),
        feature_group=np.array(group_of),
        offset=offset,
        scale=scale,
    )
    return space, space.standardise(raw)


def random_preference_function(
    kind: str,
    n_items: int = 12,
    n_centres: int = 10,
    groups: list[tuple[str, int]] | None = None,
    context_groups: list[tuple[str, int]] | None = None,
    n_contexts: int = 5,
    seed: int = 0,
    levels: int = 3,
) -> PreferenceFunction:
    """A PreferenceFunction with random alpha, centres drawn from the pool (plus
    two centre rows outside it) and random lengthscales: what a model
    file gives, without training."""
    rng = np.random.default_rng(seed)
    groups = groups or [("a", 1), ("b", 1), ("type", 3), ("c", 1)]
    space, items = random_feature_space(groups, rng, n_items, levels)
    d = space.n_features
    left, right = rng.integers(0, n_items, n_centres), rng.integers(0, n_items, n_centres)
    centres_left, centres_right = items[left].copy(), items[right].copy()
    for k in range(min(_EXTRA_CENTRES, n_centres)):
        centres_left[k] += rng.normal(0, 0.3, d)
    fields: dict = {}
    if kind == "cgpm":
        context_groups = context_groups or [("indoor", 1), ("surface", 3)]
        cspace, ctx = random_feature_space(context_groups, rng, n_contexts, 2)
        ctx, _ = np.unique(ctx, axis=0, return_inverse=True)
        cu = ctx[rng.integers(0, len(ctx), n_centres)].copy()
        cu[: min(_EXTRA_CENTRES, n_centres)] += rng.normal(0, 0.2, cspace.n_features)
        fields = {
            "context_space": cspace,
            "contexts": ctx,
            "context_weights": rng.integers(1, 4, len(ctx)).astype(float),
            "context_lengthscales": rng.uniform(0.7, 2.0, cspace.n_features),
            "centres_context": cu,
            "context_cme_lambda": 0.05,
        }
    return PreferenceFunction(
        kind=kind,
        item_space=space,
        item_ids=np.array([f"i{k}" for k in range(n_items)]),
        items=items,
        lengthscales=rng.uniform(0.7, 2.0, d),
        centres_left=centres_left,
        centres_right=centres_right,
        alpha=rng.normal(0, 1, n_centres),
        cme_lambda=0.05,
        utility_weight=0.0,
        **fields,
    )
